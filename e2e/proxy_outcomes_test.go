package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// Recorded outcomes through sealer-proxy (README, "Recorded outcomes"): the
// naive server behind the proxy, an answerCutter in front of the proxy
// that loses the answer to one call after the server ran it, and the
// retries of that call's state.

// lostID is the JSON-RPC id of the call whose answer the cutter loses.
const lostID = 1001

// loseLostID is the cutter's choice: the call numbered lostID.
func loseLostID(body []byte) bool {
	return bytes.Contains(body, []byte(fmt.Sprintf(`"id":%d,`, lostID)))
}

// proxyReply is the JSON-RPC message that answers a call, as received.
type proxyReply struct {
	status int
	body   string // all of the HTTP body
	ID     json.RawMessage
	Result json.RawMessage
	Error  *struct {
		Code    int
		Message string
		Data    struct {
			Retryable bool
			Reason    string
		}
	}
}

// text is the text of a complete result; state and asks are the
// requestState and the inputRequests keys of an input_required one.
func (r proxyReply) text() string {
	var res struct{ Content []struct{ Text string } }
	json.Unmarshal(r.Result, &res)
	var out []string
	for _, c := range res.Content {
		out = append(out, c.Text)
	}
	return strings.Join(out, " ")
}

func (r proxyReply) state() string {
	var res struct{ RequestState string }
	json.Unmarshal(r.Result, &res)
	return res.RequestState
}

func (r proxyReply) String() string {
	if r.Error != nil {
		return fmt.Sprintf("HTTP %d, id %s, error %d %q", r.status, r.ID, r.Error.Code, r.Error.Message)
	}
	return fmt.Sprintf("HTTP %d, id %s, result %s", r.status, r.ID, r.Result)
}

// toolCall is the params of a tools/call of tool with arguments, state
// (none when empty) and inputResponses (raw JSON; none when empty).
func toolCallParams(tool, arguments, state, responses string) string {
	p := `{` + meta + `,"name":"` + tool + `","arguments":` + arguments
	if state != "" {
		b, _ := json.Marshal(state)
		p += `,"requestState":` + string(b)
	}
	if responses != "" {
		p += `,"inputResponses":` + responses
	}
	return p + `}`
}

// accept is the inputResponses accepting the elicitation key with content.
func acceptAnswer(key, content string) string {
	return `{"` + key + `":{"action":"accept","content":` + content + `}}`
}

// callTool posts a tools/call of tool with params, numbered id, with the
// bearer token of who, to url as an MCP client does, and returns the
// message that answers id (a JSON body, or the SSE event that holds it).
// It is an error when the connection ends without it, as a cut answer does.
func postToolCall(url, who string, id int, tool, params string) (proxyReply, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("Authorization", "Bearer "+who)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return proxyReply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return proxyReply{}, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		r := proxyReply{status: resp.StatusCode, body: string(raw)}
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &r) == nil && string(r.ID) == fmt.Sprint(id) {
			return r, nil
		}
	}
	return proxyReply{}, fmt.Errorf("HTTP %d without an answer to id %d: %q", resp.StatusCode, id, raw)
}

// endpoint is the MCP endpoint of an answerCutter.
func (c *answerCutter) endpoint() string { return "http://" + c.Addr + "/mcp" }

// hostOf is the host:port of an http URL.
func hostPort(url string) string {
	return strings.SplitN(strings.TrimPrefix(url, "http://"), "/", 2)[0]
}

// lostPayment is approve_payment of 42 as alice: round 1 asks the approval,
// round 2 pays.
var lostPayment = struct{ tool, args, answers string }{"approve_payment", `{"amount":42}`, acceptAnswer("approve", `{"ok":true}`)}

// firstPaymentRound calls round 1 of the payment at url and returns its
// (sealed) state.
func firstPaymentRound(t *testing.T, url string) string {
	t.Helper()
	r, err := postToolCall(url, "alice-token", 1, lostPayment.tool, toolCallParams(lostPayment.tool, lostPayment.args, "", ""))
	if err != nil || r.Error != nil || r.state() == "" || strings.Contains(r.state(), "amount") {
		t.Fatalf("round 1: got %v, %v; want an input_required result with a sealed state", r, err)
	}
	return r.state()
}

