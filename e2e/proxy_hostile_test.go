package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The proxy against a hostile client and a sloppy upstream (issue 35): the
// upstreams below are written for the tests, each a plain JSON-RPC handler
// on loopback that does what a careless MCP server might.

// upstream is an MCP server written for a test: handle answers each POST,
// and every request is counted and kept (headers, trailers, params).
type upstream struct {
	url   string
	n     atomic.Int64
	mu    sync.Mutex
	seen  []seenRequest
	reply func(w http.ResponseWriter, req upstreamCall)
}

type seenRequest struct {
	header, trailer http.Header
	params          map[string]json.RawMessage
}

// upstreamCall is a JSON-RPC request as an upstream decodes it: with
// encoding/json, as go-sdk's servers do.
type upstreamCall struct {
	ID     json.RawMessage
	Method string
	Params struct {
		Name           string
		Arguments      json.RawMessage
		RequestState   string
		InputResponses map[string]json.RawMessage
	}
}

func startUpstream(t *testing.T, reply func(w http.ResponseWriter, req upstreamCall)) *upstream {
	t.Helper()
	u := &upstream{reply: reply}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.n.Add(1)
		body, _ := io.ReadAll(r.Body)
		var raw struct{ Params map[string]json.RawMessage }
		json.Unmarshal(body, &raw)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{r.Header.Clone(), r.Trailer.Clone(), raw.Params})
		u.mu.Unlock()
		var call upstreamCall
		if err := json.Unmarshal(body, &call); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		u.reply(w, call)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"
	return u
}

func (u *upstream) calls() int { return int(u.n.Load()) }

func (u *upstream) last(t *testing.T) seenRequest {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	return u.seen[len(u.seen)-1]
}

// jsonResult answers id with result as a JSON body.
func jsonResult(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// toolResult is a complete tools/call result of one text.
func toolResult(text string) string {
	b, _ := json.Marshal(text)
	return `{"resultType":"complete","content":[{"type":"text","text":` + string(b) + `}]}`
}

// askResult is an input_required result asking key, with state (none when
// empty).
func askResult(key, state string) string {
	s := ""
	if state != "" {
		b, _ := json.Marshal(state)
		s = `,"requestState":` + string(b)
	}
	return `{"resultType":"input_required","inputRequests":{"` + key + `":{"method":"elicitation/create","params":{"message":"?",` +
		`"requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}` + s + `}`
}

// mcpPost posts a JSON-RPC request of method to url as an MCP client does
// (the headers of the 2026-07-28 wire, name in Mcp-Name), with the bearer
// token of alice; set changes headers. It returns the status and the body.
func mcpPost(t *testing.T, url, method, name, params string, set func(h http.Header)) (int, string) {
	t.Helper()
	return mcpPostBody(t, url, method, name, `{"jsonrpc":"2.0","id":5,"method":"`+method+`","params":`+params+`}`, set)
}

// mcpPostBody posts body as mcpPost does, its envelope as given.
func mcpPostBody(t *testing.T, url, method, name, body string, set func(h http.Header)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	req.Header.Set("Authorization", "Bearer alice-token")
	if set != nil {
		set(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer (%d bytes so far): %v", len(out), err)
	}
	return resp.StatusCode, string(out)
}

// answer is the JSON-RPC message of a body (JSON, or the SSE event with an
// id).
type answer struct {
	Result struct {
		RequestState  string
		InputRequests map[string]json.RawMessage
		Content       []struct{ Text string }
	}
	Error *struct{ Code int }
}

func parseAnswer(t *testing.T, body string) answer {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		var a struct {
			ID json.RawMessage
			answer
		}
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &a) == nil && a.ID != nil {
			return a.answer
		}
	}
	t.Fatalf("no JSON-RPC answer in %q", body)
	return answer{}
}

func (a answer) String() string {
	if a.Error != nil {
		return fmt.Sprintf("error %d", a.Error.Code)
	}
	if a.Result.RequestState != "" {
		return "input_required"
	}
	var texts []string
	for _, c := range a.Result.Content {
		texts = append(texts, c.Text)
	}
	return "complete " + strings.Join(texts, " ")
}

