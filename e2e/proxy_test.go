package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// naive is a running naive MCP server.
type naive struct{ url, base string }

// startNaive runs examples/naiveserver and returns its endpoint.
func startNaive(t *testing.T, flags ...string) naive {
	t.Helper()
	cmd := exec.Command(naiveBinary, append([]string{"-addr", "127.0.0.1:0"}, flags...)...)
	url := startUntil(t, cmd, regexp.MustCompile(`listening on (http://\S+/mcp)`))[1]
	return naive{url: url, base: strings.TrimSuffix(url, "/mcp")}
}

// calls returns how many requests reached the naive server.
func (n naive) calls(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(n.base + "/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Total int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c.Total
}

// startProxy runs sealer-proxy in front of upstream, calling the sealer s,
// and returns its MCP endpoint.
func startProxy(t *testing.T, s *proc, upstream string, flags ...string) string {
	t.Helper()
	args := append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--upstream", upstream,
		"--sealer", s.GRPC, "--log-level", "debug"}, flags...)
	m := startUntil(t, exec.Command(proxyBinary, args...), regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`))
	return "http://" + m[1] + "/mcp"
}

// TestConformance_MRTR_Proxy runs every input-required-result scenario of
// the official conformance suite against the naive server, unchanged, behind
// sealer-proxy backed by a real sealer: all 14 pass.
func TestConformance_MRTR_Proxy(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "anonymous")
	for sc, r := range conformance(t, bin, url) {
		if !r.passed() {
			t.Errorf("%s: %s", sc, r)
		}
	}
	waitFor(t, "the sealer to refuse the tampered state (R2)", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
	})
}

// TestConformance_MRTR_NaiveDirect runs the same scenarios against the naive
// server alone: it fails exactly the checks a server that trusts its plain
// state fails (R2: it completes a tampered state).
func TestConformance_MRTR_NaiveDirect(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin := nodeBin(t)
	up := startNaive(t)
	var failed []string
	for sc, r := range conformance(t, bin, up.url) {
		if !r.passed() {
			failed = append(failed, sc+": "+strings.Join(r.Failed, ", "))
		}
	}
	slices.Sort(failed)
	want := []string{"tampered-state: sep-2322-reject-tampered-state: FAILURE"}
	if !slices.Equal(failed, want) {
		t.Errorf("the naive server alone fails %q, want %q", failed, want)
	}
	t.Logf("the naive server alone fails: %v", failed)
}

// TestConformance_MRTR_TypeScriptBehindProxy puts a TypeScript SDK server
// without any requestState.verify behind the proxy: tampered-state passes
// through the proxy, and fails without it.
func TestConformance_MRTR_TypeScriptBehindProxy(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	dir, _ := filepath.Abs("testdata/ts-naive-server")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server")); err != nil {
		t.Fatalf("the TypeScript server's packages are missing (scripts/test.sh runs npm ci --prefix %s): %v", dir, err)
	}
	cmd := nodeCommand(t, bin, "node", filepath.Join(dir, "server.mjs"), "127.0.0.1:0")
	cmd.Dir = dir
	up := startUntil(t, cmd, regexp.MustCompile(`listening on (http://\S+/mcp)`))[1]
	url := startProxy(t, s, up, "--principal", "anonymous")
	const scenario = "input-required-result-tampered-state"
	passed := map[string]bool{}
	for _, target := range []string{url, up} {
		out, err := nodeCommand(t, bin, "conformance", "server", "--url", target, "--scenario", scenario,
			"--spec-version", "2026-07-28", "-o", t.TempDir()).CombinedOutput()
		summary := summaryLine.FindStringSubmatch(string(out))
		if summary == nil {
			t.Fatalf("%s at %s printed no summary (%v):\n%s", scenario, target, err, out)
		}
		passed[target] = err == nil && summary[1] == summary[2] && summary[3] == "0"
		t.Logf("%s at %s: %s", scenario, target, summary[0])
	}
	if !passed[url] || passed[up] {
		t.Errorf("%s passed through the proxy: %v, directly: %v; want true, false", scenario, passed[url], passed[up])
	}
}

// refusedBeforeUpstream makes a call that the proxy must refuse with -32602
// without calling the upstream.
func refusedBeforeUpstream(t *testing.T, up naive, what string, call func() (*mcp.CallToolResult, error)) {
	t.Helper()
	before := up.calls(t)
	r, err := call()
	wantInvalidParams(t, r, err)
	if after := up.calls(t); after != before {
		t.Fatalf("%s: the upstream received %d calls, want none", what, after-before)
	}
	t.Logf("%s: refused with -32602, upstream calls %d before, %d after", what, before, before)
}

func TestProxy_R2_TamperedOrForgedStateNeverReachesUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	args := map[string]any{"amount": 42}
	forged := `{"tool":"approve_payment","amount":1000000}`

	// Alone, the naive server pays what a forged state says.
	direct := mcpSession(t, up.url, "alice-token", false, nil)
	r, err := retry(direct, "approve_payment", args, forged, "approve", map[string]any{"ok": true})
	if err != nil || resultText(t, r) != "Paid 1000000.00" {
		t.Fatalf("the forged state against the naive server alone: got %+v, %v; want it paid", r, err)
	}

	cs := mcpSession(t, url, "alice-token", false, nil)
	state := firstRound(t, cs, "approve_payment", args)
	if strings.Contains(state, "amount") {
		t.Fatalf("the proxy passed the upstream's plain state to the client: %q", state)
	}
	refusedBeforeUpstream(t, up, "tampered", func() (*mcp.CallToolResult, error) {
		return retry(cs, "approve_payment", args, state+"-TAMPERED", "approve", map[string]any{"ok": true})
	})
	refusedBeforeUpstream(t, up, "forged", func() (*mcp.CallToolResult, error) {
		return retry(cs, "approve_payment", args, forged, "approve", map[string]any{"ok": true})
	})
	r, err = retry(cs, "approve_payment", args, state, "approve", map[string]any{"ok": true})
	if err != nil || resultText(t, r) != "Paid 42.00" {
		t.Fatalf("the genuine state: got %+v, %v", r, err)
	}
}

