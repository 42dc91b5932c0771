package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/sealer"
)

// What never passes the proxy without being opened or read (issue 40).

// TestProxy_R2_AnyPresentStateIsOpened (issue 40, 3): an empty state is a
// state: the upstream may tell it from none (Python's `is None`), so it is
// opened like any other, and refused; a null one is refused as not a
// string. Neither reaches the upstream.
func TestProxy_R2_AnyPresentStateIsOpened(t *testing.T) {
	for _, tc := range []struct {
		name, state string
		opens       int
	}{
		{"empty", `""`, 1},
		{"null", `null`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{}}`)
			fs := &fakeSealer{openErr: sealer.ErrInvalid}
			body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","requestState":` + tc.state + `,"inputResponses":{"k":{}}}}`
			resp, m := post(newProxy(t, up, fs, nil), body, "Authorization", "Bearer tok")
			if resp.StatusCode != 400 || errorCode(m) != "id 5 code -32602" || up.calls != 0 || len(fs.responded) != tc.opens {
				t.Errorf("got %d %s, %d upstream calls, %d opens; want 400 id 5 code -32602, none, %d", resp.StatusCode, errorCode(m), up.calls, len(fs.responded), tc.opens)
			}
		})
	}
}

// upgradingUpstream answers every request with a 101 to websocket and then
// a forged state, whether or not the request asked an upgrade.
func upgradingUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.calls++
		u.mu.Unlock()
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nFORGED")
		rw.Flush()
	}))
	t.Cleanup(u.Close)
	return u
}

// TestProxy_UpgradesNeverTunnel (issue 40, 4): Streamable HTTP never
// upgrades, and past a 101 every byte would bypass the proxy. A request
// asking an upgrade is refused before the upstream; a 101 the upstream
// sends unasked becomes a 502.
func TestProxy_UpgradesNeverTunnel(t *testing.T) {
	up := upgradingUpstream(t)
	srv := httptest.NewServer(newProxy(t, up, &fakeSealer{}, nil))
	t.Cleanup(srv.Close)
	exchange := func(req string) (int, string) {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(rest)
	}
	const postReq = "POST /mcp HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 46\r\n\r\n" +
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tc := range []struct {
		name, req   string
		want, calls int
	}{
		{"GET asking websocket", "GET /mcp HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 400, 0},
		{"GET asking h2c among other tokens", "GET /mcp HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, upgrade\r\nUpgrade: h2c\r\n\r\n", 400, 0},
		{"GET with Upgrade alone", "GET /mcp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n", 400, 0},
		{"POST asking websocket", strings.Replace(postReq, "%s", "Connection: Upgrade\r\nUpgrade: websocket\r\n", 1), 400, 0},
		{"an unasked 101 to GET", "GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n", 502, 1},
		{"an unasked 101 to POST", strings.Replace(postReq, "%s", "", 1), 502, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := up.calls
			status, rest := exchange(tc.req)
			if status != tc.want || strings.Contains(rest, "FORGED") || up.calls-before != tc.calls {
				t.Errorf("got %d %q, %d upstream calls; want %d, %d", status, rest, up.calls-before, tc.want, tc.calls)
			}
		})
	}
}