// meta is the _meta of every request of the 2026-07-28 wire.
const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// toolParams are the params of a tools/call of name with arguments, state
// (none when empty) and answers to keys (none when empty).
func toolParams(name, arguments, state string, keys ...string) string {
	p := `{` + meta + `,"name":"` + name + `","arguments":` + arguments
	if state != "" {
		b, _ := json.Marshal(state)
		p += `,"requestState":` + string(b)
	}
	if len(keys) > 0 {
		var rs []string
		for _, k := range keys {
			rs = append(rs, `"`+k+`":{"action":"accept","content":{"ok":true}}`)
		}
		p += `,"inputResponses":{` + strings.Join(rs, ",") + `}`
	}
	return p + `}`
}

// shop is an upstream whose tool buy decodes its arguments with
// encoding/json into a struct, as go-sdk's typed tools do: round 1 quotes,
// round 2 sells what the retry's arguments name.
func shop(w http.ResponseWriter, req upstreamCall) {
	var args struct{ Item string }
	json.Unmarshal(req.Params.Arguments, &args)
	if req.Params.RequestState == "" {
		jsonResult(w, req.ID, askResult("confirm", `{"quoted":"`+args.Item+`"}`))
		return
	}
	jsonResult(w, req.ID, toolResult("SOLD "+args.Item+" for 1.00"))
}

// looseRead reads flat arguments as a lenient decoder does: member names
// folded (case, '_' and '-' dropped, ß as ss: encoding/json/v2's
// case-insensitive matching, a tool that merges names by full case
// folding), the last member winning, each value as its text (a typed
// decoder reads 1.0 and 1 apart).
func looseRead(args json.RawMessage) string {
	fold := strings.NewReplacer("_", "", "-", "", "ß", "ss")
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.Token() // {
	read := map[string]string{}
	for dec.More() {
		name, _ := dec.Token()
		var v json.RawMessage
		dec.Decode(&v)
		read[fold.Replace(strings.ToLower(name.(string)))] = string(v)
	}
	keys := make([]string, 0, len(read))
	for k := range read {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+read[k])
	}
	return strings.Join(out, " ")
}

// looseShop quotes, in round 1, the arguments as looseRead reads them (in
// its plain state) and sells, in round 2, what it reads in the retry's.
func looseShop(w http.ResponseWriter, req upstreamCall) {
	reading := looseRead(req.Params.Arguments)
	if req.Params.RequestState == "" {
		st, _ := json.Marshal(map[string]string{"quoted": reading})
		jsonResult(w, req.ID, askResult("confirm", string(st)))
		return
	}
	var st struct{ Quoted string }
	json.Unmarshal([]byte(req.Params.RequestState), &st)
	jsonResult(w, req.ID, toolResult("quoted "+st.Quoted+"; sold "+reading))
}

