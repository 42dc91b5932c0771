package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/internal/reasons"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// fakeSealer is for the error paths and for what the proxy asks of the
// sealer; the e2e tests run a real sealer.
type fakeSealer struct {
	openErr, sealErr error
	openPayload      []byte   // the payload Open returns, {"round":1} when nil
	payloads         []string // of each Seal
	mu               sync.Mutex
	principals       []string
	seals            int
	flows            []*client.FlowRequest // of each Seal
	responded        [][]string            // of each Open
	// Recorded outcomes: Open says recording, or returns outcome; Record
	// fails with recordErr after waiting for hold (when not nil).
	recording   bool
	outcome     []byte
	recordErr   error
	hold        chan struct{}
	askedRecord []bool   // RecordOutcome of each Open
	records     []record // of each Record
}

type record struct{ state, outcome string }

func (f *fakeSealer) Seal(_ context.Context, r client.SealRequest) (string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seals++
	f.principals = append(f.principals, r.Principal)
	f.flows = append(f.flows, r.Flow)
	f.payloads = append(f.payloads, string(r.Payload))
	return "SEALED", time.Time{}, f.sealErr
}

// Open opens any state as round 1 of a flow.
func (f *fakeSealer) Open(_ context.Context, r client.OpenRequest) (*client.Opened, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.principals = append(f.principals, r.Principal)
	f.responded = append(f.responded, r.Request.Responded)
	f.askedRecord = append(f.askedRecord, r.RecordOutcome)
	if f.openErr != nil {
		return nil, f.openErr
	}
	flow := &client.Flow{Round: 1, LatestOnly: true}
	if f.outcome != nil {
		return &client.Opened{Outcome: f.outcome, State: r.State, Flow: flow}, nil
	}
	payload := f.openPayload
	if payload == nil {
		payload = []byte(`{"round":1}`)
	}
	return &client.Opened{Payload: payload, State: r.State, Flow: flow, Recording: f.recording && r.RecordOutcome}, nil
}

func (f *fakeSealer) Record(_ context.Context, state string, outcome []byte) error {
	if f.hold != nil {
		<-f.hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = append(f.records, record{state, string(outcome)})
	return f.recordErr
}

// upstream answers every POST with body, counting the calls and keeping
// the last body it received.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	calls int
	last  string
	hdr   http.Header
}

func newUpstream(t *testing.T, contentType, body string) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.calls++
		u.last, u.hdr = string(b), r.Header.Clone()
		u.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, body)
	}))
	t.Cleanup(u.Close)
	return u
}

func newProxy(t *testing.T, up *upstream, s Sealer, edit func(*Config)) http.Handler {
	t.Helper()
	cfg := Defaults()
	cfg.Upstream, cfg.Principal = up.URL+"/mcp", PrincipalBearer
	// These upstreams ask by bare {} requests of clients that declare no
	// capabilities; the gate, judged in gate_test.go and the e2e tests,
	// reports them here.
	cfg.SpecGate = SpecGateReport
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const retryBody = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","arguments":{},"requestState":"S"}}`

func post(h http.Handler, body string, header ...string) (*http.Response, map[string]any) {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var m map[string]any
	json.Unmarshal(w.Body.Bytes(), &m)
	return w.Result(), m
}

func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	return fmt.Sprintf("id %v code %v", m["id"], e["code"])
}