func TestProxy_R3_StateOfAnotherPrincipalNeverReachesUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	args := map[string]any{"location": "Paris"}
	units := map[string]any{"units": "celsius"}

	// Alone, the naive server serves anyone who holds a state.
	directState := firstRound(t, mcpSession(t, up.url, "alice-token", false, nil), "get_weather", args)
	if r, err := retry(mcpSession(t, up.url, "mallory-token", false, nil), "get_weather", args, directState, "units", units); err != nil || !strings.Contains(resultText(t, r), "Paris") {
		t.Fatalf("alice's state replayed by mallory against the naive server alone: got %+v, %v; want it served", r, err)
	}

	alice, mallory := mcpSession(t, url, "alice-token", false, nil), mcpSession(t, url, "mallory-token", false, nil)
	state := firstRound(t, alice, "get_weather", args)
	refusedBeforeUpstream(t, up, "replayed under another principal", func() (*mcp.CallToolResult, error) {
		return retry(mallory, "get_weather", args, state, "units", units)
	})
	r, err := retry(alice, "get_weather", args, state, "units", units)
	if err != nil || resultText(t, r) != "Weather in Paris: 21 degrees CELSIUS" {
		t.Fatalf("alice's own retry: got %+v, %v", r, err)
	}
}

// header sets one header on every request of an MCP client: the identity
// an authenticating proxy in front of sealer-proxy vouches for.
type header struct{ name, value string }

