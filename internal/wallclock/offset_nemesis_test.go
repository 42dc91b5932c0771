//go:build nemesis

package wallclock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNow_FollowsTheOffsetFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "offset")
	for _, want := range []time.Duration{-3 * time.Minute, 4 * time.Second, 0} {
		if err := os.WriteFile(file, []byte(want.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if want == -3*time.Minute {
			follow(file)
		}
		deadline := time.Now().Add(30 * time.Second)
		for offset() != want {
			if time.Now().After(deadline) {
				t.Fatalf("the offset file says %v; the offset is still %v after 30 s (it is read every %v)", want, offset(), offsetPoll)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := Now().Sub(time.Now()).Round(time.Second); got != want {
			t.Fatalf("Now is %v from the system clock, want %v", got, want)
		}
	}
}