func TestProxy_OpenFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{"R2 invalid", fmt.Errorf("wrapped: %w", sealer.ErrInvalid), 400, "id 5 code -32602"},
		{"R3 other principal", sealer.ErrPrincipalMismatch, 400, "id 5 code -32602"},
		{"R4 expired", sealer.ErrExpired, 400, "id 5 code -32602"},
		{"R5 other request", sealer.ErrRequestMismatch, 400, "id 5 code -32602"},
		{"R6 consumed", ledger.ErrConsumed, 400, "id 5 code -32602"},
		{"R9 off-script input keys", sealer.ErrInputMismatch, 400, "id 5 code -32602"},
		{"R9 flow past its deadline", sealer.ErrFlowExpired, 400, "id 5 code -32602"},
		{"R9 flow out of rounds", sealer.ErrFlowExhausted, 400, "id 5 code -32602"},
		{"ledger unavailable is retryable, never a pass", ledger.ErrUnavailable, 503, "id 5 code -32603"},
		{"a sealer that times out is retryable", context.DeadlineExceeded, 503, "id 5 code -32603"},
		{"a sealer that refuses the proxy is retryable", client.ErrUnauthenticated, 503, "id 5 code -32603"},
		{"a retry while the call still runs is retryable", client.ErrInProgress, 503, "id 5 code -32603"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "application/json", `{}`)
			resp, m := post(newProxy(t, up, &fakeSealer{openErr: tc.err}, nil), retryBody, "Authorization", "Bearer tok")
			if resp.StatusCode != tc.status || errorCode(m) != tc.want || up.calls != 0 {
				t.Errorf("got %d %s with %d upstream calls, want %d %s and none", resp.StatusCode, errorCode(m), up.calls, tc.status, tc.want)
			}
			if tc.status == 503 && resp.Header.Get("Retry-After") == "" {
				t.Error("no Retry-After on a retryable error")
			}
		})
	}
}

func TestProxy_OpenedStateReachesUpstreamInPlace(t *testing.T) {
	up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`)
	resp, _ := post(newProxy(t, up, &fakeSealer{}, nil), retryBody, "Authorization", "Bearer tok")
	want := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","arguments":{},"requestState":"{\"round\":1}"}}`
	if resp.StatusCode != 200 || up.last != want {
		t.Errorf("upstream got %s (status %d), want %s", up.last, resp.StatusCode, want)
	}
}

func TestProxy_UpstreamStateFailures(t *testing.T) {
	first := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`
	big := strings.Repeat("s", 2000)
	for _, tc := range []struct {
		name, contentType, body string
		sealErr                 error
		seals                   int
	}{
		{"a state over the cap in JSON is an error, never truncated", "application/json",
			`{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","requestState":"` + big + `"}}`, nil, 0},
		{"a state over the cap in SSE is an error, never truncated", "text/event-stream",
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"requestState\":\"" + big + "\"}}\n\n", nil, 0},
		{"a state that is not a string", "application/json", `{"jsonrpc":"2.0","id":5,"result":{"requestState":{"round":1}}}`, nil, 0},
		{"a seal that fails", "application/json", `{"jsonrpc":"2.0","id":5,"result":{"requestState":"plain-secret"}}`, ledger.ErrUnavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, tc.contentType, tc.body)
			fs := &fakeSealer{sealErr: tc.sealErr}
			h := newProxy(t, up, fs, func(c *Config) { c.MaxStateBytes = 1000 })
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(first))
			req.Header.Set("Authorization", "Bearer tok")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			got := w.Body.String()
			if strings.Contains(got, "sss") || strings.Contains(got, "plain-secret") || strings.Contains(got, "round") ||
				!strings.Contains(got, `"id":5,"error":{"code":-32603`) || fs.seals != tc.seals {
				t.Errorf("got %q after %d seals; want a -32603 error for id 5 and no state, after %d", got, fs.seals, tc.seals)
			}
			if tc.contentType == "text/event-stream" && !strings.HasPrefix(got, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n") {
				t.Errorf("the events before the failure were lost: %q", got)
			}
		})
	}
}

