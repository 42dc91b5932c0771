package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The attacks of issue 23 on multi-round requests (R9), against the real
// binary over gRPC and REST. Each first succeeds with the plain states of
// the previous release (the control, in the same test), then fails with
// flows.

const (
	flowParams      = `{"name":"deploy","arguments":{"service":"api","env":"prod"}}`
	otherFlowParams = `{"name":"deploy","arguments":{"service":"api","env":"staging"}}`
)

// flowInfo is the flow of a Seal or Open response.
type flowInfo struct {
	id         string
	round      int
	deadline   time.Time
	latestOnly bool
	expiresAt  time.Time
}

// flowOf reads the flow of a response in the REST contract's JSON; the
// zero flowInfo when it has none.
func flowOf(t *testing.T, resp map[string]any) flowInfo {
	t.Helper()
	var f flowInfo
	if s, ok := resp["expiresAt"].(string); ok {
		f.expiresAt, _ = time.Parse(time.RFC3339Nano, s)
	}
	m, ok := resp["flow"].(map[string]any)
	if !ok {
		return f
	}
	f.id, _ = m["id"].(string)
	round, _ := m["round"].(float64)
	f.round = int(round)
	f.latestOnly, _ = m["latestOnly"].(bool)
	d, _ := m["deadline"].(string)
	var err error
	if f.deadline, err = time.Parse(time.RFC3339Nano, d); err != nil {
		t.Errorf("flow deadline %q: %v", d, err) // not Fatal: racers call this
	}
	return f
}

// same reports whether f and g are the same round of the same flow.
func (f flowInfo) same(g flowInfo) bool {
	return f.id == g.id && f.round == g.round && f.deadline.Equal(g.deadline) && f.latestOnly == g.latestOnly
}