// loseAnswer sends the call params of tool through the cutter c, numbered
// lostID, and checks that its answer was lost after the upstream up ran
// it, once.
func loseAnswer(t *testing.T, c *answerCutter, up naive, tool, params string) {
	t.Helper()
	before, cut := up.calls(t), c.Cut.Load()
	if r, err := postToolCall(c.endpoint(), "alice-token", lostID, tool, params); err == nil {
		t.Fatalf("the answer the cutter loses reached the client: %v", r)
	}
	if c.Cut.Load() != cut+1 || up.calls(t) != before+1 {
		t.Fatalf("the cutter lost %d answers, the upstream ran %d calls; want 1 lost after 1 ran", c.Cut.Load()-cut, up.calls(t)-before)
	}
}

// sameAnswers sends n retries of params at once, numbered from first,
// each to one of urls in turn, and checks that each got want's result
// under its own id.
func sameAnswers(t *testing.T, urls []string, n, first int, tool, params string, want proxyReply) {
	t.Helper()
	replies, errs := make([]proxyReply, n), make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = postToolCall(urls[i%len(urls)], "alice-token", first+i, tool, params)
		})
	}
	close(start)
	wg.Wait()
	for i, r := range replies {
		if errs[i] != nil || r.status != http.StatusOK || r.Error != nil || string(r.ID) != fmt.Sprint(first+i) || string(r.Result) != string(want.Result) {
			t.Errorf("retry %d of %d: got %v, %v; want HTTP 200, id %d, result %s", i, n, r, errs[i], first+i, want.Result)
		}
	}
}

// TestOutcomes_Proxy_LostAnswerIsReplayed: the payment's round 2, a
// latest-only round (the proxy's default) or a one-time state, pays and
// its answer is lost on the way back. The retry with the same state gets
// the same answer, and 32 parallel retries 32 identical answers, while
// the upstream ran the payment once. A retry by another principal, with
// other arguments, other answers (OUTCOME_CONFLICT, issue 50), or, where a
// flow binds them, other input keys or none is refused (-32602), and its
// answer holds nothing of the payment's. Off
// (--record-outcomes=false), the retry is refused as consumed.
func TestOutcomes_Proxy_LostAnswerIsReplayed(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	for _, tc := range []struct {
		name  string
		flags []string
		// keys: the round is bound to the input keys it asked, as flows
		// bind them; a state without a flow is not.
		keys bool
	}{
		{"latest-only round", nil, true},
		{"one-time round of a flow", []string{"--one-time-tools", lostPayment.tool}, true},
		{"one-time state without a flow", []string{"--flows", "off", "--one-time-tools", lostPayment.tool}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, t.TempDir())
			up := startNaive(t)
			c := cutAnswers(t, hostPort(startProxy(t, s, up.url, append([]string{"--principal", "bearer"}, tc.flags...)...)), loseLostID)
			state := firstPaymentRound(t, c.endpoint())
			round2 := toolCallParams(lostPayment.tool, lostPayment.args, state, lostPayment.answers)
			loseAnswer(t, c, up, lostPayment.tool, round2)
			ran := up.calls(t)

			first, err := postToolCall(c.endpoint(), "alice-token", 2, lostPayment.tool, round2)
			if err != nil || first.status != http.StatusOK || first.Error != nil || string(first.ID) != "2" || first.text() != "Paid 42.00" {
				t.Fatalf("the retry: got %v, %v; want HTTP 200, id 2, Paid 42.00", first, err)
			}
			sameAnswers(t, []string{c.endpoint()}, 32, 100, lostPayment.tool, round2, first)
			if got := up.calls(t); got != ran {
				t.Fatalf("the upstream ran %d more calls for 33 retries, want none", got-ran)
			}
			t.Logf("answer lost after the upstream ran; 1 + 32 retries got %s; upstream calls %d, unchanged", first.Result, ran)

			for _, r := range []struct {
				what, who, args, answers, reason string
				keys                             bool
			}{
				{"another principal", "mallory-token", lostPayment.args, lostPayment.answers, "PRINCIPAL_MISMATCH", false},
				{"other arguments", "alice-token", `{"amount":43}`, lostPayment.answers, "REQUEST_MISMATCH", false},
				{"other input keys", "alice-token", lostPayment.args, acceptAnswer("refund", `{"ok":true}`), "INPUT_MISMATCH", true},
				{"no input keys", "alice-token", lostPayment.args, "", "INPUT_MISMATCH", true},
				{"other answers", "alice-token", lostPayment.args, acceptAnswer("approve", `{"ok":false}`), "OUTCOME_CONFLICT", false},
			} {
				if r.keys && !tc.keys {
					continue
				}
				got, err := postToolCall(c.endpoint(), r.who, 3, lostPayment.tool, toolCallParams(lostPayment.tool, r.args, state, r.answers))
				if err != nil || got.Error == nil || got.Error.Code != -32602 || strings.Contains(got.body, "Paid") || strings.Contains(got.body, "42.00") {
					t.Errorf("%s: got %v (%q), %v; want -32602 without the lostPayment's answer", r.what, got, got.body, err)
				}
				if r.reason == "OUTCOME_CONFLICT" && (got.Error == nil || got.Error.Data.Reason != "outcome_conflict" || got.status != http.StatusConflict) {
					t.Errorf("%s: got %v (%q); want HTTP 409 and data.reason outcome_conflict", r.what, got, got.body)
				}
				waitFor(t, r.what+": the sealer to log "+r.reason, 5*time.Second, func() bool {
					return strings.Contains(s.logs.String(), `"reason":"`+r.reason+`"`)
				})
			}
			if got := up.calls(t); got != ran {
				t.Errorf("the refused retries reached the upstream %d times, want never", got-ran)
			}
		})
	}
}