func TestProxy_Principal(t *testing.T) {
	up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{}}`)
	resp, m := post(newProxy(t, up, &fakeSealer{}, nil), retryBody)
	if resp.StatusCode != 401 || errorCode(m) != "id 5 code -32600" || up.calls != 0 {
		t.Errorf("bearer mode without a token: got %d %s with %d upstream calls", resp.StatusCode, errorCode(m), up.calls)
	}

	fs := &fakeSealer{}
	post(newProxy(t, up, fs, nil), retryBody, "Authorization", "Bearer tok", "X-Sealer-Principal", "admin")
	if up.hdr.Get("X-Sealer-Principal") != "" || len(fs.principals) != 1 || !strings.HasPrefix(fs.principals[0], "bearer:") || strings.Contains(fs.principals[0], "tok") {
		t.Errorf("bearer mode: the upstream got the principal header %q, the sealer %v", up.hdr.Get("X-Sealer-Principal"), fs.principals)
	}

	fs = &fakeSealer{}
	post(newProxy(t, up, fs, func(c *Config) { c.Principal = PrincipalHeader }), retryBody, "X-Sealer-Principal", "alice")
	if len(fs.principals) != 1 || fs.principals[0] != "header:alice" {
		t.Errorf("header mode: the sealer got %v", fs.principals)
	}
}

func TestConfig_RefusesToStartWithoutAPrincipal(t *testing.T) {
	cfg := Defaults()
	cfg.Upstream = "http://127.0.0.1:3001/mcp"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "principal") {
		t.Errorf("got %v, want an error naming the principal", err)
	}
	cfg.Principal = PrincipalAnonymous
	if err := cfg.Validate(); err != nil {
		t.Errorf("anonymous: %v", err)
	}
}

func TestProxy_OnlyPOSTCarriesABody(t *testing.T) {
	up := newUpstream(t, "application/json", `{}`)
	h := newProxy(t, up, &fakeSealer{}, nil)
	serve := func(method, body string, chunked bool) *http.Response {
		req := httptest.NewRequest(method, "/mcp", strings.NewReader(body))
		if chunked {
			req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Result()
	}
	for _, m := range []string{"post", "Post", http.MethodPut, http.MethodPatch, http.MethodHead, "PROPFIND", "CONNECT"} {
		before := up.calls
		resp := serve(m, retryBody, false)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST, DELETE, OPTIONS" || up.calls != before {
			t.Errorf("%s with a body: got %d, Allow %q, %d upstream calls; want 405, the allowed methods, none", m, resp.StatusCode, resp.Header.Get("Allow"), up.calls-before)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodOptions} {
		for _, chunked := range []bool{false, true} {
			before := up.calls
			if resp := serve(m, retryBody, chunked); resp.StatusCode != http.StatusBadRequest || up.calls != before {
				t.Errorf("%s with a body (chunked %v): got %d, %d upstream calls; want 400, none", m, chunked, resp.StatusCode, up.calls-before)
			}
		}
		before := up.calls
		if resp := serve(m, "", false); resp.StatusCode != http.StatusOK || up.calls != before+1 {
			t.Errorf("%s without a body: got %d, %d upstream calls; want it passed", m, resp.StatusCode, up.calls-before)
		}
	}
}

func TestProxy_MethodOverrideHeadersNeverReachUpstream(t *testing.T) {
	up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`)
	h := newProxy(t, up, &fakeSealer{}, nil)
	overrides := []string{"X-HTTP-Method-Override", "X-Http-Method", "X-Method-Override", "X_HTTP_Method_Override", "x-method_override"}
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req := httptest.NewRequest(method, "/mcp", nil)
		if method == http.MethodPost {
			req = httptest.NewRequest(method, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		}
		for _, name := range overrides {
			req.Header[name] = []string{"PUT"}
		}
		req.Header.Set("Mcp-Session-Id", "kept")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: got %d, want it passed", method, w.Code)
		}
		for name := range up.hdr {
			if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); n == "x-http-method-override" || n == "x-http-method" || n == "x-method-override" {
				t.Errorf("%s: the upstream got the override header %q", method, name)
			}
		}
		if up.hdr.Get("Mcp-Session-Id") != "kept" {
			t.Errorf("%s: the session header was lost", method)
		}
	}
}

// upstreamStatus answers every request with status, contentType and body.
func upstreamStatus(t *testing.T, status int, contentType, body string) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.calls++
		u.mu.Unlock()
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(u.Close)
	return u
}

