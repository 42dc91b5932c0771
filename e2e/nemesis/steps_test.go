package nemesis

import (
	"maps"
	"testing"
)

func TestCountOpens(t *testing.T) {
	h := &History{}
	for _, op := range []Op{
		{Kind: KindSeal, Outcome: "OK"},
		{Kind: KindOpen, Outcome: "OK"},
		{Kind: KindReplay, Outcome: "ALREADY_CONSUMED"},
		{Kind: KindFlowSeal, Outcome: "OK"},
		{Kind: KindFlowOpen, Outcome: "LEDGER_UNAVAILABLE"},
		{Kind: KindFlowReplay, Outcome: "ALREADY_CONSUMED"},
	} {
		h.Add(op)
	}
	got := CountOpens(h)
	want := Opens{Attempted: 4, OK: 1, Refusals: map[string]int{"ALREADY_CONSUMED": 2, "LEDGER_UNAVAILABLE": 1}}
	if got.Attempted != want.Attempted || got.OK != want.OK || !maps.Equal(got.Refusals, want.Refusals) {
		t.Errorf("got %v, want %v", got, want)
	}
}
