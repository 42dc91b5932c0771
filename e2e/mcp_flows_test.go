package e2e

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// acceptAll answers each key with an accepted elicitation of content.
func acceptAll(content map[string]any, keys ...string) mcp.InputResponseMap {
	m := mcp.InputResponseMap{}
	for _, k := range keys {
		m[k] = &mcp.ElicitResult{Action: "accept", Content: content}
	}
	return m
}

// present retries tool with args and state, answering with responses (nil:
// no inputResponses at all).
func present(cs *mcp.ClientSession, tool string, args map[string]any, state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, RequestState: state, InputResponses: responses})
}

// nextState presents state with responses and returns the state of the
// round the server answers with, which must ask exactly the keys ask.
func nextState(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, state string, responses mcp.InputResponseMap, ask ...string) string {
	t.Helper()
	r, err := present(cs, tool, args, state, responses)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if got := slices.Sorted(maps.Keys(r.InputRequests)); r.RequestState == "" || !slices.Equal(got, ask) {
		t.Fatalf("%s: got %+v asking %q, want a state asking %q", tool, r, got, ask)
	}
	return r.RequestState
}

// callOutcome names what a tool call got: "input_required" (a result with a state),
// "complete", "-32602", or another error.
func callOutcome(r *mcp.CallToolResult, err error) string {
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams:
		return "-32602"
	case err != nil:
		return "error: " + err.Error()
	case r.RequestState != "":
		return "input_required"
	}
	return "complete"
}

// auditFlush is longer than the time the sealer takes to flush its audit
// file (every 200 ms).
const auditFlush = 300 * time.Millisecond

// wantAudited runs call and checks the events it adds to the audit log
// file, by method and reason ("open ALREADY_CONSUMED"): exactly want. The
// sealer stamps an event before it answers the call, on the clock of this
// machine: call's events are those stamped once call began, however late
// the events of the calls before it are flushed.
func wantAudited(t *testing.T, file, what string, want map[string]int, call func()) {
	t.Helper()
	began := time.Now()
	call()
	got := auditOutcomesSince(t, file, began)
	for deadline := time.Now().Add(10 * time.Second); !maps.Equal(got, want) && time.Now().Before(deadline); got = auditOutcomesSince(t, file, began) {
		time.Sleep(50 * time.Millisecond)
	}
	if maps.Equal(got, want) {
		// And nothing more, one flush later (an event a loaded machine
		// flushes later still goes unseen: it never fails the test).
		time.Sleep(auditFlush)
		got = auditOutcomesSince(t, file, began)
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: the sealer audited %v, want %v", what, got, want)
	}
}

// TestMCP_R9_FlowOfTheGoExample: the Go example seals its rounds as a
// latest-only flow bound to the keys each round asks. Of 32 parallel
// retries of round 1 one goes on; round 1 never opens again; answers off
// script are refused (-32602, INPUT_MISMATCH) without burning the round;
// round 2 then completes, once.
func TestMCP_R9_FlowOfTheGoExample(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	audit := filepath.Join(t.TempDir(), "audit.log")
	s := start(t, t.TempDir(), "--audit-log", audit)
	url := startMCP(t, s)
	cs := mcpSession(t, url, "alice-token", false, nil)
	const tool = "test_input_required_result_multi_round"
	args, name, color := map[string]any{}, map[string]any{"name": "Alice"}, map[string]any{"color": "blue"}
	state1 := firstRound(t, cs, tool, args)

	var (
		mu   sync.Mutex
		next []string
	)
	wantAudited(t, audit, "32 parallel retries of round 1", map[string]int{"open OK": 1, "open ALREADY_CONSUMED": 31, "seal OK": 1}, func() {
		outcomes := concurrently(32, func(int) string {
			r, err := present(cs, tool, args, state1, acceptAll(name, "step1"))
			if o := callOutcome(r, err); o != "input_required" {
				return o
			}
			mu.Lock()
			next = append(next, r.RequestState)
			mu.Unlock()
			return "input_required"
		})
		t.Logf("32 parallel retries of round 1: %v", outcomes)
		if !maps.Equal(outcomes, map[string]int{"input_required": 1, "-32602": 31}) {
			t.Errorf("32 parallel retries of round 1: %v, want one input_required, 31 -32602", outcomes)
		}
	})
	if len(next) != 1 {
		t.Fatalf("%d retries of round 1 got a next round, want 1", len(next))
	}
	state2 := next[0]

	for _, tc := range []struct {
		what      string
		state     string
		responses mcp.InputResponseMap
		reason    string
	}{
		{"rewind: round 1 after round 2 was asked", state1, acceptAll(name, "step1"), "ALREADY_CONSUMED"},
		{"round 2 with an extra key", state2, acceptAll(color, "step2", "admin"), "INPUT_MISMATCH"},
		{"round 2 without its key", state2, nil, "INPUT_MISMATCH"},
		{"round 2 with its key in another case", state2, acceptAll(color, "Step2"), "INPUT_MISMATCH"},
		{"round 2 answering round 1's key", state2, acceptAll(color, "step1"), "INPUT_MISMATCH"},
	} {
		wantAudited(t, audit, tc.what, map[string]int{"open " + tc.reason: 1}, func() {
			r, err := present(cs, tool, args, tc.state, tc.responses)
			wantInvalidParams(t, r, err)
		})
	}
	r, err := present(cs, tool, args, state2, acceptAll(color, "step2"))
	if err != nil || resultText(t, r) != "Multi-round complete: Alice likes blue" {
		t.Fatalf("round 2 answered as asked: got %+v, %v", r, err)
	}
	wantAudited(t, audit, "round 2 again", map[string]int{"open ALREADY_CONSUMED": 1}, func() {
		r, err := present(cs, tool, args, state2, acceptAll(color, "step2"))
		wantInvalidParams(t, r, err)
	})
}
