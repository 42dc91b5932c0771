package sealer

import "testing"

// TestMaxState checks the bounds on a state's length, written as constant
// expressions, against the encoding they stand for.
func TestMaxState(t *testing.T) {
	if want := b64.EncodedLen(FlowOverhead + MaxPayload); MaxState != want {
		t.Errorf("MaxState = %d, want %d", MaxState, want)
	}
	if want := b64.EncodedLen(Overhead); minState != want {
		t.Errorf("minState = %d, want %d", minState, want)
	}
}