// TestOutcomes_Proxy_OffRefusesTheRetry: with --record-outcomes=false the
// retry of a lost answer is refused as consumed (-32602), as before
// outcomes were recorded, and never reaches the upstream.
func TestOutcomes_Proxy_OffRefusesTheRetry(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up := startNaive(t)
	c := cutAnswers(t, hostPort(startProxy(t, s, up.url, "--principal", "bearer", "--record-outcomes=false")), loseLostID)
	round2 := toolCallParams(lostPayment.tool, lostPayment.args, firstPaymentRound(t, c.endpoint()), lostPayment.answers)
	loseAnswer(t, c, up, lostPayment.tool, round2)
	ran := up.calls(t)
	r, err := postToolCall(c.endpoint(), "alice-token", 2, lostPayment.tool, round2)
	if err != nil || r.Error == nil || r.Error.Code != -32602 || up.calls(t) != ran {
		t.Fatalf("the retry: got %v, %v, %d more upstream calls; want -32602 (ALREADY_CONSUMED), none", r, err, up.calls(t)-ran)
	}
	waitFor(t, "the sealer to log ALREADY_CONSUMED", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"ALREADY_CONSUMED"`)
	})
}

// TestOutcomes_Proxy_LostNextRoundIsReplayed: the answer lost is round 2
// of book_trip, an input_required result that carries round 3's state.
// The retry gets the same result, the same state with it, and that state
// completes the trip; the upstream ran each round once.
func TestOutcomes_Proxy_LostNextRoundIsReplayed(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up := startNaive(t)
	c := cutAnswers(t, hostPort(startProxy(t, s, up.url, "--principal", "bearer")), loseLostID)
	const tool, args = "book_trip", `{"city":"Paris"}`
	r1, err := postToolCall(c.endpoint(), "alice-token", 1, tool, toolCallParams(tool, args, "", ""))
	if err != nil || r1.state() == "" {
		t.Fatalf("round 1: %v, %v", r1, err)
	}
	round2 := toolCallParams(tool, args, r1.state(), acceptAnswer("dates", `{"dates":"May 1-3"}`))
	loseAnswer(t, c, up, tool, round2)
	ran := up.calls(t)
	r2, err := postToolCall(c.endpoint(), "alice-token", 2, tool, round2)
	if err != nil || r2.state() == "" || !strings.Contains(string(r2.Result), `"seat"`) {
		t.Fatalf("the retry of round 2: got %v, %v; want round 2's input_required result asking seat", r2, err)
	}
	sameAnswers(t, []string{c.endpoint()}, 8, 100, tool, round2, r2)
	r3, err := postToolCall(c.endpoint(), "alice-token", 3, tool, toolCallParams(tool, args, r2.state(), acceptAnswer("seat", `{"seat":"12A"}`)))
	if err != nil || r3.state() == "" {
		t.Fatalf("round 3 with the replayed state: %v, %v", r3, err)
	}
	done, err := postToolCall(c.endpoint(), "alice-token", 4, tool, toolCallParams(tool, args, r3.state(), acceptAnswer("confirm", `{"ok":true}`)))
	if err != nil || done.text() != "Booked Paris, May 1-3, seat 12A" {
		t.Fatalf("the last round: got %v, %v; want the trip booked", done, err)
	}
	if got := up.calls(t); got != ran+2 {
		t.Errorf("the upstream ran %d calls after the lost round, want 2 (rounds 3 and 4)", got-ran)
	}
}

// TestOutcomes_Proxy_RefusedAfterTheEntrysLife: once the state of the lost
// answer has expired, its retries are refused (EXPIRED), as before outcomes
// were recorded; until then they get the answer. The test polls.
func TestOutcomes_Proxy_RefusedAfterTheEntrysLife(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir(), "--skew", "0s")
	up := startNaive(t)
	c := cutAnswers(t, hostPort(startProxy(t, s, up.url, "--principal", "bearer", "--state-ttl", "3s")), loseLostID)
	state := firstPaymentRound(t, c.endpoint())
	round2 := toolCallParams(lostPayment.tool, lostPayment.args, state, lostPayment.answers)
	loseAnswer(t, c, up, lostPayment.tool, round2)
	ran := up.calls(t)
	first, err := postToolCall(c.endpoint(), "alice-token", 2, lostPayment.tool, round2)
	if err != nil || first.text() != "Paid 42.00" {
		t.Fatalf("the retry within the state's life: got %v, %v; want Paid 42.00", first, err)
	}
	replayed := 1
	waitFor(t, "a retry to be refused", 30*time.Second, func() bool {
		r, err := postToolCall(c.endpoint(), "alice-token", 3, lostPayment.tool, round2)
		switch {
		case err == nil && r.Error != nil && r.Error.Code == -32602 && !strings.Contains(r.body, "Paid"):
			return true
		case err == nil && r.Error == nil && string(r.Result) == string(first.Result):
			replayed++
			return false
		}
		t.Fatalf("a retry: got %v, %v; want the same answer, or -32602 without it", r, err)
		return false
	})
	waitFor(t, "the sealer to log EXPIRED", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"EXPIRED"`)
	})
	if up.calls(t) != ran {
		t.Errorf("the upstream ran %d more calls; want none", up.calls(t)-ran)
	}
	t.Logf("%d retries replayed before the state expired, then refused", replayed)
}

