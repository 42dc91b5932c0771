// Package testenv is how a test finds what the test command
// (scripts/test.sh) installs, builds or starts for it: under CI a missing
// piece fails the test loudly, elsewhere it skips it with a hint.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Missing ends the test for want of something the test command provides:
// a failure under CI, a skip elsewhere. The message says what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; scripts/test.sh provides it", msg)
	}
	t.Skipf("%s: run scripts/test.sh, which provides it", msg)
}

// File returns the file that the environment variable env names, or ends
// the test (Missing) when it is unset or absent; what says what it is.
func File(t testing.TB, env, what string) string {
	t.Helper()
	path := os.Getenv(env)
	if _, err := os.Stat(path); path == "" || err != nil {
		Missing(t, "no %s (%s=%q)", what, env, path)
	}
	return path
}

// Tmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted at
// the end of the test, and returns the directory: a file system a test
// can fill. Mounting needs root, which the test command has under CI.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		Missing(t, "cannot mount a tmpfs (root is needed): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Fill fills the file system of dir with one file, which it returns; the
// file system then has no room left.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break // ENOSPC: full
		}
	}
	for n := 1 << 19; n > 0; n /= 2 { // what room is left after the last whole MiB
		f.Write(buf[:n])
	}
	return path
}

// The lanes of the test command (scripts/test.sh), in which the
// end-to-end tests run side by side.
const (
	// LaneE2E: the end-to-end tests that run in the background.
	LaneE2E = "e2e"
	// LaneShown: those whose figures the docs quote, run verbosely last.
	LaneShown = "shown"
	// LaneFailover: the Redis failovers and the nemesis, which wait on
	// Redis for minutes, and the tests that wait out a ledger retention
	// (in parallel, at the lane's end).
	LaneFailover = "failover"
	// LaneConformance: the MCP conformance scenarios, without the race
	// detector.
	LaneConformance = "conformance"
	// LaneDeploy: the container image and the Helm chart (build tag
	// deploy).
	LaneDeploy = "deploy"
)

// Lane declares the lane of the test command that runs the test, as the
// first statement of every end-to-end test (a test holds them to it).
// Under the test command (SEALER_TEST_LANE set) a test of another lane is
// skipped; run by hand, every test runs.
func Lane(t testing.TB, lane string) {
	t.Helper()
	if cur := os.Getenv("SEALER_TEST_LANE"); cur != "" && cur != lane {
		t.Skipf("runs in the %s lane", lane)
	}
}
