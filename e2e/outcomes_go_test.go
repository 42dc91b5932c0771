package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// exampleMCP is a running examples/mcpserver whose log a test reads: a
// line per payment approve_payment makes ("payment 1: paid 42.00").
type exampleMCP struct {
	URL, Host string
	logs      *syncBuffer
}

var mcpListening = regexp.MustCompile(`listening on (http://(\S+)/mcp)`)

// startExampleMCP is startMCP keeping the server's log.
func startExampleMCP(t *testing.T, s *proc, flags ...string) *exampleMCP {
	t.Helper()
	m := &exampleMCP{logs: &syncBuffer{}}
	cmd := exec.Command(mcpBinary, append([]string{"-addr", "127.0.0.1:0", "-sealer", s.GRPC}, flags...)...)
	cmd.Stderr = m.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "the example MCP server to listen", 15*time.Second, func() bool {
		return mcpListening.MatchString(m.logs.String())
	})
	match := mcpListening.FindStringSubmatch(m.logs.String())
	m.URL, m.Host = match[1], match[2]
	return m
}

// barrier makes a payment of its own (of an amount no test pays) and waits
// for its line: the lines of every payment made before it are then read.
var barrier atomic.Int64

// paid returns how many payments of amount the server made, counting every
// payment made before the call: a payment is logged before it is answered.
func (m *exampleMCP) paid(t *testing.T, cs *mcp.ClientSession, amount float64) int {
	t.Helper()
	mark := float64(1000000 + barrier.Add(1))
	args := map[string]any{"amount": mark}
	state := firstRound(t, cs, "approve_payment", args)
	if r, err := retry(cs, "approve_payment", args, state, "approve", map[string]any{"ok": true}); err != nil || resultText(t, r) != fmt.Sprintf("Paid %.2f", mark) {
		t.Fatalf("the barrier's payment: got %+v, %v", r, err)
	}
	line := regexp.MustCompile(fmt.Sprintf(`payment \d+: paid %s\n`, regexp.QuoteMeta(fmt.Sprintf("%.2f", mark))))
	waitFor(t, "the barrier's payment in the log", 10*time.Second, func() bool { return line.MatchString(m.logs.String()) })
	return len(regexp.MustCompile(fmt.Sprintf(`payment \d+: paid %s\n`, regexp.QuoteMeta(fmt.Sprintf("%.2f", amount)))).FindAllString(m.logs.String(), -1))
}

// cutFirstRetry cuts the answer to the first request that carries a
// requestState, and to no other.
func cutFirstRetry(t *testing.T, upstream string) *answerCutter {
	var done atomic.Bool
	return cutAnswers(t, upstream, func(body []byte) bool {
		return bytes.Contains(body, []byte(`"requestState"`)) && done.CompareAndSwap(false, true)
	})
}

// answerOf names what a tool call got: the result's text, "-32602", or the
// error.
func answerOf(r *mcp.CallToolResult, err error) string {
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams:
		return "-32602"
	case err != nil:
		return "error: " + err.Error()
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, " ")
}

// The answer to the payment's round 2 is lost after the handler paid; the
// client's retry with the same state gets the same answer, and the handler
// has paid once. Retries by another principal, with other arguments or
// other input keys are refused (-32602, for the reason that fits), and
// none of them learns the answer; the owner's retry still gets it.
func TestOutcomes_Go_CutAnswerIsReplayed(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	m := startExampleMCP(t, s)
	cutter := cutFirstRetry(t, m.Host)
	cs := mcpSession(t, "http://"+cutter.Addr+"/mcp", "alice-token", false, nil)
	args, approve := map[string]any{"amount": 42}, map[string]any{"ok": true}
	state := firstRound(t, cs, "approve_payment", args)

	r, err := retry(cs, "approve_payment", args, state, "approve", approve)
	if err == nil || cutter.Cut.Load() != 1 {
		t.Fatalf("round 2: got %+v, %v, %d answers cut; want its answer lost", r, err, cutter.Cut.Load())
	}
	r, err = retry(cs, "approve_payment", args, state, "approve", approve)
	if got := answerOf(r, err); got != "Paid 42.00" {
		t.Fatalf("the retry of round 2: got %q, want the answer that was lost, Paid 42.00", got)
	}

	mallory := mcpSession(t, "http://"+cutter.Addr+"/mcp", "mallory-token", false, nil)
	for _, tc := range []struct {
		what   string
		call   func() (*mcp.CallToolResult, error)
		reason string
	}{
		{"another principal", func() (*mcp.CallToolResult, error) {
			return retry(mallory, "approve_payment", args, state, "approve", approve)
		}, "PRINCIPAL_MISMATCH"},
		{"other arguments", func() (*mcp.CallToolResult, error) {
			return retry(cs, "approve_payment", map[string]any{"amount": 4200}, state, "approve", approve)
		}, "REQUEST_MISMATCH"},
		{"other input keys", func() (*mcp.CallToolResult, error) {
			return present(cs, "approve_payment", args, state, acceptAll(approve, "approve", "admin"))
		}, "INPUT_MISMATCH"},
		{"no input keys", func() (*mcp.CallToolResult, error) {
			return present(cs, "approve_payment", args, state, nil)
		}, "INPUT_MISMATCH"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			r, err := tc.call()
			wantInvalidParams(t, r, err)
			if strings.Contains(err.Error(), "Paid") {
				t.Errorf("the refusal discloses the answer: %v", err)
			}
			waitFor(t, "the sealer to refuse it "+tc.reason, 5*time.Second, func() bool {
				return strings.Contains(s.logs.String(), `"reason":"`+tc.reason+`"`)
			})
		})
	}
	r, err = retry(cs, "approve_payment", args, state, "approve", approve)
	if got := answerOf(r, err); got != "Paid 42.00" {
		t.Errorf("the owner's retry after the refusals: got %q, want Paid 42.00", got)
	}
	if n := m.paid(t, cs, 42); n != 1 {
		t.Errorf("the handler paid %d times, want 1", n)
	}
}