func (h header) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestProxy_R3_PrincipalFromAHeaderOrACertificate: with the principal taken
// from a trusted header, or from the caller's client certificate, a state
// replayed by another caller never reaches the upstream, and its owner's
// retry does.
func TestProxy_R3_PrincipalFromAHeaderOrACertificate(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	args, units := map[string]any{"location": "Paris"}, map[string]any{"units": "celsius"}
	check := func(t *testing.T, up naive, alice, mallory *mcp.ClientSession) {
		t.Helper()
		state := firstRound(t, alice, "get_weather", args)
		refusedBeforeUpstream(t, up, "replayed by another caller", func() (*mcp.CallToolResult, error) {
			return retry(mallory, "get_weather", args, state, "units", units)
		})
		if r, err := retry(alice, "get_weather", args, state, "units", units); err != nil || resultText(t, r) != "Weather in Paris: 21 degrees CELSIUS" {
			t.Fatalf("the owner's retry: got %+v, %v", r, err)
		}
	}
	t.Run("trusted header", func(t *testing.T) {
		up := startNaive(t)
		url := startProxy(t, s, up.url, "--principal", "header", "--principal-header-name", "X-Authenticated-User")
		as := func(who string) *mcp.ClientSession {
			return mcpSessionOver(t, url, &http.Client{Transport: header{"X-Authenticated-User", who}, Timeout: 10 * time.Second}, false, nil)
		}
		check(t, up, as("alice"), as("mallory"))
	})
	t.Run("client certificate", func(t *testing.T) {
		p := newPKI(t)
		up := startNaive(t)
		url := strings.Replace(startProxy(t, s, up.url, "--principal", "cert", "--tls-cert", p.server.CertFile,
			"--tls-key", p.server.KeyFile, "--tls-client-ca", p.ca.CertFile), "http://", "https://", 1)
		as := func(who string) *mcp.ClientSession {
			cert := p.ca.Client(t, who, []string{"spiffe://example.org/" + who}, nil)
			tr := &http.Transport{TLSClientConfig: p.tlsConfig(t, &cert), ForceAttemptHTTP2: true}
			return mcpSessionOver(t, url, &http.Client{Transport: tr, Timeout: 10 * time.Second}, false, nil)
		}
		check(t, up, as("alice"), as("mallory"))
	})
}

func TestProxy_R5_StateOnOtherArgumentsNeverReachesUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	paris, boston := map[string]any{"location": "Paris"}, map[string]any{"location": "Boston"}
	units := map[string]any{"units": "celsius"}

	// Alone, the naive server answers Boston's question with Paris's state.
	direct := mcpSession(t, up.url, "alice-token", false, nil)
	if r, err := retry(direct, "get_weather", boston, firstRound(t, direct, "get_weather", paris), "units", units); err != nil || !strings.Contains(resultText(t, r), "Paris") {
		t.Fatalf("Paris's state on Boston against the naive server alone: got %+v, %v; want Paris's weather", r, err)
	}

	cs := mcpSession(t, url, "alice-token", false, nil)
	state := firstRound(t, cs, "get_weather", paris)
	refusedBeforeUpstream(t, up, "other arguments", func() (*mcp.CallToolResult, error) {
		return retry(cs, "get_weather", boston, state, "units", units)
	})
	refusedBeforeUpstream(t, up, "another tool", func() (*mcp.CallToolResult, error) {
		return retry(cs, "approve_payment", map[string]any{"amount": 1000}, state, "approve", map[string]any{"ok": true})
	})
}

func TestProxy_R4_ExpiredStateNeverReachesUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir(), "--skew", "0s")
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer", "--state-ttl", "1s")
	cs := mcpSession(t, url, "alice-token", false, nil)
	args := map[string]any{"location": "Paris"}
	state := firstRound(t, cs, "get_weather", args)
	time.Sleep(1100 * time.Millisecond)
	refusedBeforeUpstream(t, up, "expired", func() (*mcp.CallToolResult, error) {
		return retry(cs, "get_weather", args, state, "units", map[string]any{"units": "celsius"})
	})
	waitFor(t, "the sealer to judge the state expired", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"EXPIRED"`)
	})
}

func TestProxy_R6_OneTimeStateReachesUpstreamOnce(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t)
	// Without recorded outcomes (TestOutcomes_Proxy_* shows them): the
	// second use is refused.
	url := startProxy(t, s, up.url, "--principal", "bearer", "--one-time-tools", "approve_payment", "--record-outcomes=false")
	args, ok := map[string]any{"amount": 42}, map[string]any{"ok": true}

	// Alone, the naive server pays as often as the state comes back.
	direct := mcpSession(t, up.url, "alice-token", false, nil)
	directState := firstRound(t, direct, "approve_payment", args)
	for range 2 {
		if r, err := retry(direct, "approve_payment", args, directState, "approve", ok); err != nil || resultText(t, r) != "Paid 42.00" {
			t.Fatalf("the naive server alone: got %+v, %v; want paid every time", r, err)
		}
	}

	cs := mcpSession(t, url, "alice-token", false, nil)
	state := firstRound(t, cs, "approve_payment", args)
	if r, err := retry(cs, "approve_payment", args, state, "approve", ok); err != nil || resultText(t, r) != "Paid 42.00" {
		t.Fatalf("first use: got %+v, %v", r, err)
	}
	refusedBeforeUpstream(t, up, "second use of a one-time state", func() (*mcp.CallToolResult, error) {
		return retry(cs, "approve_payment", args, state, "approve", ok)
	})
}

// sseEvent is one event of a response stream: its JSON-RPC message.
type sseEvent struct {
	Method string
	ID     json.RawMessage
	Params struct{ Progress float64 }
	Result struct{ RequestState string }
}

// postSSE posts a tools/call with a progress token and returns the events
// of the stream that answers it.
func postSSE(t *testing.T, url string) (string, []sseEvent) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"p1",` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},"name":"progress_report","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "progress_report")
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e sseEvent
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			events = append(events, e)
		}
	}
	return resp.Header.Get("Content-Type"), events
}

