package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// What an attacker sends past the proxy without a state it opened (issue
// 40): an empty state, an HTTP upgrade, answers without any state for a
// one-time tool, arguments the upstream reads two ways; and the proxy's
// own token sent over plaintext.

// TestProxy_Hostile_EmptyStateIsOpened (issue 40, 3; R2): an upstream that
// tells "requestState": "" from an absent one (the Python SDK's low-level
// Server tests `is None`) runs its second round on an empty state. Through
// the proxy the empty state is opened like any other, and so refused: the
// upstream is never called.
func TestProxy_Hostile_EmptyStateIsOpened(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			ID     json.RawMessage
			Params map[string]json.RawMessage
		}
		json.NewDecoder(r.Body).Decode(&req)
		if _, ok := req.Params["requestState"]; ok { // is not None
			jsonResult(w, req.ID, toolResult("PAID without a first round"))
			return
		}
		jsonResult(w, req.ID, askResult("confirm", `{"amount":42}`))
	}))
	t.Cleanup(srv.Close)
	params := `{` + meta + `,"name":"pay","arguments":{},"requestState":"","inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}}`
	if _, body := mcpPost(t, srv.URL+"/mcp", "tools/call", "pay", params, nil); !strings.Contains(body, "PAID") {
		t.Fatalf("the upstream alone: %q, want it to pay on an empty state", body)
	}
	url := startProxy(t, s, srv.URL+"/mcp", "--principal", "bearer")
	for _, state := range []string{`""`, `null`} {
		before := calls.Load()
		p := strings.Replace(params, `"requestState":""`, `"requestState":`+state, 1)
		status, body := mcpPost(t, url, "tools/call", "pay", p, nil)
		if a := parseAnswer(t, body); a.Error == nil || a.Error.Code != -32602 || calls.Load() != before {
			t.Errorf("requestState %s: got HTTP %d %s, %d upstream calls; want error -32602, none", state, status, a, calls.Load()-before)
		}
	}
}

// upgrader is an upstream that switches protocols: to a request asking an
// upgrade, or (unasked) to every request; past its 101 it writes a forged
// state, which would reach the client without the proxy reading it.
func upgrader(t *testing.T, unasked bool) (url string, calls *atomic.Int64) {
	t.Helper()
	calls = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if !unasked && r.Header.Get("Upgrade") == "" {
			http.Error(w, "no upgrade", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		fmt.Fprint(rw, `{"jsonrpc":"2.0","id":5,"result":{"requestState":"FORGED"}}`+"\n")
		rw.Flush()
		time.Sleep(200 * time.Millisecond)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", calls
}

// rawExchange sends request on a new connection to url's host and returns
// the status of the answer and what followed it, within 5 s.
func rawExchange(t *testing.T, url, request string) (int, string) {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, request)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	rest, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		rest, _ = io.ReadAll(br) // the other protocol's bytes, until the upstream closes
	}
	return resp.StatusCode, string(rest)
}

// wirePost is an HTTP/1.1 POST of body to /mcp with the header lines
// headers.
func wirePost(headers, body string) string {
	return fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", headers, len(body), body)
}