func TestProxy_ResponsesItCannotReadNeverPassUnsealed(t *testing.T) {
	const first = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`
	const msg = `{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","requestState":"plain-secret"}}`
	for _, tc := range []struct {
		name, contentType, body string
		upstream, want          int
	}{
		{"text/plain", "text/plain", msg, 200, 502},
		{"no media type", "", msg, 200, 502},
		{"an SSE look-alike", "text/event-stream-x", "data: " + msg + "\n\n", 200, 502},
		{"application/jsonl", "application/jsonl", msg, 200, 502},
		{"a JSON body with a repeated member", "application/json", `{"jsonrpc":"2.0","id":5,"result":{"requestState":"plain-secret"},"result":{}}`, 200, 502},
		{"a JSON body that is not an object", "application/json", `[` + msg + `]`, 200, 502},
		{"an error in text keeps its status", "text/plain", msg, 404, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := upstreamStatus(t, tc.upstream, tc.contentType, tc.body)
			resp, m := post(newProxy(t, up, &fakeSealer{}, nil), first, "Authorization", "Bearer tok")
			b, _ := json.Marshal(m)
			if resp.StatusCode != tc.want || errorCode(m) != "id 5 code -32603" || strings.Contains(string(b), "plain-secret") ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("got %d %s %s, want %d and a -32603 error for id 5 without the state", resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.want)
			}
		})
	}
	t.Run("an empty body passes", func(t *testing.T) {
		up := upstreamStatus(t, http.StatusAccepted, "", "")
		if resp, _ := post(newProxy(t, up, &fakeSealer{}, nil), first, "Authorization", "Bearer tok"); resp.StatusCode != http.StatusAccepted {
			t.Errorf("got %d, want the upstream's 202", resp.StatusCode)
		}
	})
}

// TestProxy_AByteOrderMarkHidesNoState: JSON and SSE decoders may skip a
// leading byte order mark; the proxy skips it too and seals what follows.
func TestProxy_AByteOrderMarkHidesNoState(t *testing.T) {
	const first = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`
	const msg = `{"jsonrpc":"2.0","id":5,"result":{"requestState":"plain-secret"}}`
	for _, tc := range []struct{ contentType, body string }{
		{"application/json", "\uFEFF" + msg},
		{"text/event-stream", "\uFEFFdata: " + msg + "\n\n"},
	} {
		up := newUpstream(t, tc.contentType, tc.body)
		fs := &fakeSealer{}
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(first))
		req.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		newProxy(t, up, fs, nil).ServeHTTP(w, req)
		if got := w.Body.String(); strings.Contains(got, "plain-secret") || !strings.Contains(got, `"requestState":"SEALED"`) || fs.seals != 1 {
			t.Errorf("%s: got %q after %d seals, want the state sealed", tc.contentType, got, fs.seals)
		}
	}
}

// The proxy seals the rounds of a request as one flow (R9): the first
// input_required starts it, an input_required answering a call whose state
// it opened continues that state, each round bound to the keys of the
// result's inputRequests; the retry's inputResponses keys go to Open.
func TestProxy_R9_ChainsRoundsAsAFlow(t *testing.T) {
	const first = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`
	const retry = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","requestState":"S1","inputResponses":{"dates":{"action":"accept"}}}}`
	const asks = `{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{"seat":{},"Meal":{}},"requestState":"plain"}}`
	for _, tc := range []struct {
		name, flows, body string
		want              *client.FlowRequest
	}{
		{"round 1, latest-only by default", "", first, &client.FlowRequest{LatestOnly: true, Asked: []string{"seat", "Meal"}}},
		{"round 2 continues the state opened", "", retry, &client.FlowRequest{Continues: "S1", LatestOnly: true, Asked: []string{"seat", "Meal"}}},
		{"latest-only", FlowsLatestOnly, retry, &client.FlowRequest{Continues: "S1", LatestOnly: true, Asked: []string{"seat", "Meal"}}},
		{"any round", FlowsAnyRound, retry, &client.FlowRequest{Continues: "S1", Asked: []string{"seat", "Meal"}}},
		{"off", FlowsOff, retry, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "application/json", asks)
			fs := &fakeSealer{}
			post(newProxy(t, up, fs, func(c *Config) { c.Policy.Flows = tc.flows }), tc.body, "Authorization", "Bearer tok")
			if len(fs.flows) != 1 {
				t.Fatalf("%d seals, want 1", len(fs.flows))
			}
			got := fs.flows[0]
			if (got == nil) != (tc.want == nil) || got != nil && (got.Continues != tc.want.Continues || got.LatestOnly != tc.want.LatestOnly || !slices.Equal(got.Asked, tc.want.Asked)) {
				t.Errorf("sealed with flow %+v, want %+v", got, tc.want)
			}
			if tc.body == retry && (len(fs.responded) != 1 || !slices.Equal(fs.responded[0], []string{"dates"})) {
				t.Errorf("opened with the keys %q, want [dates]", fs.responded)
			}
		})
	}
	for _, result := range []string{`{"requestState":"plain"}`, `{"inputRequests":null,"requestState":"plain"}`, `{"inputRequests":{},"requestState":"plain"}`} {
		t.Run("a result asking nothing binds that: "+result, func(t *testing.T) {
			up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":`+result+`}`)
			fs := &fakeSealer{}
			post(newProxy(t, up, fs, nil), first, "Authorization", "Bearer tok")
			if len(fs.flows) != 1 || fs.flows[0] == nil || fs.flows[0].Asked == nil || len(fs.flows[0].Asked) != 0 {
				t.Errorf("sealed with %+v, want a flow asking no keys", fs.flows)
			}
		})
	}
}

