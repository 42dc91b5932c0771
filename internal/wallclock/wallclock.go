// Package wallclock is the sealer's one reading of the wall clock for what
// states and ledger entries carry: when a state was issued, whether it
// expired, how long a ledger entry lives, how far this clock is from the
// ledger's.
//
// It is time.Now. Only a binary built with the build tag nemesis (the fault
// injection tests; the image, scripts/image.sh, is built without tags) shifts it by an offset read from the file that
// SEALER_NEMESIS_CLOCK_OFFSET_FILE names, so that a test can make one
// replica's clock wrong: Go reads the clock through the vDSO, not libc, so
// no preloaded library can.
package wallclock

import "time"

// Now returns the current wall-clock time.
func Now() time.Time {
	if o := offset(); o != 0 {
		return time.Now().Add(o)
	}
	return time.Now()
}
