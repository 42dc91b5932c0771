package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// Recorded outcomes in the TypeScript codec (README, "Recorded outcomes"),
// against a real sealer and the TypeScript example server over real
// sockets. Its approve_payment asks for approval in round 1 (a one-time
// state, a round of a latest-only flow) and pays in round 2; it numbers and
// logs each payment ("payment 7: paid 42.00") and answers "Paid 42.00
// (payment 7)", so a second run of the handler shows twice: in the log and
// in the answer. An answer-cutting proxy (cutAnswers) loses round 2's
// answer after the handler ran, as a network would.

// tsOutcomeMCP is a TypeScript example server whose log the test reads.
type tsOutcomeMCP struct {
	url, addr string
	logs      *syncBuffer
}

var (
	tsListening   = regexp.MustCompile(`listening on (http://(\S+)/mcp)`)
	tsPaymentLine = regexp.MustCompile(`(?m)^payment (\d+): paid (\S+)$`)
)

// startTSOutcomeMCP runs the TypeScript example against the sealer s over
// gRPC, with flags, keeping its log.
func startTSOutcomeMCP(t *testing.T, bin string, s *proc, flags ...string) *tsOutcomeMCP {
	t.Helper()
	cmd := nodeCommand(t, bin, "node", append([]string{"--experimental-strip-types", "--no-warnings",
		"../examples/typescript/server.ts", "--addr", "127.0.0.1:0", "--sealer", "http://" + s.GRPC}, flags...)...)
	return startTSLogged(t, cmd)
}

func startTSLogged(t *testing.T, cmd *exec.Cmd) *tsOutcomeMCP {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	m := &tsOutcomeMCP{logs: &syncBuffer{}}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			m.logs.Write(append(sc.Bytes(), '\n'))
			if g := tsListening.FindStringSubmatch(sc.Text()); g != nil {
				select {
				case found <- g:
				default:
				}
			}
		}
	}()
	select {
	case g := <-found:
		m.url, m.addr = g[1], g[2]
	case <-time.After(30 * time.Second):
		t.Fatalf("the TypeScript example did not listen within 30s:\n%s", m.logs)
	}
	return m
}

// payments returns the numbers of the payments the example logged.
func (m *tsOutcomeMCP) payments() []int {
	var got []int
	for _, g := range tsPaymentLine.FindAllStringSubmatch(m.logs.String(), -1) {
		n, _ := strconv.Atoi(g[1])
		got = append(got, n)
	}
	return got
}

// tsReply is the JSON-RPC answer to a tools/call, and the body it came in.
type tsReply struct {
	ID     json.RawMessage
	Result *struct {
		ResultType    string
		RequestState  string
		InputRequests map[string]json.RawMessage
		Content       []struct{ Text string }
	}
	Error *struct {
		Code    int
		Message string
		Data    struct{ Reason string }
	}
	body string
}

func (r tsReply) text() string {
	if r.Result == nil || len(r.Result.Content) == 0 {
		return ""
	}
	return r.Result.Content[0].Text
}

func (r tsReply) String() string { return strings.TrimSpace(r.body) }

// tsApprove is the second round of approve_payment: the state, and the
// approval under the input keys given.
func tsApprove(state string, keys ...string) string {
	if keys == nil {
		keys = []string{"approve"}
	}
	var responses []string
	for _, k := range keys {
		responses = append(responses, strconv.Quote(k)+`:{"action":"accept","content":{"ok":true}}`)
	}
	return `,"requestState":` + strconv.Quote(state) + `,"inputResponses":{` + strings.Join(responses, ",") + `}`
}

// tsPay posts a tools/call of approve_payment to url on the 2026-07-28
// wire, as token (none: anonymous), with JSON-RPC id and arguments, and
// extra members of params (tsApprove). An error is an answer that did not
// arrive.
func tsPay(url, token string, id int, arguments, extra string) (tsReply, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},`+
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},"name":"approve_payment","arguments":%s%s}}`, id, arguments, extra)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return tsReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "approve_payment")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := tsHTTP.Do(req)
	if err != nil {
		return tsReply{}, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return tsReply{}, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		var r tsReply
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &r) == nil && r.ID != nil {
			r.body = line
			return r, nil
		}
	}
	return tsReply{}, fmt.Errorf("HTTP %d without a JSON-RPC answer: %q", resp.StatusCode, out)
}

// tsHTTP keeps no idle connection a cut answer could leave half-read.
var tsHTTP = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

const (
	tsAlice   = "alice-token"
	tsAmount  = `{"amount":42}`
	tsIDFirst = 1
)

