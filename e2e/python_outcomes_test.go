package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// Recorded outcomes in the Python middleware (README, "Recorded outcomes";
// clients/python, mcp_sealer.mcp), against a real sealer and the Python
// example servers (examples/python) over real sockets. Their pay tool asks
// to confirm in round 1 and pays in round 2, answering "paid AMOUNT to
// PAYEE: payment N" with N the number of payments made, so a second run of
// the handler would show in the answer; GET /payments counts the payments
// by payee, GET /calls the handler's runs. An answer-cutting proxy
// (cutAnswers) loses round 2's answer after the handler ran, as a network
// would.

// pyOutcomeCases are the servers the tests run against: each SDK, each of
// the client's transports, each kind of state that opens once.
var pyOutcomeCases = []struct {
	name, file string
	flags      []string
}{
	// A latest-only round of a flow (the default), the sealer over gRPC.
	{"MCPServer", "server.py", nil},
	// One-time states, the sealer over REST.
	{"FastMCP-REST-one-time", "fastmcp_server.py", []string{"--rest", "--one-time"}},
}

// pyOutcomeMCP is a Python example server with --calls and --tokens.
type pyOutcomeMCP struct{ url, host, base string }

// The principals' bearer tokens (--tokens).
const (
	pyAlice = "alice-py-token"
	pyBob   = "bob-py-token"
)

// startPyOutcomeMCP runs examples/python/<file> against s with flags.
func startPyOutcomeMCP(t *testing.T, python string, s *proc, file string, flags ...string) *pyOutcomeMCP {
	t.Helper()
	flags = append([]string{"--calls", "--tokens", "alice=" + pyAlice + ",bob=" + pyBob}, flags...)
	url := startPyMCP(t, python, s, file, flags...)
	base := strings.TrimSuffix(url, "/mcp")
	return &pyOutcomeMCP{url: url, host: strings.TrimPrefix(base, "http://"), base: base}
}

// count reads a JSON object of counts the server serves at path (/calls, /payments).
func (m *pyOutcomeMCP) count(t *testing.T, path, name string) int {
	t.Helper()
	resp, err := http.Get(m.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var counts map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&counts); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return counts[name]
}

// payments is how many payments the handler made to payee.
func (m *pyOutcomeMCP) payments(t *testing.T, payee string) int {
	return m.count(t, "/payments", payee)
}

// runs is how many times the pay tool's handler ran.
func (m *pyOutcomeMCP) runs(t *testing.T) int { return m.count(t, "/calls", "pay") }

// pyReply is the JSON-RPC answer to a tools/call of pay, and its body.
type pyReply struct {
	ID     json.RawMessage
	Result map[string]any
	Error  map[string]any
	body   string
}

// text is the text of a complete result.
func (r pyReply) text() string {
	content, _ := r.Result["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	text, _ := c["text"].(string)
	return text
}

func (r pyReply) String() string { return strings.TrimSpace(r.body) }

// pyConfirm is the inputResponses of round 2, under the keys given
// (confirm when none).
func pyConfirm(keys ...string) map[string]any {
	if keys == nil {
		keys = []string{"confirm"}
	}
	out := map[string]any{}
	for _, k := range keys {
		out[k] = map[string]any{"action": "accept", "content": map[string]any{"ok": true}}
	}
	return out
}

// pyHTTP opens a connection for each request: a cut one is never reused.
var pyHTTP = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// pyIDs numbers the requests: every retry has an id of its own.
var pyIDs atomic.Int64

// pyPay posts a tools/call of pay: callTool for the pay tool.
func pyPay(url, token string, arguments map[string]any, state string, responses map[string]any) (pyReply, error) {
	return callTool(url, token, "pay", arguments, state, responses)
}

// callTool posts a tools/call of the tool name to url on the 2026-07-28
// wire as token, with arguments and, for a later round, the state and
// responses. An error is an answer that did not arrive.
func callTool(url, token, name string, arguments map[string]any, state string, responses map[string]any) (pyReply, error) {
	params := map[string]any{
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		},
		"name": name, "arguments": arguments,
	}
	if state != "" {
		params["requestState"], params["inputResponses"] = state, responses
	}
	id := pyIDs.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := pyHTTP.Do(req)
	if err != nil {
		return pyReply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return pyReply{}, err
	}
	r := pyReply{body: string(raw)}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("HTTP %d, not JSON-RPC: %s", resp.StatusCode, raw)
	}
	if string(r.ID) != strconv.FormatInt(id, 10) {
		return r, fmt.Errorf("answered under id %s, not the request's %d: %s", r.ID, id, raw)
	}
	return r, nil
}