// TestProxy_Hostile_ArgumentsReadOneWay (issue 40, 6; R5): two spellings of
// the arguments that the digest binds alike (members swapped, a number
// spelled 1.0 or 1e0 then 1) are read two ways by lenient decoders: case
// folding with the last member winning (encoding/json), names without '_'
// and '-' (encoding/json/v2's case-insensitive matching), full case folding
// (ß and ss), numbers by their text. The proxy forwards the arguments of
// both rounds in the one form the digest hashed, their RFC 8785 form, so
// the upstream sells what it quoted, whatever its decoder.
func TestProxy_Hostile_ArgumentsReadOneWay(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up := startUpstream(t, looseShop)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	rounds := func(target, first, second string) (string, string) {
		_, body := mcpPost(t, target, "tools/call", "buy", toolParams("buy", first, ""), nil)
		a := parseAnswer(t, body)
		if a.Error != nil || a.Result.RequestState == "" {
			return "round 1: " + a.String(), ""
		}
		_, body = mcpPost(t, target, "tools/call", "buy", toolParams("buy", second, a.Result.RequestState, "confirm"), nil)
		got := parseAnswer(t, body).String()
		quoted, sold, _ := strings.Cut(strings.TrimPrefix(got, "complete quoted "), "; sold ")
		return quoted, sold
	}
	for _, tc := range []struct{ what, first, second string }{
		{"case, last member wins", `{"Item":"car","item":"pen"}`, `{"item":"pen","Item":"car"}`},
		{"separators dropped", `{"item_id":"a","itemId":"b"}`, `{"itemId":"b","item_id":"a"}`},
		{"full case folding", `{"straße":"a","strasse":"b"}`, `{"strasse":"b","straße":"a"}`},
		{"1.0 then 1", `{"qty":1.0}`, `{"qty":1}`},
		{"1e0 then 1", `{"qty":1e0}`, `{"qty":1}`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if quoted, sold := rounds(up.url, tc.first, tc.second); quoted == sold {
				t.Fatalf("the upstream alone quoted %q and sold %q; want them to differ (the decoder reads two ways)", quoted, sold)
			}
			quoted, sold := rounds(url, tc.first, tc.second)
			if quoted != sold || sold == "" {
				t.Errorf("through the proxy: quoted %q, sold %q; want the same", quoted, sold)
			}
			up.mu.Lock()
			first, second := up.seen[len(up.seen)-2].params["arguments"], up.seen[len(up.seen)-1].params["arguments"]
			up.mu.Unlock()
			if string(first) != string(second) {
				t.Errorf("the upstream got the arguments %s, then %s; want one form", first, second)
			}
		})
	}
}

// startProxyEnv runs sealer-proxy as startProxy does, with extra
// environment variables, and returns its endpoint and process id.
func startProxyEnv(t *testing.T, s *proc, upstream string, env []string, flags ...string) (string, int) {
	t.Helper()
	args := append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--upstream", upstream,
		"--sealer", s.GRPC, "--log-level", "info"}, flags...)
	cmd := exec.Command(proxyBinary, args...)
	cmd.Env = append(os.Environ(), env...)
	m := startUntil(t, cmd, regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`))
	return m[1], cmd.Process.Pid
}

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestProxy_Hostile_SlowBodiesBounded (issue 35, 2): 100 connections each
// send 2 MiB of a 4 MB body and stall, 5 more send 5 bytes. The proxy's
// memory stays within its buffered-bytes bound (its peak resident memory
// is measured), every connection is answered (408 for a body too slow, 503
// past the bounds), and the upstream is never called. The bounds are set
// by environment, so the proxy before them starts all the same.
func TestProxy_Hostile_SlowBodiesBounded(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up := startUpstream(t, shop)
	const budget = 16 << 20
	addr, pid := startProxyEnv(t, s, up.url, []string{"SEALER_PROXY_BODY_TIMEOUT=2s",
		"SEALER_PROXY_MAX_BUFFERED_BYTES=" + strconv.Itoa(budget), "SEALER_PROXY_MAX_CONCURRENT_REQUESTS=64"}, "--principal", "bearer")
	rssBefore := procStatus(t, pid, "VmRSS")

	type conn struct {
		c    net.Conn
		sent int
	}
	var conns []conn
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	for i := range 105 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n")
		conns = append(conns, conn{c: c})
		if i >= 100 {
			c.Write([]byte(`{"jso`))
			continue
		}
	}
	var wg sync.WaitGroup
	for i := range conns[:100] {
		wg.Go(func() {
			c := &conns[i]
			c.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			for c.sent < 2<<20 {
				n, err := c.c.Write(chunk)
				c.sent += n
				if err != nil {
					return // the proxy answered and closed
				}
			}
		})
	}
	wg.Wait()
	rssLoaded := procStatus(t, pid, "VmRSS")

	statuses := map[string]int{}
	var mu sync.Mutex
	for i := range conns {
		wg.Go(func() {
			c := conns[i].c
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			what := "no answer"
			if err == nil {
				what = strconv.Itoa(resp.StatusCode)
				resp.Body.Close()
			}
			mu.Lock()
			statuses[what]++
			mu.Unlock()
		})
	}
	wg.Wait()
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("proxy memory: VmRSS %d MiB at start, %d MiB with 100 bodies of 2 MiB stalled; VmHWM %d MiB (buffered-bytes bound %d MiB); answers %v",
		rssBefore>>20, rssLoaded>>20, peak>>20, budget>>20, statuses)
	if limit := rssBefore + 4*budget + 32<<20; peak > limit {
		t.Errorf("the proxy's peak resident memory is %d MiB, want at most %d MiB (its memory at start, 4 times its buffered-bytes bound and 32 MiB)", peak>>20, limit>>20)
	}
	if statuses["no answer"] > 0 || statuses["408"]+statuses["503"] != len(conns) {
		t.Errorf("answers to the stalled bodies: %v; want every one 408 or 503", statuses)
	}
	if up.calls() != 0 {
		t.Errorf("the upstream received %d calls, want none", up.calls())
	}
}

