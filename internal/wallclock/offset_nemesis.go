//go:build nemesis

package wallclock

import (
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// offsetFileEnv names the file holding the offset, a Go duration ("-3m"),
// read again every offsetPoll.
const (
	offsetFileEnv = "SEALER_NEMESIS_CLOCK_OFFSET_FILE"
	offsetPoll    = 100 * time.Millisecond
)

var current atomic.Int64

func init() {
	if path := os.Getenv(offsetFileEnv); path != "" {
		follow(path)
	}
}

// follow sets the offset from the file at path now and every offsetPoll.
func follow(path string) {
	read := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
			current.Store(int64(d))
		}
	}
	read()
	go func() {
		for range time.Tick(offsetPoll) {
			read()
		}
	}()
}

func offset() time.Duration { return time.Duration(current.Load()) }
