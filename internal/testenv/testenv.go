// Package testenv is how a test finds what the test command
// (scripts/test.sh) installs, builds or starts for it: under CI a missing
// piece fails the test loudly, elsewhere it skips it with a hint.
package testenv

import (
	"fmt"
	"os"
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