// TestProxy_EveryContentEncodingLineIsRead (issue 40, 5): a second
// Content-Encoding line is an encoding too: a client that reads it (or an
// upstream that reads the request's) would decode what the proxy read
// plain. Each line is read, and each token of each line.
func TestProxy_EveryContentEncodingLineIsRead(t *testing.T) {
	const msg = `{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","requestState":"plain-secret"}}`
	for _, lines := range [][]string{{"identity", "gzip"}, {"", "br"}, {"identity, gzip"}} {
		t.Run(strings.Join(lines, "|"), func(t *testing.T) {
			u := &upstream{}
			u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, l := range lines {
					w.Header().Add("Content-Encoding", l)
				}
				io.WriteString(w, "data: "+msg+"\n\n")
			}))
			t.Cleanup(u.Close)
			h := newProxy(t, u, &fakeSealer{}, nil)
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t"}}`))
			req.Header.Set("Authorization", "Bearer tok")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusBadGateway || strings.Contains(w.Body.String(), "plain-secret") || len(w.Result().Header.Values("Content-Encoding")) != 0 {
				t.Errorf("answer: got %d %q, Content-Encoding %q; want 502 without the state or an encoding", w.Code, w.Body.String(), w.Result().Header.Values("Content-Encoding"))
			}

			up := newUpstream(t, "application/json", `{}`)
			req = httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(retryBody))
			req.Header.Set("Authorization", "Bearer tok")
			for _, l := range lines {
				req.Header.Add("Content-Encoding", l)
			}
			w = httptest.NewRecorder()
			newProxy(t, up, &fakeSealer{}, nil).ServeHTTP(w, req)
			if w.Code != http.StatusUnsupportedMediaType || up.calls != 0 {
				t.Errorf("request: got %d, %d upstream calls; want 415, none", w.Code, up.calls)
			}
		})
	}
	up := newUpstream(t, "application/json", `{}`)
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header["Content-Encoding"] = []string{"identity", "Identity"}
	w := httptest.NewRecorder()
	newProxy(t, up, &fakeSealer{}, nil).ServeHTTP(w, req)
	if w.Code != http.StatusOK || up.calls != 1 {
		t.Errorf("identity twice: got %d, %d upstream calls; want it passed", w.Code, up.calls)
	}
}

