//go:build !nemesis

package wallclock

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A binary built without the tag nemesis reads the system clock, whatever
// the environment says: the test runs itself again with an offset file of
// an hour named.
func TestNow_IgnoresTheOffsetFileWithoutTheTag(t *testing.T) {
	if os.Getenv("WALLCLOCK_CHILD") != "" {
		if d := time.Since(Now()).Abs(); d > time.Second {
			t.Fatalf("Now is %v from the system clock", d)
		}
		return
	}
	file := filepath.Join(t.TempDir(), "offset")
	if err := os.WriteFile(file, []byte("1h"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNow_IgnoresTheOffsetFileWithoutTheTag$", "-test.v")
	cmd.Env = append(os.Environ(), "WALLCLOCK_CHILD=1", "SEALER_NEMESIS_CLOCK_OFFSET_FILE="+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