// A flow that cannot go on (its deadline passed, its rounds used) answers
// -32602 in place of the next round; a sealer without flows, or an
// inputRequests the proxy cannot read, -32603: never the upstream's state.
func TestProxy_R9_NextRoundRefused(t *testing.T) {
	const retry = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","requestState":"S1","inputResponses":{"k":{}}}}`
	const asks = `{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{"k":{}},"requestState":"plain-secret"}}`
	for _, tc := range []struct {
		name, body string
		err        error
		want       string
	}{
		{"flow expired", asks, sealer.ErrFlowExpired, "id 5 code -32602"},
		{"flow exhausted", asks, sealer.ErrFlowExhausted, "id 5 code -32602"},
		{"a sealer without flows", asks, client.ErrNoFlow, "id 5 code -32603"},
		{"inputRequests not an object", `{"jsonrpc":"2.0","id":5,"result":{"inputRequests":["k"],"requestState":"plain-secret"}}`, nil, "id 5 code -32603"},
		{"inputRequests with a key twice", `{"jsonrpc":"2.0","id":5,"result":{"inputRequests":{"k":{},"k":{}},"requestState":"plain-secret"}}`, nil, "id 5 code -32603"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "application/json", tc.body)
			_, m := post(newProxy(t, up, &fakeSealer{sealErr: tc.err}, nil), retry, "Authorization", "Bearer tok")
			b, _ := json.Marshal(m)
			if errorCode(m) != tc.want || strings.Contains(string(b), "plain-secret") {
				t.Errorf("got %s, want %s without the state", b, tc.want)
			}
		})
	}
}

func TestConfig_Flows(t *testing.T) {
	for _, tc := range []struct {
		flows string
		ok    bool
	}{{"", true}, {FlowsLatestOnly, true}, {FlowsAnyRound, true}, {FlowsOff, true}, {"on", false}, {"Latest-Only", false}} {
		cfg := Defaults()
		cfg.Upstream, cfg.Principal, cfg.Policy.Flows = "http://127.0.0.1:3001/mcp", PrincipalAnonymous, tc.flows
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("flows %q: got %v, want ok %v", tc.flows, err, tc.ok)
		}
	}
}

// The proxy names the sealer's errors as the sealer does, and its own apart.
func TestReasonOf(t *testing.T) {
	for _, r := range reasons.Table {
		want := reasons.Text(r.Reason)
		if got := reasonOf(fmt.Errorf("open: %w", r.Err)); got != want {
			t.Errorf("%v: got %s, want %s", r.Err, got, want)
		}
	}
	for err, want := range map[error]string{
		nil: "OK", client.ErrNoFlow: "NO_FLOW", context.DeadlineExceeded: "TIMEOUT",
		errStateTooLarge: "STATE_TOO_LARGE", errEventTooLarge: "RESPONSE_TOO_LARGE", errors.New("other"): "ERROR",
	} {
		if got := reasonOf(err); got != want {
			t.Errorf("%v: got %s, want %s", err, got, want)
		}
	}
}

