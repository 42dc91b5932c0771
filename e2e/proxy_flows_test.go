package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The naive server's three-round tool (examples/naiveserver, book_trip):
// round 1 asks dates, round 2 seat, round 3 confirm.
var (
	tripArgs    = map[string]any{"city": "Paris"}
	tripDates   = acceptAll(map[string]any{"dates": "May 1-3"}, "dates")
	tripSeat    = acceptAll(map[string]any{"seat": "12A"}, "seat")
	tripConfirm = acceptAll(map[string]any{"ok": true}, "confirm")
)

// tripRounds walks book_trip through its three rounds and returns the
// state of each.
func tripRounds(t *testing.T, cs *mcp.ClientSession) [3]string {
	t.Helper()
	s1 := firstRound(t, cs, "book_trip", tripArgs)
	s2 := nextState(t, cs, "book_trip", tripArgs, s1, tripDates, "seat")
	s3 := nextState(t, cs, "book_trip", tripArgs, s2, tripSeat, "confirm")
	return [3]string{s1, s2, s3}
}

// TestProxy_R9_UnchangedServerGetsFlows: the naive server, unchanged,
// behind the proxy with its defaults: its three-round tool runs as a
// latest-only flow. After round 3 was issued, a rewind to round 1 or 2 and
// answers off script to round 3 (an extra key, a missing key, a key in
// another case) never reach the server, each refused by the sealer with its
// reason; round 3 then completes, once. Alone, the server takes the rewind.
func TestProxy_R9_UnchangedServerGetsFlows(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	audit := filepath.Join(t.TempDir(), "audit.log")
	s := start(t, t.TempDir(), "--audit-log", audit)
	up := startNaive(t)
	// Without recorded outcomes, which answer a retry of round 2, the latest
	// round opened, with its answer (TestOutcomes_Proxy_LostNextRoundIsReplayed).
	url := startProxy(t, s, up.url, "--principal", "bearer", "--record-outcomes=false")

	// Alone, the naive server asks round 2 again for round 1's state, after
	// round 3 was issued.
	direct := mcpSession(t, up.url, "alice-token", false, nil)
	plain := tripRounds(t, direct)
	nextState(t, direct, "book_trip", tripArgs, plain[0], tripDates, "seat")

	cs := mcpSession(t, url, "alice-token", false, nil)
	rounds := tripRounds(t, cs)
	for _, st := range rounds {
		if strings.Contains(st, "book_trip") {
			t.Fatalf("the proxy passed the upstream's plain state to the client: %q", st)
		}
	}
	for _, tc := range []struct {
		what      string
		state     string
		responses mcp.InputResponseMap
		reason    string
	}{
		{"rewind to round 1 after round 3 was issued", rounds[0], tripDates, "ALREADY_CONSUMED"},
		{"rewind to round 2 after round 3 was issued", rounds[1], tripSeat, "ALREADY_CONSUMED"},
		{"round 3 with an extra key", rounds[2], acceptAll(map[string]any{"ok": true}, "confirm", "discount"), "INPUT_MISMATCH"},
		{"round 3 without its key", rounds[2], nil, "INPUT_MISMATCH"},
		{"round 3 with its key in another case", rounds[2], acceptAll(map[string]any{"ok": true}, "Confirm"), "INPUT_MISMATCH"},
	} {
		wantAudited(t, audit, tc.what, map[string]int{"open " + tc.reason: 1}, func() {
			refusedBeforeUpstream(t, up, tc.what, func() (*mcp.CallToolResult, error) {
				return present(cs, "book_trip", tripArgs, tc.state, tc.responses)
			})
		})
	}
	r, err := present(cs, "book_trip", tripArgs, rounds[2], tripConfirm)
	if err != nil || resultText(t, r) != "Booked Paris, May 1-3, seat 12A" {
		t.Fatalf("round 3 answered as asked: got %+v, %v", r, err)
	}
	for i, st := range rounds {
		what := fmt.Sprintf("round %d after round 3 opened", i+1)
		wantAudited(t, audit, what, map[string]int{"open ALREADY_CONSUMED": 1}, func() {
			refusedBeforeUpstream(t, up, what, func() (*mcp.CallToolResult, error) {
				return present(cs, "book_trip", tripArgs, st, []mcp.InputResponseMap{tripDates, tripSeat, tripConfirm}[i])
			})
		})
	}
}