// TestProxy_SSEProgressBeforeResultKeepsOrder: the three progress
// notifications come through in order before the result, whose state alone
// is sealed.
func TestProxy_SSEProgressBeforeResultKeepsOrder(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	for _, target := range []string{up.url, url} {
		ct, events := postSSE(t, target)
		var got []string
		for _, e := range events {
			switch {
			case e.Method == "notifications/progress":
				got = append(got, fmt.Sprintf("progress %.0f", e.Params.Progress))
			case e.Method == "" && string(e.ID) == "7" && strings.HasPrefix(e.Result.RequestState, "{"):
				got = append(got, "result with a plain state")
			case e.Method == "" && string(e.ID) == "7" && e.Result.RequestState != "":
				got = append(got, "result with a sealed state")
			default:
				got = append(got, "other "+e.Method)
			}
		}
		want := []string{"progress 1", "progress 2", "progress 3", "result with a sealed state"}
		if target == up.url {
			want[3] = "result with a plain state"
		}
		if !strings.HasPrefix(ct, "text/event-stream") || !slices.Equal(got, want) {
			t.Errorf("%s: %s events %q, want %q", target, ct, got, want)
		}
	}
}

// TestProxy_JSONBodyStateIsSealed: an upstream that answers with JSON
// bodies gets its states sealed there too, and its multi-round tool works
// through the proxy with the go-sdk client's automatic retries.
func TestProxy_JSONBodyStateIsSealed(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t, "-json")
	url := startProxy(t, s, up.url, "--principal", "bearer")
	cs := mcpSession(t, url, "alice-token", false, nil)
	state := firstRound(t, cs, "test_input_required_result_multi_round", map[string]any{})
	if strings.HasPrefix(state, "{") {
		t.Fatalf("the proxy passed the upstream's plain state to the client: %q", state)
	}
	auto := mcpSession(t, url, "alice-token", true, map[string]string{"name": "Alice", "color": "blue"})
	r, err := auto.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_input_required_result_multi_round", Arguments: map[string]any{}})
	if err != nil || resultText(t, r) != "Multi-round complete: Alice likes blue" {
		t.Fatalf("multi_round through the proxy: got %+v, %v", r, err)
	}
}