// TestProxy_UpstreamOutputsItCannotReadExactly (issue 35): on the three
// methods, a message the proxy cannot read exactly, or whose members a
// client's decoder could read otherwise, becomes a -32603 error, never
// passed with its plain state; an event without data passes.
func TestProxy_UpstreamOutputsItCannotReadExactly(t *testing.T) {
	const first = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`
	const msg = `{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","requestState":"plain-secret"}}`
	for _, tc := range []struct{ name, contentType, body string }{
		{"SSE text after the JSON", "text/event-stream", "data: " + msg + " x\n\n"},
		{"SSE two messages in one event", "text/event-stream", "data: " + msg + "\ndata: " + msg + "\n\n"},
		{"SSE a message twice on one line", "text/event-stream", "data: " + msg + msg + "\n\n"},
		{"SSE requestState twice", "text/event-stream", "data: " + strings.Replace(msg, `"requestState"`, `"requestState":"x","requestState"`, 1) + "\n\n"},
		{"SSE a repeated result", "text/event-stream", "data: " + strings.Replace(msg, `"result"`, `"result":{},"result"`, 1) + "\n\n"},
		{"JSON requestState twice", "application/json", strings.Replace(msg, `"requestState"`, `"requestState":"x","requestState"`, 1)},
		{"JSON RequestState", "application/json", strings.Replace(msg, `"requestState"`, `"RequestState"`, 1)},
		{"JSON request_state", "application/json", strings.Replace(msg, `"requestState"`, `"request_state"`, 1)},
		{"JSON Result", "application/json", strings.Replace(msg, `"result"`, `"Result"`, 1)},
		{"JSON InputRequests", "application/json", strings.Replace(msg, `"requestState":"plain-secret"`, `"InputRequests":{"k":{}},"requestState":"plain-secret"`, 1)},
		{"JSON a result that is not an object", "application/json", `{"jsonrpc":"2.0","id":5,"result":["plain-secret"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, tc.contentType, tc.body)
			_, m := post(newProxy(t, up, &fakeSealer{}, nil), first, "Authorization", "Bearer tok")
			if tc.contentType == "text/event-stream" {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(first))
				req.Header.Set("Authorization", "Bearer tok")
				w := httptest.NewRecorder()
				newProxy(t, up, &fakeSealer{}, nil).ServeHTTP(w, req)
				json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(w.Body.String(), "data: "))), &m)
			}
			b, _ := json.Marshal(m)
			if errorCode(m) != "id 5 code -32603" || strings.Contains(string(b), "plain-secret") {
				t.Errorf("got %s, want a -32603 error for id 5 without the state", b)
			}
		})
	}
	t.Run("an SSE event without data passes", func(t *testing.T) {
		up := newUpstream(t, "text/event-stream", "id: 1\ndata:\n\ndata: "+msg+"\n\n")
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(first))
		req.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		newProxy(t, up, &fakeSealer{}, nil).ServeHTTP(w, req)
		if got := w.Body.String(); !strings.HasPrefix(got, "id: 1\ndata:\n\n") || !strings.Contains(got, `"requestState":"SEALED"`) {
			t.Errorf("got %q, want the priming event as it was and the state sealed", got)
		}
	})
}

// TestProxy_SSEAnswerLosesTheUpstreamsLength: the rewritten events are
// longer than the upstream's Content-Length said.
func TestProxy_SSEAnswerLosesTheUpstreamsLength(t *testing.T) {
	const data = "data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"inputRequests\":{\"k\":{}},\"requestState\":\"p\"}}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		io.WriteString(w, data)
	}))
	t.Cleanup(up.Close)
	fs := &fakeSealer{}
	srv := httptest.NewServer(newProxy(t, &upstream{Server: up}, fs, func(c *Config) {}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(got), `"requestState":"SEALED"}}`) {
		t.Errorf("got %q, %v; want the whole event, its state sealed", got, err)
	}
}

// TestProxy_R5_OwnStateForRoundsWithoutOne (issue 35): a round that asks
// input without a state gets a state of the proxy's own, with no payload,
// bound to its keys; the retry reaches the upstream without it.
func TestProxy_R5_OwnStateForRoundsWithoutOne(t *testing.T) {
	up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{"k":{}}}}`)
	fs := &fakeSealer{openPayload: []byte{}}
	h := newProxy(t, up, fs, nil)
	_, m := post(h, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`, "Authorization", "Bearer tok")
	result, _ := m["result"].(map[string]any)
	if result["requestState"] != "SEALED" || len(fs.payloads) != 1 || fs.payloads[0] != "" || !slices.Equal(fs.flows[0].Asked, []string{"k"}) {
		t.Fatalf("got %v after seals of %q, flows %+v; want a state of the proxy's own, no payload, asking k", m, fs.payloads, fs.flows)
	}
	post(h, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"t","requestState":"SEALED","inputResponses":{"k":{}}}}`, "Authorization", "Bearer tok")
	if want := `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"t","inputResponses":{"k":{}}}}`; up.last != want || !slices.Equal(fs.responded[0], []string{"k"}) {
		t.Errorf("the upstream got %s, opened with keys %q; want %s, keys k", up.last, fs.responded, want)
	}
	for _, result := range []string{`{"resultType":"complete","content":[]}`, `{"inputRequests":{}}`, `{"inputRequests":null}`} {
		up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":`+result+`}`)
		fs := &fakeSealer{}
		post(newProxy(t, up, fs, nil), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`, "Authorization", "Bearer tok")
		if fs.seals != 0 {
			t.Errorf("result %s: %d seals, want none (it asks nothing)", result, fs.seals)
		}
	}
}

func TestCheckHeaders(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},`
	for _, tc := range []struct {
		name, params string
		header       map[string][]string
		ok           bool
	}{
		{"all agree", meta + `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"t"}}, true},
		{"another name", meta + `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"u"}}, false},
		{"no name", meta + `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}}, false},
		{"two names", meta + `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"t", "t"}}, false},
		{"another method", meta + `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"prompts/get"}, "Mcp-Name": {"t"}}, false},
		{"a version other than _meta's", meta + `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2025-06-18"}}, false},
		{"no version beside _meta's", meta + `"name":"t"`, nil, false},
		{"an older protocol without the headers", `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2025-06-18"}}, true},
		{"an older protocol with a wrong name", `"name":"t"`, map[string][]string{"Mcp-Protocol-Version": {"2025-06-18"}, "Mcp-Name": {"u"}}, false},
		{"no headers, no _meta", `"name":"t"`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCall([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + tc.params + `}}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := checkHeaders(http.Header(tc.header), c); (got == nil) != tc.ok {
				t.Errorf("got %v, want ok %v", got, tc.ok)
			}
		})
	}
}