// 32 parallel retries of round 2 (the first of which consumes the state):
// the handler pays once, and all 32 get the same answer: those that came
// while it paid waited in the sealer for its answer.
func TestOutcomes_Go_ParallelRetriesPayOnce(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	m := startExampleMCP(t, s)
	cs := mcpSession(t, m.URL, "alice-token", false, nil)
	args := map[string]any{"amount": 42}
	state := firstRound(t, cs, "approve_payment", args)
	answers := concurrently(32, func(int) string {
		return answerOf(retry(cs, "approve_payment", args, state, "approve", map[string]any{"ok": true}))
	})
	if want := map[string]int{"Paid 42.00": 32}; !maps.Equal(answers, want) {
		t.Errorf("32 parallel retries: got %v, want %v", answers, want)
	}
	if n := m.paid(t, cs, 42); n != 1 {
		t.Errorf("the handler paid %d times, want 1", n)
	}
}

// Once the state has expired, its retry is refused as before (-32602,
// EXPIRED): the recorded answer lives no longer than the state it answers.
func TestOutcomes_Go_RefusedAfterTheStatesLife(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir(), "--skew", "0s")
	m := startExampleMCP(t, s, "-state-ttl", "2s")
	cs := mcpSession(t, m.URL, "alice-token", false, nil)
	args, approve := map[string]any{"amount": 42}, map[string]any{"ok": true}
	state := firstRound(t, cs, "approve_payment", args)
	if got := answerOf(retry(cs, "approve_payment", args, state, "approve", approve)); got != "Paid 42.00" {
		t.Fatalf("round 2: got %q, want Paid 42.00", got)
	}
	waitFor(t, "the retry to be refused once the state expired", 15*time.Second, func() bool {
		switch got := answerOf(retry(cs, "approve_payment", args, state, "approve", approve)); got {
		case "-32602":
			return true
		case "Paid 42.00": // not expired yet: the recorded answer
			return false
		default:
			t.Fatalf("a retry: got %q, want Paid 42.00 or -32602", got)
			return false
		}
	})
	waitFor(t, "the sealer to judge the state expired", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"EXPIRED"`)
	})
	if n := m.paid(t, cs, 42); n != 1 {
		t.Errorf("the handler paid %d times, want 1", n)
	}
}

// With -record-outcomes=false nothing is recorded: the retry of a round
// whose answer was lost is refused, as it was before outcomes.
func TestOutcomes_Go_OffByFlag(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	m := startExampleMCP(t, s, "-record-outcomes=false")
	cutter := cutFirstRetry(t, m.Host)
	cs := mcpSession(t, "http://"+cutter.Addr+"/mcp", "alice-token", false, nil)
	args, approve := map[string]any{"amount": 42}, map[string]any{"ok": true}
	state := firstRound(t, cs, "approve_payment", args)
	if _, err := retry(cs, "approve_payment", args, state, "approve", approve); err == nil || cutter.Cut.Load() != 1 {
		t.Fatalf("round 2: got %v, %d answers cut; want its answer lost", err, cutter.Cut.Load())
	}
	r, err := retry(cs, "approve_payment", args, state, "approve", approve)
	wantInvalidParams(t, r, err)
	waitFor(t, "the sealer to refuse it ALREADY_CONSUMED", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"ALREADY_CONSUMED"`)
	})
	if n := m.paid(t, cs, 42); n != 1 {
		t.Errorf("the handler paid %d times, want 1", n)
	}
}