// TestProxy_Hostile_TrailersAndHeaderSpellingsNeverReachUpstream (issue 35,
// 3): a chunked POST's trailers, and the principal header in spellings that
// a CGI-style server maps onto its name, never reach the upstream.
func TestProxy_Hostile_TrailersAndHeaderSpellingsNeverReachUpstream(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up := startUpstream(t, func(w http.ResponseWriter, req upstreamCall) { jsonResult(w, req.ID, `{"tools":[]}`) })
	for _, mode := range []string{"bearer", "header"} {
		t.Run(mode, func(t *testing.T) {
			url := startProxy(t, s, up.url, "--principal", mode)
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
			req, _ := http.NewRequest(http.MethodPost, url, io.MultiReader(strings.NewReader(body))) // unknown length: chunked
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer alice-token")
			req.Header.Set("X-Sealer-Principal", "alice")
			for _, name := range []string{"X_Sealer_Principal", "X-Sealer_Principal", "x_sealer-principal"} {
				req.Header[name] = []string{"admin"}
			}
			req.Trailer = http.Header{"X-Sealer-Principal": {"admin"}, "Authorization": {"Bearer admin"},
				"X-Http-Method-Override": {"DELETE"}, "Mcp-Name": {"other"}}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			seen := up.last(t)
			if len(seen.trailer) > 0 {
				t.Errorf("the upstream received trailers %v, want none", seen.trailer)
			}
			var spellings []string
			for name, v := range seen.header {
				if strings.EqualFold(strings.NewReplacer("_", "", "-", "").Replace(name), "xsealerprincipal") {
					spellings = append(spellings, name+"="+strings.Join(v, ","))
				}
			}
			want := ""
			if mode == "header" {
				want = "X-Sealer-Principal=alice" // the trusted one, as set
			}
			if got := strings.Join(spellings, " "); got != want {
				t.Errorf("the upstream received the principal header as %q, want %q", got, want)
			}
		})
	}
}

// sloppyReply answers every call as mode says, with the plain state
// "PLAIN-SECRET".
func sloppyReply(mode string) func(w http.ResponseWriter, req upstreamCall) {
	const plain = `"PLAIN-SECRET"`
	return func(w http.ResponseWriter, req upstreamCall) {
		msg := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + askResult("confirm", "PLAIN-SECRET") + `}`
		sse := func(data string) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, data)
		}
		switch mode {
		case "sse text after the JSON":
			sse("data: " + msg + " trailing\n\n")
		case "sse two messages in one event":
			sse("data: " + msg + "\ndata: " + msg + "\n\n")
		case "sse duplicated requestState":
			sse("data: " + strings.Replace(msg, `"requestState":`+plain, `"requestState":`+plain+`,"requestState":`+plain, 1) + "\n\n")
		case "json duplicated requestState":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, strings.Replace(msg, `"requestState":`+plain, `"requestState":"x","requestState":`+plain, 1))
		case "sse RequestState":
			sse("data: " + strings.Replace(msg, `"requestState"`, `"RequestState"`, 1) + "\n\n")
		case "json RequestState":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, strings.Replace(msg, `"requestState"`, `"RequestState"`, 1))
		case "sse gzip after Content-Encoding identity":
			// A reader of the first line alone takes the body as it is;
			// a client that reads every line (or the last) gunzips it.
			w.Header().Add("Content-Encoding", "identity")
			w.Header().Add("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/event-stream")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, "data: "+msg+"\n\n")
			zw.Close()
		case "sse with its Content-Length":
			data := "data: " + msg + "\n\n"
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			sse(data)
		}
	}
}