// TestProxy_OwnedHeadersInAnySpelling: the principal header reaches the
// upstream in its own spelling only, and only in mode header; other
// spellings of the MCP headers never.
func TestProxy_OwnedHeadersInAnySpelling(t *testing.T) {
	for _, mode := range []string{PrincipalBearer, PrincipalHeader} {
		up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`)
		h := newProxy(t, up, &fakeSealer{}, func(c *Config) { c.Principal = mode })
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		for _, name := range []string{"X-Sealer-Principal", "X_Sealer_Principal", "X-Sealer_principal", "Mcp_Name", "MCP_METHOD", "Mcp-Protocol_Version"} {
			req.Header[name] = []string{"v"}
		}
		req.Header.Set("Mcp-Name", "kept")
		h.ServeHTTP(httptest.NewRecorder(), req)
		var got []string
		for name := range up.hdr {
			if l := looseHeader(name); l == "xsealerprincipal" || strings.HasPrefix(l, "mcp") {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		want := []string{"Mcp-Name"}
		if mode == PrincipalHeader {
			want = []string{"Mcp-Name", "X-Sealer-Principal"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the upstream got %q, want %q", mode, got, want)
		}
	}
}

// TestProxy_BodyBounds: a body past the buffered bytes is refused with 503
// before it is read, and one too slow with 408; the upstream sees neither.
func TestProxy_BodyBounds(t *testing.T) {
	up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`)
	p := newProxy(t, up, &fakeSealer{}, func(c *Config) { c.BodyTimeout = time.Second; c.MaxBufferedBytes = 6 << 20 }).(*Proxy)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	send := func(head, body string) int {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: x\r\n"+head+"\r\n"+body)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Holds 4 MiB (its declared length) while it stalls for the deadline.
	held := make(chan int)
	go func() { held <- send("Content-Length: 4194304\r\n", "{") }()
	for p.buffered.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if got := send("Content-Length: 4194304\r\n", ""); got != http.StatusServiceUnavailable {
		t.Errorf("a second body of 4 MiB beside one held: got %d, want 503", got)
	}
	if got := <-held; got != http.StatusRequestTimeout {
		t.Errorf("a stalled body: got %d, want 408", got)
	}
	if got := send("Content-Length: 5000000\r\n", ""); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a declared length past the cap: got %d, want 413", got)
	}
	if up.calls != 0 {
		t.Errorf("the upstream got %d calls, want none", up.calls)
	}
}