// pyFirstRound sends round 1 of a payment and returns the state it asks to confirm with.
func pyFirstRound(t *testing.T, url string, args map[string]any) string {
	t.Helper()
	r, err := pyPay(url, pyAlice, args, "", nil)
	if err != nil || r.Result["resultType"] != "input_required" {
		t.Fatalf("round 1: got %v, %v; want input_required", r, err)
	}
	state, _ := r.Result["requestState"].(string)
	if state == "" {
		t.Fatalf("round 1 carries no requestState: %v", r)
	}
	return state
}

// pyLosePayment sends round 2 through a proxy that loses its answer, and
// checks the handler paid once all the same.
func pyLosePayment(t *testing.T, m *pyOutcomeMCP, args map[string]any, state string) *answerCutter {
	t.Helper()
	var done atomic.Bool
	cutter := cutAnswers(t, m.host, func(body []byte) bool {
		return bytes.Contains(body, []byte(`"requestState"`)) && done.CompareAndSwap(false, true)
	})
	if r, err := pyPay("http://"+cutter.Addr+"/mcp", pyAlice, args, state, pyConfirm()); err == nil || cutter.Cut.Load() != 1 {
		t.Fatalf("round 2: got %v, %v, %d answers cut; want its answer lost", r, err, cutter.Cut.Load())
	}
	if n := m.payments(t, args["payee"].(string)); n != 1 {
		t.Fatalf("after the lost answer the handler had paid %d times, want 1", n)
	}
	return cutter
}

// pyRefusal is the refusal of a state, as the SDK's boundary sends it.
var pyRefusal = map[string]any{"code": float64(-32602), "message": "Invalid or expired requestState", "data": map[string]any{"reason": "invalid_request_state"}}

// The answer to the payment's round 2 is lost after the handler paid; the
// retry with the same state gets that answer under its own id, and again;
// the handler ran once. Retries by another principal, with other arguments
// or other input keys are refused (-32602, the sealer logging the reason
// that fits) and learn nothing of the answer; the owner's retry still gets it.
func TestOutcomes_Python_CutAnswerIsReplayed(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	python := pythonBin(t)
	for _, tc := range pyOutcomeCases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, t.TempDir())
			m := startPyOutcomeMCP(t, python, s, tc.file, tc.flags...)
			args := map[string]any{"payee": "carol", "amount": 42}
			state := pyFirstRound(t, m.url, args)
			cutter := pyLosePayment(t, m, args, state)

			first, err := pyPay("http://"+cutter.Addr+"/mcp", pyAlice, args, state, pyConfirm())
			if err != nil || first.text() != "paid 42 to carol: payment 1" {
				t.Fatalf("the retry of round 2: got %v, %v; want the answer that was lost, paid 42 to carol: payment 1", first, err)
			}
			again, err := pyPay(m.url, pyAlice, args, state, pyConfirm())
			if err != nil || !reflect.DeepEqual(again.Result, first.Result) {
				t.Fatalf("a second retry: got %v, %v; want %v", again, err, first)
			}

			for _, attack := range []struct {
				what, token string
				args        map[string]any
				responses   map[string]any
				reason      string
			}{
				{"another principal", pyBob, args, pyConfirm(), "PRINCIPAL_MISMATCH"},
				{"other arguments", pyAlice, map[string]any{"payee": "carol", "amount": 4200}, pyConfirm(), "REQUEST_MISMATCH"},
				{"other input keys", pyAlice, args, pyConfirm("confirm", "admin"), "INPUT_MISMATCH"},
			} {
				t.Run(attack.what, func(t *testing.T) {
					r, err := pyPay(m.url, attack.token, attack.args, state, attack.responses)
					if err != nil || r.Result != nil || !reflect.DeepEqual(r.Error, pyRefusal) {
						t.Fatalf("got %v, %v; want the refusal %v", r, err, pyRefusal)
					}
					if strings.Contains(r.body, "paid") || strings.Contains(r.body, "carol") {
						t.Errorf("the refusal discloses the answer: %s", r.body)
					}
					waitFor(t, "the sealer to refuse it "+attack.reason, 5*time.Second, func() bool {
						return strings.Contains(s.logs.String(), `"reason":"`+attack.reason+`"`)
					})
				})
			}
			if r, err := pyPay(m.url, pyAlice, args, state, pyConfirm()); err != nil || !reflect.DeepEqual(r.Result, first.Result) {
				t.Errorf("the owner's retry after the refusals: got %v, %v; want %v", r, err, first)
			}
			if n := m.payments(t, "carol"); n != 1 {
				t.Errorf("the handler paid %d times, want 1", n)
			}
			if n := m.runs(t); n != 2 {
				t.Errorf("the pay handler ran %d times, want 2 (round 1, and round 2 once)", n)
			}
		})
	}
}