// TestOutcomes_Proxy_RetryWhileTheCallRuns: a retry that comes while the
// upstream still runs the call waits at the sealer, then gets a retryable
// -32603 (in_progress), never a second run; once the call has answered, a
// retry gets its answer.
func TestOutcomes_Proxy_RetryWhileTheCallRuns(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	release := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, req upstreamCall) {
		if req.Params.RequestState == "" {
			jsonResult(w, req.ID, askResult("approve", `{"amount":42}`))
			return
		}
		<-release // paying, slowly
		jsonResult(w, req.ID, toolResult("Paid 42.00"))
	})
	released := sync.OnceFunc(func() { close(release) })
	t.Cleanup(released)
	url := startProxy(t, s, up.url, "--principal", "bearer", "--sealer-timeout", "1s")
	state := firstPaymentRound(t, url)
	round2 := toolCallParams(lostPayment.tool, lostPayment.args, state, lostPayment.answers)

	type result struct {
		r   proxyReply
		err error
	}
	paid := make(chan result, 1)
	go func() {
		r, err := postToolCall(url, "alice-token", 2, lostPayment.tool, round2)
		paid <- result{r, err}
	}()
	waitFor(t, "the upstream to run round 2", 10*time.Second, func() bool { return up.calls() == 2 })
	r, err := postToolCall(url, "alice-token", 3, lostPayment.tool, round2)
	if err != nil || r.status != http.StatusServiceUnavailable || r.Error == nil || r.Error.Code != -32603 ||
		!r.Error.Data.Retryable || r.Error.Data.Reason != "in_progress" || up.calls() != 2 {
		t.Fatalf("a retry while round 2 runs: got %v %+v, %v, %d upstream calls; want HTTP 503, a retryable -32603 in_progress, none",
			r, r.Error, err, up.calls()-2)
	}

	released()
	first := <-paid
	if first.err != nil || first.r.text() != "Paid 42.00" {
		t.Fatalf("round 2: got %v, %v", first.r, first.err)
	}
	var again proxyReply
	waitFor(t, "a retry to get the answer", 10*time.Second, func() bool {
		again, err = postToolCall(url, "alice-token", 4, lostPayment.tool, round2)
		return err != nil || again.Error == nil || again.Error.Data.Reason != "in_progress"
	})
	if err != nil || string(again.Result) != string(first.r.Result) || up.calls() != 2 {
		t.Fatalf("the retry after round 2 answered: got %v, %v, %d more upstream calls; want %s, none", again, err, up.calls()-2, first.r.Result)
	}
}