// tripFork sends 32 retries of round 1 of a new book_trip at once through
// the proxy at url, then retries every round-2 state they got, all at
// once. It returns how many retries of round 1 reached the upstream (its
// call count) and got a round-2 state, and how many of those opened.
func tripFork(t *testing.T, cs *mcp.ClientSession, up naive) (reached, next, nextOpened int) {
	t.Helper()
	s1 := firstRound(t, cs, "book_trip", tripArgs)
	var (
		mu     sync.Mutex
		states []string
	)
	before := up.calls(t)
	outcomes := concurrently(32, func(int) string {
		r, err := present(cs, "book_trip", tripArgs, s1, tripDates)
		o := callOutcome(r, err)
		if o == "input_required" {
			mu.Lock()
			states = append(states, r.RequestState)
			mu.Unlock()
		}
		return o
	})
	reached = up.calls(t) - before
	checkReasons(t, "retries of round 1", outcomes, "input_required", "-32602")
	nextOutcomes := concurrently(len(states), func(i int) string {
		return callOutcome(present(cs, "book_trip", tripArgs, states[i], tripSeat))
	})
	checkReasons(t, "retries of the round-2 states", nextOutcomes, "input_required", "-32602")
	return reached, len(states), nextOutcomes["input_required"]
}

// TestProxy_R9_ForksNeverReachUpstream: 32 parallel retries of round 1 of
// the naive server's tool, 20 times, through the proxy with its defaults:
// each time one reaches the server and one round-2 state opens. With
// --flows off (what the proxy did before flows) every retry reaches the
// server and walks its own branch.
func TestProxy_R9_ForksNeverReachUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	audit := filepath.Join(t.TempDir(), "audit.log")
	s := start(t, t.TempDir(), "--audit-log", audit)
	up := startNaive(t)
	t.Run("control: flows off", func(t *testing.T) {
		cs := mcpSession(t, startProxy(t, s, up.url, "--principal", "bearer", "--flows", "off"), "alice-token", false, nil)
		reached, next, opened := tripFork(t, cs, up)
		t.Logf("flows off: %d of 32 retries of round 1 reached the upstream, %d round-2 states, %d opened: %d forks", reached, next, opened, max(0, opened-1))
		if opened < 2 {
			t.Fatalf("%d round-2 states opened; the control should show the fork working", opened)
		}
	})
	t.Run("latest-only flows, 20 runs", func(t *testing.T) {
		// Without recorded outcomes, which give the 31 others the winner's
		// answer, its round-2 state with it.
		cs := mcpSession(t, startProxy(t, s, up.url, "--principal", "bearer", "--record-outcomes=false"), "alice-token", false, nil)
		var forks, reachedRuns []int
		// Each run: round 1 sealed, 32 opens of it (one wins), round 2
		// sealed and opened, round 3 sealed.
		want := map[string]int{"seal OK": 3 * 20, "open OK": 2 * 20, "open ALREADY_CONSUMED": 31 * 20}
		wantAudited(t, audit, "20 runs", want, func() {
			for run := range 20 {
				reached, next, opened := tripFork(t, cs, up)
				if reached != 1 || next != 1 || opened != 1 {
					t.Errorf("run %d: %d of 32 retries of round 1 reached the upstream, %d round-2 states, %d opened; want 1, 1, 1", run+1, reached, next, opened)
				}
				forks, reachedRuns = append(forks, max(0, opened-1)), append(reachedRuns, reached)
			}
		})
		t.Logf("latest-only flows: retries of round 1 that reached the upstream, per run of 32: %v", reachedRuns)
		t.Logf("latest-only flows: forks per run of 32 parallel retries (round-2 states that opened, less one): %v", forks)
	})
}

// TestProxy_R9_FlowEndsAtItsRoundsAndDeadline: behind the proxy, the naive
// server's tool cannot go past the sealer's --max-rounds (its round-3 state
// is refused to the client, -32602), nor past the flow's deadline however
// recent its round (refused before the server).
func TestProxy_R9_FlowEndsAtItsRoundsAndDeadline(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	audit := filepath.Join(t.TempDir(), "audit.log")
	s := start(t, t.TempDir(), "--audit-log", audit, "--max-rounds", "2", "--flow-ttl", "1s")
	up := startNaive(t)
	cs := mcpSession(t, startProxy(t, s, up.url, "--principal", "bearer", "--record-outcomes=false"), "alice-token", false, nil)

	s1 := firstRound(t, cs, "book_trip", tripArgs)
	s2 := nextState(t, cs, "book_trip", tripArgs, s1, tripDates, "seat")
	wantAudited(t, audit, "round 3 of a flow of 2 rounds", map[string]int{"open OK": 1, "seal FLOW_EXHAUSTED": 1}, func() {
		r, err := present(cs, "book_trip", tripArgs, s2, tripSeat)
		wantInvalidParams(t, r, err)
	})

	s1 = firstRound(t, cs, "book_trip", tripArgs)
	s2 = nextState(t, cs, "book_trip", tripArgs, s1, tripDates, "seat")
	time.Sleep(1100 * time.Millisecond) // past the deadline of the flow, not of round 2 alone
	wantAudited(t, audit, "round 2 after the flow's deadline", map[string]int{"open FLOW_EXPIRED": 1}, func() {
		refusedBeforeUpstream(t, up, "round 2 after the flow's deadline", func() (*mcp.CallToolResult, error) {
			return present(cs, "book_trip", tripArgs, s2, tripSeat)
		})
	})
}