// TestProxy_R6_OneTimeAnswersNeedTheirState (issue 40, 9): for a one-time
// tool, prompt or resource, answers without a state are refused before the
// upstream: an upstream that asks without a state would act on them again
// and again, past the one open of the proxy's own state. Elsewhere they
// pass (docs/PROXY.md says why).
func TestProxy_R6_OneTimeAnswersNeedTheirState(t *testing.T) {
	edit := func(c *Config) {
		c.Policy.OneTime.Tools = []string{"pay"}
		c.Policy.OneTime.Prompts = []string{"vote"}
		c.Policy.OneTime.Resources = []string{"file:///ledger"}
	}
	for _, tc := range []struct {
		name, body string
		passed     bool
	}{
		{"one-time tool", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay","inputResponses":{"k":{}}}}`, false},
		{"one-time tool, null state", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay","requestState":null,"inputResponses":{"k":{}}}}`, false},
		{"one-time tool, null answers", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay","inputResponses":null}}`, false},
		{"one-time tool, no answers", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay","inputResponses":{}}}`, false},
		{"one-time prompt", `{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"vote","inputResponses":{"k":{}}}}`, false},
		{"one-time resource", `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"file:///ledger","inputResponses":{"k":{}}}}`, false},
		{"one-time tool, first round", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay"}}`, true},
		{"another tool", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"greet","inputResponses":{"k":{}}}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{}}`)
			resp, m := post(newProxy(t, up, &fakeSealer{}, edit), tc.body, "Authorization", "Bearer tok")
			if tc.passed && (resp.StatusCode != 200 || up.calls != 1) {
				t.Errorf("got %d %s, %d upstream calls; want it passed", resp.StatusCode, errorCode(m), up.calls)
			}
			if !tc.passed && (resp.StatusCode != 400 || errorCode(m) != "id 5 code -32602" || up.calls != 0) {
				t.Errorf("got %d %s, %d upstream calls; want 400 id 5 code -32602, none", resp.StatusCode, errorCode(m), up.calls)
			}
		})
	}
}

// TestConfig_SealerTokenOnlyOverTLSOffLoopback (issue 40, 8): a bearer
// token in plaintext reaches whoever is on the path; the proxy refuses to
// send it so to anything but loopback, by the rule the sealer applies to
// its own listeners.
func TestConfig_SealerTokenOnlyOverTLSOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		sealer, ca string
		ok         bool
	}{
		{"sealer.internal:7443", "", false},
		{"10.0.0.7:7443", "", false},
		{"dns:///sealer.internal:7443", "", false},
		{"0.0.0.0:7443", "", false},
		{"sealer.internal:7443", "ca.pem", true},
		{"127.0.0.1:7443", "", true},
		{"[::1]:7443", "", true},
		{"localhost:7443", "", true},
	} {
		cfg := Defaults()
		cfg.Upstream, cfg.Principal = "http://127.0.0.1:3001/mcp", PrincipalAnonymous
		cfg.Sealer, cfg.SealerCA, cfg.SealerTokenFile = tc.sealer, tc.ca, "token"
		err := cfg.Validate()
		if tc.ok && err != nil || !tc.ok && (err == nil || !strings.Contains(err.Error(), "plaintext")) {
			t.Errorf("sealer %s, sealer-ca %q: got %v, want ok %v (an error naming plaintext)", tc.sealer, tc.ca, err, tc.ok)
		}
		cfg.SealerTokenFile = ""
		if err := cfg.Validate(); err != nil {
			t.Errorf("sealer %s without a token: %v", tc.sealer, err)
		}
	}
}

// TestProxy_R5_ArgumentsReachUpstreamInTheirDigestsForm (issue 40, 6): the
// arguments of tools/call and prompts/get reach the upstream as the digest
// hashed them, in their RFC 8785 form, first round and retry alike: two
// spellings bound alike (members in another order, 1.0 for 1, escapes)
// are one text, which any deterministic decoder reads one way. Arguments
// already in that form leave the body as received.
func TestProxy_R5_ArgumentsReachUpstreamInTheirDigestsForm(t *testing.T) {
	arguments := func(t *testing.T, body string) string {
		t.Helper()
		var m struct{ Params map[string]json.RawMessage }
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("the upstream got %q: %v", body, err)
		}
		return string(m.Params["arguments"])
	}
	for _, tc := range []struct{ name, method, first, retry, want string }{
		{"tool", "tools/call", `{"b":1.0,"a":"\u0041","B":{"y":1e0,"x":[10e-1, -0]}}`, `{"a":"A","B":{"x":[1,0],"y":1},"b":1}`, `{"B":{"x":[1,0],"y":1},"a":"A","b":1}`},
		{"names that collide under case folding", "tools/call", `{"item":"pen","Item":"car"}`, `{"Item":"car","item":"pen"}`, `{"Item":"car","item":"pen"}`},
		{"prompt", "prompts/get", `{ "z" : "1", "k" : "\u00e9" }`, `{"k":"é","z":"1"}`, `{"k":"é","z":"1"}`},
		{"null", "tools/call", `null`, `null`, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{}}`)
			h := newProxy(t, up, &fakeSealer{}, nil)
			for _, round := range []struct{ args, state string }{{tc.first, ""}, {tc.retry, `,"requestState":"S"`}} {
				resp, m := post(h, `{"jsonrpc":"2.0","id":5,"method":"`+tc.method+`","params":{"name":"t","arguments":`+round.args+round.state+`}}`, "Authorization", "Bearer tok")
				if got := arguments(t, up.last); resp.StatusCode != 200 || got != tc.want {
					t.Errorf("arguments %s: got %d %s, the upstream got %s; want 200, %s", round.args, resp.StatusCode, errorCode(m), got, tc.want)
				}
			}
		})
	}
	up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{}}`)
	const canonical = `{"jsonrpc":"2.0", "id":5,"method":"tools/call","params":{ "name":"t","arguments":{"a":[1,{"b":"c"}]},"_meta":{"z" : 1.0}}}`
	post(newProxy(t, up, &fakeSealer{}, nil), canonical, "Authorization", "Bearer tok")
	if up.last != canonical {
		t.Errorf("arguments already canonical: the upstream got %s, want the body as received", up.last)
	}
}