// 32 retries of round 2 at once: one consumes the state and pays, the
// others wait in the sealer for its answer; all 32 get the same answer,
// and the handler paid once.
func TestOutcomes_Python_ParallelRetriesPayOnce(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	python := pythonBin(t)
	for _, tc := range pyOutcomeCases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, t.TempDir())
			m := startPyOutcomeMCP(t, python, s, tc.file, tc.flags...)
			args := map[string]any{"payee": "dave", "amount": 7}
			state := pyFirstRound(t, m.url, args)
			paysOnceForParallelRetries(t, m, args, state)
		})
	}
}

// paysOnceForParallelRetries sends round 2 of the payment args 32 times at
// once on state: all 32 must get the answer of one payment, and the
// handler must have run twice (round 1, and round 2 once).
func paysOnceForParallelRetries(t *testing.T, m *pyOutcomeMCP, args map[string]any, state string) {
	t.Helper()
	answers := concurrently(32, func(int) string {
		r, err := pyPay(m.url, pyAlice, args, state, pyConfirm())
		if err != nil {
			return "error: " + err.Error()
		}
		if r.Error != nil {
			return fmt.Sprintf("error: %v", r.Error)
		}
		return r.text()
	})
	payee := args["payee"].(string)
	if want := map[string]int{fmt.Sprintf("paid %v to %s: payment 1", args["amount"], payee): 32}; !maps.Equal(answers, want) {
		t.Errorf("32 parallel retries: got %v, want %v", answers, want)
	}
	if n := m.payments(t, payee); n != 1 {
		t.Errorf("the handler paid %d times, want 1", n)
	}
	if n := m.runs(t); n != 2 {
		t.Errorf("the pay handler ran %d times, want 2 (round 1, and round 2 once)", n)
	}
}

// Once the state has expired, its retry is refused as before (-32602,
// EXPIRED): the recorded answer lives no longer than the state it answers.
func TestOutcomes_Python_RefusedAfterTheStatesLife(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	python := pythonBin(t)
	for _, tc := range pyOutcomeCases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, t.TempDir(), "--skew", "0s", "--default-ttl", "3s")
			m := startPyOutcomeMCP(t, python, s, tc.file, tc.flags...)
			args := map[string]any{"payee": "erin", "amount": 42}
			state := pyFirstRound(t, m.url, args)
			pyLosePayment(t, m, args, state)
			waitFor(t, "the retry to be refused once the state expired", 30*time.Second, func() bool {
				r, err := pyPay(m.url, pyAlice, args, state, pyConfirm())
				switch {
				case err != nil:
					t.Fatalf("a retry: %v", err)
				case reflect.DeepEqual(r.Error, pyRefusal):
					return true
				case r.text() != "paid 42 to erin: payment 1": // not expired yet: the recorded answer
					t.Fatalf("a retry: got %v, want the recorded answer or the refusal", r)
				}
				return false
			})
			waitFor(t, "the sealer to judge the state expired", 5*time.Second, func() bool {
				return strings.Contains(s.logs.String(), `"reason":"EXPIRED"`)
			})
			if n := m.payments(t, "erin"); n != 1 {
				t.Errorf("the handler paid %d times, want 1", n)
			}
		})
	}
}

// With --no-record-outcomes nothing is recorded: the retry of a round
// whose answer was lost is refused, as it was before outcomes.
func TestOutcomes_Python_OffBySwitch(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	python := pythonBin(t)
	s := start(t, t.TempDir())
	m := startPyOutcomeMCP(t, python, s, "server.py", "--no-record-outcomes")
	args := map[string]any{"payee": "frank", "amount": 42}
	state := pyFirstRound(t, m.url, args)
	pyLosePayment(t, m, args, state)
	r, err := pyPay(m.url, pyAlice, args, state, pyConfirm())
	if err != nil || !reflect.DeepEqual(r.Error, pyRefusal) {
		t.Fatalf("the retry: got %v, %v; want the refusal %v", r, err, pyRefusal)
	}
	waitFor(t, "the sealer to refuse it ALREADY_CONSUMED", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"ALREADY_CONSUMED"`)
	})
	if n := m.payments(t, "frank"); n != 1 {
		t.Errorf("the handler paid %d times, want 1", n)
	}
}