// tsAskApproval sends round 1 of a payment as alice and returns its state.
func tsAskApproval(t *testing.T, m *tsOutcomeMCP) string {
	t.Helper()
	r, err := tsPay(m.url, tsAlice, tsIDFirst, tsAmount, "")
	if err != nil || r.Result == nil || r.Result.ResultType != "input_required" || r.Result.InputRequests["approve"] == nil || r.Result.RequestState == "" {
		t.Fatalf("round 1: got %v, %v; want input_required asking approve, with a state", r, err)
	}
	return r.Result.RequestState
}

// tsLosePayment sends round 2 of a payment of the state through a proxy
// that loses its answer, waits until the example logged the payment, and
// returns the answer its handler gave: "Paid 42.00 (payment n)".
func tsLosePayment(t *testing.T, m *tsOutcomeMCP, state string) string {
	t.Helper()
	before := len(m.payments())
	cut := cutAnswers(t, m.addr, func(body []byte) bool { return bytes.Contains(body, []byte(state)) })
	if r, err := tsPay("http://"+cut.Addr+"/mcp", tsAlice, 2, tsAmount, tsApprove(state)); err == nil {
		t.Fatalf("round 2 through the cutting proxy: got %v; want the answer lost", r)
	}
	if n := cut.Cut.Load(); n != 1 {
		t.Fatalf("the proxy cut %d answers, want 1", n)
	}
	waitFor(t, "the example to log the payment whose answer was lost", 10*time.Second, func() bool {
		return len(m.payments()) == before+1
	})
	p := m.payments()
	return fmt.Sprintf("Paid 42.00 (payment %d)", p[len(p)-1])
}

// tsSamePayment asserts that r is the answer want, under id.
func tsSamePayment(t *testing.T, what string, r tsReply, err error, id int, want string) {
	t.Helper()
	if err != nil || r.Error != nil || r.text() != want || string(r.ID) != strconv.Itoa(id) {
		t.Fatalf("%s: got %v, %v; want %q under id %d", what, r, err, want, id)
	}
}

// tsRefused asserts the -32602 of a refused state, which says nothing of
// the payment.
func tsRefused(t *testing.T, what string, r tsReply, err error) {
	t.Helper()
	if err != nil || r.Error == nil || r.Error.Code != -32602 || r.Error.Data.Reason != "invalid_request_state" ||
		strings.Contains(r.body, "Paid") || strings.Contains(r.body, "payment") {
		t.Fatalf("%s: got %v, %v; want -32602 invalid_request_state, nothing of the payment", what, r, err)
	}
}

// TestOutcomes_TypeScript_LostAnswerIsReplayed (R6): the answer to round 2
// of a payment is lost after the handler paid; the client's retry with the
// same state gets that very answer under its own id, and again on a second
// retry, and the handler paid once.
func TestOutcomes_TypeScript_LostAnswerIsReplayed(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	m := startTSOutcomeMCP(t, bin, s)

	state := tsAskApproval(t, m)
	want := tsLosePayment(t, m, state)
	for id := 3; id <= 4; id++ {
		r, err := tsPay(m.url, tsAlice, id, tsAmount, tsApprove(state))
		tsSamePayment(t, fmt.Sprintf("retry %d", id-2), r, err, id, want)
	}
	if got := m.payments(); len(got) != 1 {
		t.Fatalf("the example paid %v; want one payment", got)
	}
	t.Logf("lost answer, then two retries: %q each time, %d payment", want, len(m.payments()))
}

// TestOutcomes_TypeScript_ParallelRetriesPayOnce (R6): 32 retries of the
// lost round 2 at once all get its answer, and nothing is paid again; and
// 32 first tries of another payment's round 2 at once pay once (one opens
// the state and runs the handler, the others wait for its answer) and all
// get that payment's answer.
func TestOutcomes_TypeScript_ParallelRetriesPayOnce(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	m := startTSOutcomeMCP(t, bin, s)
	const n = 32

	parallel := func(state string) map[string]int {
		var mu sync.Mutex
		var wg sync.WaitGroup
		got := map[string]int{}
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := 100 + i
				r, err := tsPay(m.url, tsAlice, id, tsAmount, tsApprove(state))
				key := r.text()
				if err != nil || r.Error != nil || string(r.ID) != strconv.Itoa(id) {
					key = fmt.Sprintf("id %d: %v %v", id, r, err)
				}
				mu.Lock()
				got[key]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return got
	}

	lost := tsAskApproval(t, m)
	want := tsLosePayment(t, m, lost)
	if got := parallel(lost); len(got) != 1 || got[want] != n {
		t.Fatalf("%d parallel retries of the lost round: got %v; want %d times %q", n, got, n, want)
	}
	if got := m.payments(); len(got) != 1 {
		t.Fatalf("after %d retries the example paid %v; want the one payment", n, got)
	}

	fresh := tsAskApproval(t, m)
	got := parallel(fresh)
	waitFor(t, "the example to log the second payment", 10*time.Second, func() bool { return len(m.payments()) >= 2 })
	p := m.payments()
	second := fmt.Sprintf("Paid 42.00 (payment %d)", p[len(p)-1])
	if len(got) != 1 || got[second] != n || len(p) != 2 {
		t.Fatalf("%d first tries of round 2 at once: got %v, payments %v; want %d times %q and one payment", n, got, p, n, second)
	}
	t.Logf("%d parallel retries of a lost answer and %d parallel first tries: one answer each, payments %v", n, n, p)
}