// TestProxy_RequestStateInAnotherSpellingNeverReachesUpstream: a member that
// Go's encoding/json (another case) or the Python SDK's pydantic models
// (snake_case, populate_by_name) would read as requestState is refused, not
// passed by.
func TestProxy_RequestStateInAnotherSpellingNeverReachesUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	for _, name := range []string{"RequestState", "requeſtState", "REQUESTSTATE", "request_state", "request-state", "REQUEST_STATE"} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},`+
			`"name":"approve_payment","arguments":{"amount":1},%q:"{\"amount\":1000000}","inputResponses":{"approve":{"action":"accept","content":{"ok":true}}}}}`, name)
		before := up.calls(t)
		_, msg := rawPost(t, url, "alice-token", "approve_payment", body)
		if msg.ID != 9 || msg.Error.Code != -32602 || up.calls(t) != before {
			t.Errorf("%s: got id %d, code %d, %d upstream calls; want 9, -32602, none", name, msg.ID, msg.Error.Code, up.calls(t)-before)
		}
	}
}

// TestProxy_R6_LedgerUnavailableIsRetryableNeverAPass: with the sealer's
// Redis ledger stopped, the retry of a one-time tool gets a retryable error
// (HTTP 503, -32603) and never reaches the upstream; with Redis back, the
// same state opens.
func TestProxy_R6_LedgerUnavailableIsRetryableNeverAPass(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	redisSrv := testredis.Start(t, true)
	s := start(t, t.TempDir(), "--ledger", redisSrv.URL(), "--ledger-timeout", "300ms")
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer", "--one-time-tools", "approve_payment")
	state := firstRound(t, mcpSession(t, url, "alice-token", false, nil), "approve_payment", map[string]any{"amount": 42})
	stateJSON, _ := json.Marshal(state)
	body := `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},` +
		`"name":"approve_payment","arguments":{"amount":42},"requestState":` + string(stateJSON) +
		`,"inputResponses":{"approve":{"action":"accept","content":{"ok":true}}}}}`

	redisSrv.Stop(t)
	before := up.calls(t)
	resp, msg := rawPost(t, url, "alice-token", "approve_payment", body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		msg.ID != 11 || msg.Error.Code != -32603 || !msg.Error.Data.Retryable || up.calls(t) != before {
		t.Fatalf("with the ledger down: got HTTP %d, Retry-After %q, %+v, %d upstream calls; want 503, a Retry-After, a retryable -32603 for id 11, none",
			resp.StatusCode, resp.Header.Get("Retry-After"), msg, up.calls(t)-before)
	}
	t.Logf("ledger down: HTTP 503, -32603 retryable, upstream calls %d before, %d after", before, up.calls(t))

	redisSrv.Restart(t)
	if resp, msg := rawPost(t, url, "alice-token", "approve_payment", body); resp.StatusCode != http.StatusOK || msg.Error.Code != 0 || up.calls(t) != before+1 {
		t.Fatalf("with the ledger back: got HTTP %d, %+v; want the state opened and the call passed on", resp.StatusCode, msg)
	}
}

type rawMessage struct {
	ID    int
	Error struct {
		Code int
		Data struct{ Retryable bool }
	}
}

// rawPost posts body to the MCP endpoint url with a bearer token and reads
// the JSON-RPC message of the answer (a JSON body or an SSE stream).
func rawPost(t *testing.T, url, token, tool, body string) (*http.Response, rawMessage) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg rawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &msg) == nil && msg.ID != 0 {
			break
		}
	}
	return resp, msg
}

// TestProxy_OtherHTTPMethodsNeverCarryAStateToUpstream: only POST carries a
// body to the upstream, and the proxy inspects it; a forged state in the body
// of another method (another case of POST, PUT, PATCH, or a GET or DELETE
// with a body) is refused before the upstream.
func TestProxy_OtherHTTPMethodsNeverCarryAStateToUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},` +
		`"name":"approve_payment","arguments":{"amount":1},"requestState":"{\"amount\":1000000}","inputResponses":{"approve":{"action":"accept","content":{"ok":true}}}}}`
	send := func(method, body string) int {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method string
		status int
	}{{"post", 405}, {"Post", 405}, {"PUT", 405}, {"PATCH", 405}, {"GET", 400}, {"DELETE", 400}} {
		before := up.calls(t)
		if got := send(tc.method, body); got != tc.status || up.calls(t) != before {
			t.Errorf("%s with a forged state: got HTTP %d, %d upstream calls; want %d, none", tc.method, got, up.calls(t)-before, tc.status)
		}
	}
	before := up.calls(t)
	send(http.MethodGet, "")
	if up.calls(t) != before+1 {
		t.Errorf("a GET without a body: %d upstream calls, want 1", up.calls(t)-before)
	}
}