// gunzip is body gunzipped, or "" when it is not gzip.
func gunzip(body string) string {
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		return ""
	}
	plain, _ := io.ReadAll(zr)
	return string(plain)
}

// TestProxy_Hostile_SloppyUpstreamNeverPassesAPlainState (issue 35, 3 and
// 4; issue 40, 5): what a sloppy upstream answers a tools/call, and the
// proxy cannot read exactly (text after the JSON, two messages in one
// event, a requestState twice or in another case, a second Content-Encoding
// line) becomes a JSON-RPC error, never passed with the plain state; an SSE
// answer that carries the upstream's Content-Length arrives whole, its
// state sealed.
func TestProxy_Hostile_SloppyUpstreamNeverPassesAPlainState(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	for _, mode := range []string{"sse text after the JSON", "sse two messages in one event", "sse duplicated requestState",
		"json duplicated requestState", "sse RequestState", "json RequestState", "sse gzip after Content-Encoding identity",
		"sse with its Content-Length"} {
		t.Run(mode, func(t *testing.T) {
			up := startUpstream(t, sloppyReply(mode))
			url := startProxy(t, s, up.url, "--principal", "bearer")
			status, body := mcpPost(t, url, "tools/call", "buy", toolParams("buy", `{}`, ""), nil)
			if strings.Contains(body, "PLAIN-SECRET") || strings.Contains(gunzip(body), "PLAIN-SECRET") {
				t.Fatalf("HTTP %d %q: the plain state passed", status, body)
			}
			a := parseAnswer(t, body)
			want := "error -32603"
			if mode == "sse with its Content-Length" {
				want = "input_required"
			}
			if a.String() != want {
				t.Errorf("HTTP %d %q: got %s, want %s", status, body, a, want)
			}
		})
	}
}

// TestProxy_Hostile_StateOfOneUpstreamDoesNotOpenAtAnother (issue 35, 5;
// R5): two proxies of one tenant in front of two servers with a tool of the
// same name: a state sealed through one never reaches the other.
func TestProxy_Hostile_StateOfOneUpstreamDoesNotOpenAtAnother(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	upA, upB := startNaive(t), startNaive(t)
	urlA, urlB := startProxy(t, s, upA.url, "--principal", "bearer"), startProxy(t, s, upB.url, "--principal", "bearer")
	args, ok := map[string]any{"amount": 42}, map[string]any{"ok": true}
	atA, atB := mcpSession(t, urlA, "alice-token", false, nil), mcpSession(t, urlB, "alice-token", false, nil)
	state := firstRound(t, atA, "approve_payment", args)
	refusedBeforeUpstream(t, upB, "A's state at B", func() (*mcp.CallToolResult, error) {
		return retry(atB, "approve_payment", args, state, "approve", ok)
	})
	if r, err := retry(atA, "approve_payment", args, state, "approve", ok); err != nil || resultText(t, r) != "Paid 42.00" {
		t.Fatalf("A's state at A: got %+v, %v; want paid", r, err)
	}
}