// TestOutcomes_TypeScript_OthersRefused (R3, R5, R6): the lost round 2's
// state, presented by another principal (another token, none), with other
// arguments, or with other input keys, is refused with the -32602 of any
// refused state: nothing of the payment in it, no handler run. The sealer
// says why; the owner's retry still gets the answer.
func TestOutcomes_TypeScript_OthersRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	m := startTSOutcomeMCP(t, bin, s)

	state := tsAskApproval(t, m)
	want := tsLosePayment(t, m, state)
	for i, tc := range []struct {
		name, token, args, extra, reason string
	}{
		{"another bearer token", "mallory-token", tsAmount, tsApprove(state), "PRINCIPAL_MISMATCH"},
		{"no bearer token", "", tsAmount, tsApprove(state), "PRINCIPAL_MISMATCH"},
		{"other arguments", tsAlice, `{"amount":4200}`, tsApprove(state), "REQUEST_MISMATCH"},
		{"an input key added", tsAlice, tsAmount, tsApprove(state, "approve", "tip"), "INPUT_MISMATCH"},
		{"an input key in another case", tsAlice, tsAmount, tsApprove(state, "Approve"), "INPUT_MISMATCH"},
		{"no input keys", tsAlice, tsAmount, tsApprove(state, []string{}...), "INPUT_MISMATCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := refusals(s)[tc.reason]
			r, err := tsPay(m.url, tc.token, 10+i, tc.args, tc.extra)
			tsRefused(t, tc.name, r, err)
			waitFor(t, "the sealer to log "+tc.reason, 5*time.Second, func() bool { return refusals(s)[tc.reason] > before })
		})
	}
	r, err := tsPay(m.url, tsAlice, 20, tsAmount, tsApprove(state))
	tsSamePayment(t, "the owner's retry after the refusals", r, err, 20, want)
	if got := m.payments(); len(got) != 1 {
		t.Fatalf("the example paid %v; want one payment", got)
	}
}

// TestOutcomes_TypeScript_RefusedAfterTheStatesLife (R4): the lost answer
// is replayed while the state lives (a sealer allowing no skew, states of 8
// seconds); after, a retry is refused (EXPIRED) with nothing of the
// payment, and nothing is paid again.
func TestOutcomes_TypeScript_RefusedAfterTheStatesLife(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	s := start(t, t.TempDir(), "--skew", "0s")
	m := startTSOutcomeMCP(t, bin, s, "--state-ttl", "8")

	state := tsAskApproval(t, m)
	want := tsLosePayment(t, m, state)
	r, err := tsPay(m.url, tsAlice, 3, tsAmount, tsApprove(state))
	tsSamePayment(t, "the retry within the state's life", r, err, 3, want)

	var last tsReply
	waitFor(t, "a retry to be refused once the state expired", 30*time.Second, func() bool {
		last, err = tsPay(m.url, tsAlice, 4, tsAmount, tsApprove(state))
		return err != nil || last.text() != want
	})
	tsRefused(t, "the retry after the state's life", last, err)
	waitFor(t, "the sealer to log EXPIRED", 5*time.Second, func() bool { return refusals(s)["EXPIRED"] > 0 })
	if got := m.payments(); len(got) != 1 {
		t.Fatalf("the example paid %v; want one payment", got)
	}
}

// TestOutcomes_TypeScript_OffByFlag: with recording off (--record off), the
// retry of the lost round 2 is refused (ALREADY_CONSUMED), as before
// recorded outcomes; the payment was made once all the same.
func TestOutcomes_TypeScript_OffByFlag(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	m := startTSOutcomeMCP(t, bin, s, "--record", "off")

	state := tsAskApproval(t, m)
	tsLosePayment(t, m, state)
	r, err := tsPay(m.url, tsAlice, 3, tsAmount, tsApprove(state))
	tsRefused(t, "the retry with recording off", r, err)
	waitFor(t, "the sealer to log ALREADY_CONSUMED", 5*time.Second, func() bool { return refusals(s)["ALREADY_CONSUMED"] > 0 })
	if got := m.payments(); len(got) != 1 {
		t.Fatalf("the example paid %v; want one payment", got)
	}
}