// TestProxy_Hostile_UpgradesNeverTunnel (issue 40, 4): Streamable HTTP never
// upgrades. A request asking an upgrade never reaches the upstream, and an
// upstream that switches protocols unasked gets a 502 in place of its 101:
// no byte passes the proxy unread.
func TestProxy_Hostile_UpgradesNeverTunnel(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up, calls := upgrader(t, false)
	if status, rest := rawExchange(t, up, "GET /mcp HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"); status != 101 || !strings.Contains(rest, "FORGED") {
		t.Fatalf("the upstream alone: %d %q, want 101 and the forged state", status, rest)
	}
	url := startProxy(t, s, up, "--principal", "bearer")
	for _, req := range []string{
		"GET /mcp HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"GET /mcp HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, upgrade\r\nUpgrade: h2c\r\n\r\n",
		wirePost("Connection: Upgrade\r\nUpgrade: websocket\r\n", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
	} {
		before := calls.Load()
		status, rest := rawExchange(t, url, req)
		if status != http.StatusBadRequest || strings.Contains(rest, "FORGED") || calls.Load() != before {
			t.Errorf("%q: got %d %q, %d upstream calls; want 400, none", strings.SplitN(req, "\r\n", 2)[0], status, rest, calls.Load()-before)
		}
	}
	up, _ = upgrader(t, true)
	url = startProxy(t, s, up, "--principal", "bearer")
	for _, req := range []string{
		"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n",
		wirePost("Authorization: Bearer alice\r\n", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`),
	} {
		if status, rest := rawExchange(t, url, req); status != http.StatusBadGateway || strings.Contains(rest, "FORGED") {
			t.Errorf("an unasked 101 to %q: got %d %q, want 502", strings.SplitN(req, "\r\n", 2)[0], status, rest)
		}
	}
}

// TestProxy_Hostile_OneTimeAnswersNeedTheirState (issue 40, 9; R6): for a
// tool in --one-time-tools whose upstream asks without a state, the proxy's
// own state opens once, and the same answers without any state are refused
// before the upstream: the payment is made once. A tool that is not
// one-time still gets stateless answers passed, as the conformance suite
// wants (docs/PROXY.md).
func TestProxy_Hostile_OneTimeAnswersNeedTheirState(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	var paid atomic.Int64
	up := startUpstream(t, func(w http.ResponseWriter, req upstreamCall) {
		if _, ok := req.Params.InputResponses["confirm"]; !ok {
			jsonResult(w, req.ID, askResult("confirm", ""))
			return
		}
		jsonResult(w, req.ID, toolResult(fmt.Sprintf("payment %d", paid.Add(1))))
	})
	// Without recorded outcomes, which replay "the state replayed" below.
	url := startProxy(t, s, up.url, "--principal", "bearer", "--one-time-tools", "pay", "--record-outcomes=false")
	_, body := mcpPost(t, url, "tools/call", "pay", toolParams("pay", `{"amount":42}`, ""), nil)
	state := parseAnswer(t, body).Result.RequestState
	if state == "" {
		t.Fatalf("round 1: %q carries no requestState, want one of the proxy's own", body)
	}
	_, body = mcpPost(t, url, "tools/call", "pay", toolParams("pay", `{"amount":42}`, state, "confirm"), nil)
	if a := parseAnswer(t, body); a.String() != "complete payment 1" {
		t.Fatalf("the retry with its state: got %s, want complete payment 1", a)
	}
	for _, tc := range []struct{ what, params string }{
		{"the state replayed", toolParams("pay", `{"amount":42}`, state, "confirm")},
		{"the answers without a state", toolParams("pay", `{"amount":42}`, "", "confirm")},
		{"the answers with a null state", strings.Replace(toolParams("pay", `{"amount":42}`, "", "confirm"), `"inputResponses"`, `"requestState":null,"inputResponses"`, 1)},
		{"null answers without a state", strings.TrimSuffix(toolParams("pay", `{"amount":42}`, ""), "}") + `,"inputResponses":null}`},
	} {
		before := up.calls()
		_, body := mcpPost(t, url, "tools/call", "pay", tc.params, nil)
		if a := parseAnswer(t, body); a.Error == nil || a.Error.Code != -32602 || up.calls() != before {
			t.Errorf("%s: got %s, %d upstream calls; want error -32602, none", tc.what, a, up.calls()-before)
		}
	}
	if n := paid.Load(); n != 1 {
		t.Errorf("the upstream paid %d times, want once", n)
	}
	before := up.calls()
	_, body = mcpPost(t, url, "tools/call", "greet", toolParams("greet", `{}`, "", "confirm"), nil)
	if a := parseAnswer(t, body); a.Error != nil || up.calls() != before+1 {
		t.Errorf("a tool that is not one-time, answers without a state: got %s, %d upstream calls; want them passed", a, up.calls()-before)
	}
}

// TestProxy_Hostile_TokenNeverOverPlaintextOffLoopback (issue 40, 8): with
// --sealer-token-file and no --sealer-ca, the token would go in the clear;
// the proxy refuses to start unless the sealer is on loopback, and says
// why, as the sealer refuses to listen in plaintext off loopback.
func TestProxy_Hostile_TokenNeverOverPlaintextOffLoopback(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("proxy-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(sealerAddr string) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, proxyBinary, "--addr", "127.0.0.1:0", "--admin-addr", "", "--upstream", "http://127.0.0.1:1/mcp",
			"--principal", "bearer", "--sealer", sealerAddr, "--sealer-token-file", token)
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		var out strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), `"msg":"listening"`) {
				return out.String(), true
			}
		}
		return out.String(), false
	}
	for _, addr := range []string{"192.0.2.10:7443", "sealer.example:7443", "dns:///sealer.example:7443"} {
		out, started := run(addr)
		if started || !strings.Contains(out, "plaintext") {
			t.Errorf("--sealer %s without --sealer-ca: started %v, printed %q; want a refusal that names plaintext", addr, started, out)
		}
	}
	for _, addr := range []string{"127.0.0.1:7443", "[::1]:7443", "localhost:7443"} {
		if out, started := run(addr); !started {
			t.Errorf("--sealer %s (loopback) without --sealer-ca: did not start: %q", addr, out)
		}
	}
}