// flowJSON is a SealRequest.flow: round 1 of a new flow when continues is
// empty; asked nil leaves the round's input keys unbound.
func flowJSON(continues string, latestOnly bool, asked ...string) string {
	m := map[string]any{"latestOnly": latestOnly}
	if continues != "" {
		m["continues"] = continues
	}
	if asked != nil {
		m["asked"] = map[string]any{"keys": asked}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// withResponses is the params of the retry of a tool call: its name and
// arguments, inputResponses with keys (none: no inputResponses member) and
// the state.
func withResponses(params, state string, keys []string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(params, "}"))
	if keys != nil {
		b.WriteString(`,"inputResponses":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `%q:{"action":"accept","content":{"value":"x"}}`, k)
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(&b, `,"requestState":%q}`, state)
	return b.String()
}

// mcpServer is what an MCP server asks of the sealer for one principal's
// tool call, over one transport.
type mcpServer struct {
	a         api
	principal string
	params    string
}

// seal seals a round: flow is a SealRequest.flow (flowJSON), "" for a
// plain state, the previous release's only kind; extra adds members.
func (s mcpServer) seal(t *testing.T, flow, extra string) (string, flowInfo, string) {
	t.Helper()
	if flow != "" {
		extra += `,"flow":` + flow
	}
	resp, reason := s.a.call(t, "seal", sealBody(s.principal, s.params, "round", extra))
	if reason != "OK" {
		return "", flowInfo{}, reason
	}
	return resp["requestState"].(string), flowOf(t, resp), reason
}

// mustSeal is seal, failing the test on a refusal.
func (s mcpServer) mustSeal(t *testing.T, flow string) (string, flowInfo) {
	t.Helper()
	st, f, reason := s.seal(t, flow, "")
	if reason != "OK" {
		t.Fatalf("seal %s: got %s, want OK", flow, reason)
	}
	return st, f
}

// open opens state as the retry answering keys does: the keys are in the
// params' inputResponses, for the sealer to read.
func (s mcpServer) open(t *testing.T, state string, keys ...string) (flowInfo, string) {
	t.Helper()
	resp, reason := s.a.call(t, "open", openBody(state, s.principal, withResponses(s.params, state, keys)))
	if reason != "OK" {
		return flowInfo{}, reason
	}
	return flowOf(t, resp), reason
}

// openResponded opens state naming the keys in OpenRequest.responded, with
// params that carry no inputResponses.
func (s mcpServer) openResponded(t *testing.T, state string, keys []string) string {
	t.Helper()
	if keys == nil {
		keys = []string{}
	}
	responded, _ := json.Marshal(map[string]any{"keys": keys})
	body := strings.TrimSuffix(openBody(state, s.principal, withResponses(s.params, state, nil)), "}") + `,"responded":` + string(responded) + "}"
	_, reason := s.a.call(t, "open", body)
	return reason
}

// tally counts the outcomes callers saw, by method and reason, to hold the
// audit log to them.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

// tallied is an api whose outcomes are counted.
type tallied struct {
	api
	tally *tally
}

func (c tallied) call(t *testing.T, method, body string) (map[string]any, string) {
	t.Helper()
	resp, reason := c.api.call(t, method, body)
	c.tally.mu.Lock()
	c.tally.n[method+" "+reason]++
	c.tally.mu.Unlock()
	return resp, reason
}

// auditOutcomes counts the events of an audit log by method and reason.
func auditOutcomes(t *testing.T, file string) map[string]int {
	t.Helper()
	return auditOutcomesSince(t, file, time.Time{})
}

// auditOutcomesSince is auditOutcomes of the events stamped at or after
// since.
func auditOutcomesSince(t *testing.T, file string, since time.Time) map[string]int {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Time                time.Time
			Msg, Method, Reason string
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Msg != "audit" {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if !e.Time.Before(since) {
			n[strings.ToLower(path.Base(e.Method))+" "+e.Reason]++
		}
	}
	return n
}

// flowsTenants: main with the server's flow policy, short with 3 rounds,
// brief with flows of 1 s, other for a tenant that is not main.
const flowsTenants = `tenants:
  main:
    tokens: ["%s"]
  short:
    tokens: ["%s"]
    policy:
      maxRounds: 3
  brief:
    tokens: ["%s"]
    policy:
      flowTTL: 1s
  other:
    tokens: ["%s"]
`

// TestFlows_R9_Attacks: rewind, fork, stretch, off-script input keys and
// continuations across principals, requests and tenants, each over gRPC
// and REST; every outcome a caller saw is in the audit log with the same
// reason.
func TestFlows_R9_Attacks(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, fmt.Sprintf(flowsTenants, tokenHash("main-token"), tokenHash("short-token"), tokenHash("brief-token"), tokenHash("other-token")))
	audit := filepath.Join(dir, "audit.jsonl")
	// The largest skew: the stretch's calls after a flow's deadline, however
	// late on a loaded machine, are judged by the deadline (FLOW_EXPIRED),
	// not by the state's expiry (EXPIRED), and its control's plain states
	// of 1 s open whenever they come.
	p := start(t, dir, "--tenants", tenants, "--audit-log", audit, "--skew", "60s")
	seen := &tally{n: map[string]int{}}
	conn := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	callers := map[string]func(token string) api{
		"gRPC": func(token string) api { return tallied{grpcAPI{client: conn, token: token}, seen} },
		"REST": func(token string) api {
			return tallied{restAPI{base: "http://" + p.HTTP, client: http.DefaultClient, header: http.Header{"Authorization": {"Bearer " + token}}}, seen}
		},
	}
	for _, transport := range []string{"gRPC", "REST"} {
		caller := callers[transport]
		alice := mcpServer{a: caller("main-token"), principal: "alice", params: flowParams}
		t.Run(transport+"/rewind", func(t *testing.T) { flowsRewind(t, alice) })
		t.Run(transport+"/fork", func(t *testing.T) { flowsFork(t, alice) })
		t.Run(transport+"/stretch", func(t *testing.T) {
			flowsStretch(t, mcpServer{a: caller("brief-token"), principal: "alice", params: flowParams})
		})
		t.Run(transport+"/max rounds", func(t *testing.T) {
			flowsMaxRounds(t, mcpServer{a: caller("short-token"), principal: "alice", params: flowParams})
		})
		t.Run(transport+"/input keys", func(t *testing.T) { flowsInputKeys(t, alice) })
		t.Run(transport+"/continuation", func(t *testing.T) { flowsContinuation(t, alice, caller("other-token")) })
	}

	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	got := auditOutcomes(t, audit)
	for _, k := range slices.Sorted(maps.Keys(seen.n)) {
		if got[k] != seen.n[k] {
			t.Errorf("audit log: %d events %q, callers saw %d", got[k], k, seen.n[k])
		}
	}
	for k := range got {
		if seen.n[k] == 0 {
			t.Errorf("audit log: %d events %q no caller saw", got[k], k)
		}
	}
	var refusals []string
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if !strings.HasSuffix(k, " OK") {
			refusals = append(refusals, fmt.Sprintf("%s %d", k, got[k]))
		}
	}
	t.Logf("audit log, refusals: %s", strings.Join(refusals, ", "))
}

// flowsRewind: round 1's state retried after round 2 was issued, and again
// after round 2 opened. Plain states open again; a latest-only flow's are
// ALREADY_CONSUMED.
func flowsRewind(t *testing.T, s mcpServer) {
	t.Run("control: plain states", func(t *testing.T) {
		s1, _ := s.mustSeal(t, "")
		if _, r := s.open(t, s1, "github_login"); r != "OK" {
			t.Fatalf("round 1: got %s, want OK", r)
		}
		s2, _ := s.mustSeal(t, "")
		if _, r := s.open(t, s2, "otp"); r != "OK" {
			t.Fatalf("round 2: got %s, want OK", r)
		}
		if _, r := s.open(t, s1, "github_login"); r != "OK" {
			t.Fatalf("round 1 after round 2 opened: got %s; the control should show the rewind working on plain states", r)
		}
	})
	t.Run("latest-only flow", func(t *testing.T) {
		s1, f1 := s.mustSeal(t, flowJSON("", true, "github_login"))
		if f1.round != 1 || !f1.latestOnly || f1.id == "" {
			t.Fatalf("round 1: flow %+v", f1)
		}
		if f, r := s.open(t, s1, "github_login"); r != "OK" || !f.same(f1) {
			t.Fatalf("round 1: got %s %+v, want OK %+v", r, f, f1)
		}
		// latest_only false on a continuation: sticky, still on.
		s2, f2 := s.mustSeal(t, flowJSON(s1, false, "otp"))
		if f2.id != f1.id || f2.round != 2 || !f2.deadline.Equal(f1.deadline) || !f2.latestOnly {
			t.Fatalf("round 2: flow %+v, want the id, deadline and latest-only of round 1 %+v, round 2", f2, f1)
		}
		if _, r := s.open(t, s1, "github_login"); r != "ALREADY_CONSUMED" {
			t.Errorf("round 1 after round 2 was issued: got %s, want ALREADY_CONSUMED", r)
		}
		if _, r := s.open(t, s2, "otp"); r != "OK" {
			t.Fatalf("round 2: got %s, want OK", r)
		}
		for name, st := range map[string]string{"round 1": s1, "round 2": s2} {
			keys := map[string][]string{"round 1": {"github_login"}, "round 2": {"otp"}}[name]
			if _, r := s.open(t, st, keys...); r != "ALREADY_CONSUMED" {
				t.Errorf("%s after round 2 opened: got %s, want ALREADY_CONSUMED", name, r)
			}
		}
	})
}

// fork is one fork attack: 32 retries of one round's state at once, each
// that opened followed by the Seal of the next round, continuing what it
// opened; then each next-round state is retried, all at once. It returns
// how many retries opened, and how many next-round states were sealed and
// opened. flow is round 1's SealRequest.flow, "" for plain states.
func fork(t *testing.T, s mcpServer, flow string) (opened, sealed, nextOpened int) {
	t.Helper()
	state, _ := s.mustSeal(t, flow)
	var (
		mu   sync.Mutex
		next []string
	)
	reasons := concurrently(32, func(int) string {
		_, reason := s.open(t, state, "github_login")
		if reason != "OK" {
			return reason
		}
		cont := ""
		if flow != "" {
			cont = flowJSON(state, false, "otp")
		}
		st, _, r := s.seal(t, cont, "")
		if r != "OK" {
			t.Errorf("seal of the next round: got %s, want OK", r)
			return reason
		}
		mu.Lock()
		next = append(next, st)
		mu.Unlock()
		return reason
	})
	checkReasons(t, "retries of one round", reasons, "OK", "ALREADY_CONSUMED")
	nextReasons := concurrently(len(next), func(i int) string {
		_, r := s.open(t, next[i], "otp")
		return r
	})
	checkReasons(t, "retries of the next round", nextReasons, "OK", "ALREADY_CONSUMED")
	return reasons["OK"], len(next), nextReasons["OK"]
}

// checkReasons fails the test on an outcome not in want.
func checkReasons(t *testing.T, what string, got map[string]int, want ...string) {
	t.Helper()
	for r, n := range got {
		if !slices.Contains(want, r) {
			t.Errorf("%s: %d got %s, want only %v", what, n, r, want)
		}
	}
}

// flowsFork: 32 parallel retries of one round, 20 times; with plain states
// every retry walks its own branch, with a latest-only flow at most one
// next-round state opens. Then 32 sibling continuations of one round (a
// server that continued twice): with latest-only, at most one opens.
func flowsFork(t *testing.T, s mcpServer) {
	t.Run("control: plain states", func(t *testing.T) {
		opened, sealed, next := fork(t, s, "")
		t.Logf("plain states: %d of 32 retries opened, %d next-round states sealed, %d opened: %d forks", opened, sealed, next, max(0, next-1))
		if next < 2 {
			t.Fatalf("%d next-round states opened; the control should show the fork working on plain states", next)
		}
	})
	t.Run("latest-only flow, 20 runs", func(t *testing.T) {
		var forks []int
		for run := range 20 {
			opened, sealed, next := fork(t, s, flowJSON("", true, "github_login"))
			if opened != 1 || sealed != 1 || next != 1 {
				t.Errorf("run %d: %d of 32 retries opened, %d next-round states sealed, %d opened; want 1, 1, 1", run+1, opened, sealed, next)
			}
			forks = append(forks, max(0, next-1))
		}
		t.Logf("forks per run (next-round states that opened, less one): %v", forks)
	})
	siblings := func(t *testing.T, latestOnly bool) int {
		s1, _ := s.mustSeal(t, flowJSON("", latestOnly, "github_login"))
		if _, r := s.open(t, s1, "github_login"); r != "OK" {
			t.Fatalf("round 1: got %s, want OK", r)
		}
		next := make([]string, 32)
		for i := range next {
			next[i], _ = s.mustSeal(t, flowJSON(s1, latestOnly, "otp"))
		}
		reasons := concurrently(len(next), func(i int) string {
			_, r := s.open(t, next[i], "otp")
			return r
		})
		checkReasons(t, "sibling round-2 states", reasons, "OK", "ALREADY_CONSUMED")
		return reasons["OK"]
	}
	t.Run("control: 32 sibling round-2 states of a flow without latest-only", func(t *testing.T) {
		if n := siblings(t, false); n != 32 {
			t.Fatalf("%d of 32 opened, want 32", n)
		}
	})
	t.Run("32 sibling round-2 states of a latest-only flow", func(t *testing.T) {
		if n := siblings(t, true); n != 1 {
			t.Fatalf("%d of 32 opened, want 1", n)
		}
	})
}

// attempt is one call of the stretch, with when it was sent.
type attempt struct {
	at     time.Time
	call   string
	reason string
}

// flowsStretch: a client keeps a request going by having a round sealed
// every 300 ms, for 1 s past the end of a flow of 1 s (the tenant's
// flowTTL). Plain states of 1 s go on opening; no state of the flow opens
// after its deadline, and no next round is sealed.
func flowsStretch(t *testing.T, s mcpServer) {
	t.Run("control: plain states of 1 s", func(t *testing.T) {
		state, _, r := s.seal(t, "", `,"ttl":"1s"`)
		if r != "OK" {
			t.Fatalf("seal: %s", r)
		}
		// For 2 s, and until one opened more than 1 s after the first seal
		// (a loaded machine may take longer): each state opens, within the
		// sealer's skew of a minute past its expiry.
		began := time.Now()
		var late int
		for end := began.Add(2 * time.Second); time.Now().Before(end) || late == 0; time.Sleep(300 * time.Millisecond) {
			if time.Since(began) > 30*time.Second {
				t.Fatal("no plain state opened more than 1 s after the first seal within 30 s")
			}
			at := time.Now()
			if _, r := s.open(t, state, "github_login"); r != "OK" {
				t.Fatalf("open at %v: got %s", at.Sub(began).Round(time.Millisecond), r)
			}
			if at.After(began.Add(time.Second)) {
				late++
			}
			if state, _, r = s.seal(t, "", `,"ttl":"1s"`); r != "OK" {
				t.Fatalf("seal: %s", r)
			}
		}
		t.Logf("plain states: %d opens more than 1 s after the first seal", late)
	})
	t.Run("latest-only flow of 1 s", func(t *testing.T) {
		// A TTL far past the flow's: the state expires with the flow.
		state, f, r := s.seal(t, flowJSON("", true, "github_login"), `,"ttl":"3600s"`)
		if r != "OK" {
			t.Fatalf("round 1: %s", r)
		}
		if f.expiresAt.After(f.deadline) {
			t.Errorf("round 1 expires at %v, after the flow's deadline %v", f.expiresAt, f.deadline)
		}
		opened, keys := state, []string{"github_login"}
		var log []attempt
		// Until a second past the deadline, and one round of calls sent
		// after that, however slow the machine: within the skew of a
		// minute, so that what comes after the deadline is refused for the
		// flow's deadline, never for the state's expiry.
		for end, last := f.deadline.Add(time.Second), false; !last; time.Sleep(300 * time.Millisecond) {
			at := time.Now()
			last = !at.Before(end)
			_, r := s.open(t, state, keys...)
			log = append(log, attempt{at, "open round", r})
			if r == "OK" {
				opened = state
			}
			at = time.Now()
			next, nf, r := s.seal(t, flowJSON(opened, true, "otp"), `,"ttl":"3600s"`)
			log = append(log, attempt{at, "seal next round", r})
			if r == "OK" {
				if !nf.deadline.Equal(f.deadline) || nf.expiresAt.After(f.deadline) {
					t.Errorf("round %d: deadline %v, expires %v; want the flow's deadline %v and no later", nf.round, nf.deadline, nf.expiresAt, f.deadline)
				}
				state, keys = next, []string{"otp"}
			}
		}
		// Both clocks are this machine's: a call sent from the millisecond
		// after the deadline (whole milliseconds) reached the sealer past it.
		past := f.deadline.Add(time.Millisecond)
		before, after := map[string]int{}, map[string]int{}
		for _, a := range log {
			if !a.at.Before(past) {
				after[a.call+" "+a.reason]++
				if a.reason == "OK" {
					t.Errorf("%s sent %v after the deadline: OK", a.call, a.at.Sub(f.deadline).Round(time.Millisecond))
				}
			} else {
				before[a.call+" "+a.reason]++
			}
		}
		t.Logf("before the flow's deadline: %v; after it: %v", before, after)
		for _, want := range []string{"open round FLOW_EXPIRED", "seal next round FLOW_EXPIRED"} {
			if after[want] == 0 {
				t.Errorf("after the deadline: %v, want %q among them", after, want)
			}
		}
		for k, n := range after {
			if !strings.HasSuffix(k, " FLOW_EXPIRED") {
				t.Errorf("after the deadline: %d %s, want FLOW_EXPIRED", n, k)
			}
		}
		if before["open round OK"] == 0 {
			t.Errorf("no round opened before the deadline: the stretch was not tried")
		}
	})
}

// flowsMaxRounds: with the tenant's maxRounds 3, plain states go on being
// sealed round after round; a flow's fourth round is refused.
func flowsMaxRounds(t *testing.T, s mcpServer) {
	t.Run("control: plain states", func(t *testing.T) {
		for round := 1; round <= 4; round++ {
			st, _ := s.mustSeal(t, "")
			if _, r := s.open(t, st); r != "OK" {
				t.Fatalf("round %d: got %s, want OK", round, r)
			}
		}
	})
	t.Run("flow of at most 3 rounds", func(t *testing.T) {
		state, _ := s.mustSeal(t, flowJSON("", true))
		for round := 1; ; round++ {
			if f, r := s.open(t, state); r != "OK" || f.round != round {
				t.Fatalf("round %d: got %s, round %d, want OK", round, r, f.round)
			}
			next, _, r := s.seal(t, flowJSON(state, true), "")
			if round == 3 {
				if r != "FLOW_EXHAUSTED" {
					t.Fatalf("round 4: got %s, want FLOW_EXHAUSTED", r)
				}
				return
			}
			if r != "OK" {
				t.Fatalf("round %d: got %s, want OK", round+1, r)
			}
			state = next
		}
	})
}

// flowsInputKeys: a round asks github_login and otp. Plain states open
// with any inputResponses; the flow's refuses an extra key, a missing key,
// a key in another case and no keys, named in the params or in responded,
// without burning the round.
func flowsInputKeys(t *testing.T, s mcpServer) {
	asked := []string{"github_login", "otp"}
	cases := []struct {
		name string
		keys []string
	}{
		{"an extra key", []string{"github_login", "otp", "admin"}},
		{"a missing key", []string{"github_login"}},
		{"a key differing only in case", []string{"github_login", "OTP"}},
		{"no inputResponses", nil},
	}
	t.Run("control: plain state", func(t *testing.T) {
		st, _ := s.mustSeal(t, "")
		for _, tc := range cases {
			if _, r := s.open(t, st, tc.keys...); r != "OK" {
				t.Errorf("%s: got %s; the control should show a plain state opening", tc.name, r)
			}
		}
	})
	t.Run("flow", func(t *testing.T) {
		st, _ := s.mustSeal(t, flowJSON("", true, asked...))
		for _, tc := range cases {
			if _, r := s.open(t, st, tc.keys...); r != "INPUT_MISMATCH" {
				t.Errorf("%s in params.inputResponses: got %s, want INPUT_MISMATCH", tc.name, r)
			}
			if r := s.openResponded(t, st, tc.keys); r != "INPUT_MISMATCH" {
				t.Errorf("%s in responded: got %s, want INPUT_MISMATCH", tc.name, r)
			}
		}
		// The keys asked, in another order: the refusals burnt nothing.
		if _, r := s.open(t, st, "otp", "github_login"); r != "OK" {
			t.Fatalf("the keys asked: got %s, want OK", r)
		}
		other, _ := s.mustSeal(t, flowJSON("", true, asked...))
		if r := s.openResponded(t, other, []string{"otp", "github_login"}); r != "OK" {
			t.Fatalf("the keys asked, in responded: got %s, want OK", r)
		}
	})
	t.Run("flow with a digest binding", func(t *testing.T) {
		d := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("d", 32)))
		resp, r := s.a.call(t, "seal", fmt.Sprintf(`{"principal":%q,"request":{"digest":%q},"payload":"","flow":%s}`, s.principal, d, flowJSON("", true, asked...)))
		if r != "OK" {
			t.Fatalf("seal: %s", r)
		}
		open := func(responded string) string {
			_, r := s.a.call(t, "open", fmt.Sprintf(`{"requestState":%q,"principal":%q,"request":{"digest":%q}%s}`, resp["requestState"], s.principal, d, responded))
			return r
		}
		if r := open(""); r != "INPUT_MISMATCH" {
			t.Errorf("no responded (the keys unknown): got %s, want INPUT_MISMATCH", r)
		}
		if r := open(`,"responded":{"keys":["otp","github_login","admin"]}`); r != "INPUT_MISMATCH" {
			t.Errorf("an extra key in responded: got %s, want INPUT_MISMATCH", r)
		}
		if r := open(`,"responded":{"keys":["otp","github_login"]}`); r != "OK" {
			t.Errorf("the keys asked in responded: got %s, want OK", r)
		}
	})
}

// flowsContinuation: the next round of alice's flow sealed for another
// principal, another request or in another tenant. Plain states tie a
// round to nothing, so each is sealed; a continuation is refused, and the
// flow goes on for alice.
func flowsContinuation(t *testing.T, alice mcpServer, otherTenant api) {
	mallory := mcpServer{a: alice.a, principal: "mallory", params: alice.params}
	otherRequest := mcpServer{a: alice.a, principal: alice.principal, params: otherFlowParams}
	inOtherTenant := mcpServer{a: otherTenant, principal: alice.principal, params: alice.params}
	t.Run("control: plain states", func(t *testing.T) {
		for name, s := range map[string]mcpServer{"another principal": mallory, "another request": otherRequest, "another tenant": inOtherTenant} {
			if _, _, r := s.seal(t, "", ""); r != "OK" {
				t.Errorf("%s: got %s, want OK", name, r)
			}
		}
	})
	t.Run("flow", func(t *testing.T) {
		s1, _ := alice.mustSeal(t, flowJSON("", true, "github_login"))
		if _, r := alice.open(t, s1, "github_login"); r != "OK" {
			t.Fatalf("round 1: %s", r)
		}
		plain, _ := alice.mustSeal(t, "")
		for _, tc := range []struct {
			name, want string
			s          mcpServer
			continues  string
		}{
			{"another principal", "PRINCIPAL_MISMATCH", mallory, s1},
			{"another request", "REQUEST_MISMATCH", otherRequest, s1},
			{"another tenant", "INVALID_STATE", inOtherTenant, s1},
			{"a plain state", "INVALID_ARGUMENT", alice, plain},
			{"a tampered state", "INVALID_STATE", alice, s1[:60] + map[bool]string{true: "B", false: "A"}[s1[60] == 'A'] + s1[61:]},
		} {
			if _, _, r := tc.s.seal(t, flowJSON(tc.continues, true, "otp"), ""); r != tc.want {
				t.Errorf("continuing from %s: got %s, want %s", tc.name, r, tc.want)
			}
		}
		s2, f2 := alice.mustSeal(t, flowJSON(s1, true, "otp"))
		if _, r := alice.open(t, s2, "otp"); r != "OK" || f2.round != 2 {
			t.Fatalf("alice's round 2: got %s, round %d, want OK, 2", r, f2.round)
		}
	})
}

// TestFlows_R9_MaxRoundsLoweredMidFlow: a flow at round 4 of a tenant
// whose maxRounds is lowered to 3 (the tenants file reloaded on SIGHUP)
// does not open again; a plain state is not bounded at all.
func TestFlows_R9_MaxRoundsLoweredMidFlow(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	file := "tenants:\n  shrink:\n    tokens: [\"" + tokenHash("shrink-token") + "\"]\n    policy:\n      maxRounds: %d\n"
	writeFile(t, tenants, fmt.Sprintf(file, 5))
	p := start(t, dir, "--tenants", tenants)
	conn := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	servers := map[string]mcpServer{
		"gRPC": {a: grpcAPI{client: conn, token: "shrink-token"}, principal: "alice", params: flowParams},
		"REST": {a: restAPI{base: "http://" + p.HTTP, client: http.DefaultClient, header: http.Header{"Authorization": {"Bearer shrink-token"}}}, principal: "alice", params: flowParams},
	}
	fourth := map[string]string{}
	for name, s := range servers {
		state, _ := s.mustSeal(t, flowJSON("", true))
		for round := 1; round < 4; round++ {
			if _, r := s.open(t, state); r != "OK" {
				t.Fatalf("%s: round %d: got %s, want OK", name, round, r)
			}
			state, _ = s.mustSeal(t, flowJSON(state, true))
		}
		fourth[name] = state
	}
	writeFile(t, tenants, fmt.Sprintf(file, 3))
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the tenants file to be reloaded", 10*time.Second, func() bool { return strings.Contains(p.logs.String(), "tenants reloaded") })
	for name, s := range servers {
		if _, r := s.open(t, fourth[name]); r != "FLOW_EXHAUSTED" {
			t.Errorf("%s: round 4 with maxRounds 3: got %s, want FLOW_EXHAUSTED", name, r)
		}
	}
}