// TestProxy_Hostile_MalformedRetryDoesNotSpendItsRound (issue 35, 6): a
// latest-only retry whose Mcp-Name or MCP-Protocol-Version header disagrees
// with its body, which the upstream would refuse, is refused before the
// Open: the well-formed retry after it still opens.
func TestProxy_Hostile_MalformedRetryDoesNotSpendItsRound(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up := startNaive(t)
	url := startProxy(t, s, up.url, "--principal", "bearer")
	for _, tc := range []struct {
		what string
		set  func(h http.Header)
	}{
		{"Mcp-Name of another tool", func(h http.Header) { h.Set("Mcp-Name", "get_weather") }},
		{"Mcp-Method of another method", func(h http.Header) { h.Set("Mcp-Method", "prompts/get") }},
		{"MCP-Protocol-Version other than _meta's", func(h http.Header) { h.Set("MCP-Protocol-Version", "2025-06-18") }},
		{"no MCP-Protocol-Version", func(h http.Header) { h.Del("MCP-Protocol-Version") }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			state := firstRound(t, mcpSession(t, url, "alice-token", false, nil), "approve_payment", map[string]any{"amount": 42})
			params := toolParams("approve_payment", `{"amount":42}`, state, "approve")
			before := up.calls(t)
			_, body := mcpPost(t, url, "tools/call", "approve_payment", params, tc.set)
			if a := parseAnswer(t, body); a.Error == nil || up.calls(t) != before {
				t.Errorf("the malformed retry: got %s, %d upstream calls; want an error, none", a, up.calls(t)-before)
			}
			_, body = mcpPost(t, url, "tools/call", "approve_payment", params, nil)
			if a := parseAnswer(t, body); a.String() != "complete Paid 42.00" {
				t.Errorf("the well-formed retry after it: got %s, want complete Paid 42.00", a)
			}
		})
	}
}

// TestProxy_Hostile_RoundsWithoutStateAreBound (issue 35, 7; R5, R9): an
// upstream that asks with inputRequests and no requestState gets a state
// of the proxy's own on its round, bound to the asked keys and removed
// before the retry reaches it: an unasked answer, or the state of another
// principal, never reaches the upstream. Answers without any state pass
// unbound.
func TestProxy_Hostile_RoundsWithoutStateAreBound(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	up := startUpstream(t, func(w http.ResponseWriter, req upstreamCall) {
		if _, ok := req.Params.InputResponses["user_name"]; !ok {
			jsonResult(w, req.ID, askResult("user_name", ""))
			return
		}
		jsonResult(w, req.ID, toolResult(fmt.Sprintf("hello, answers %d", len(req.Params.InputResponses))))
	})
	url := startProxy(t, s, up.url, "--principal", "bearer")
	_, body := mcpPost(t, url, "tools/call", "greet", toolParams("greet", `{}`, ""), nil)
	state := parseAnswer(t, body).Result.RequestState
	if state == "" {
		t.Fatalf("round 1 through the proxy: %q carries no requestState, want one of the proxy's own", body)
	}
	for _, tc := range []struct {
		what, params string
		set          func(h http.Header)
	}{
		{"an unasked answer", toolParams("greet", `{}`, state, "user_name", "admin"), nil},
		{"another principal", toolParams("greet", `{}`, state, "user_name"), func(h http.Header) { h.Set("Authorization", "Bearer mallory") }},
		{"other arguments", toolParams("greet", `{"x":1}`, state, "user_name"), nil},
	} {
		before := up.calls()
		_, body := mcpPost(t, url, "tools/call", "greet", tc.params, tc.set)
		if a := parseAnswer(t, body); a.Error == nil || a.Error.Code != -32602 || up.calls() != before {
			t.Errorf("%s: got %s, %d upstream calls; want error -32602, none", tc.what, a, up.calls()-before)
		}
	}
	_, body = mcpPost(t, url, "tools/call", "greet", toolParams("greet", `{}`, state, "user_name"), nil)
	if a := parseAnswer(t, body); a.String() != "complete hello, answers 1" {
		t.Errorf("the retry as asked: got %s, want complete hello, answers 1", a)
	}
	if _, ok := up.last(t).params["requestState"]; ok {
		t.Errorf("the upstream received the proxy's own state: %s", up.last(t).params["requestState"])
	}
	// What stays unbound (docs/PROXY.md): answers without any state reach
	// the upstream as received. The conformance suite's ignore-extra-params
	// wants such a call completed, which removing them would not give.
	before := up.calls()
	_, body = mcpPost(t, url, "tools/call", "greet", toolParams("greet", `{}`, "", "user_name", "extra"), nil)
	if a := parseAnswer(t, body); a.String() != "complete hello, answers 2" || up.calls() != before+1 {
		t.Errorf("answers without a state: got %s, %d upstream calls; want complete hello, answers 2, one", a, up.calls()-before)
	}
}
