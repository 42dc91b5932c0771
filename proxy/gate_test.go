package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestJudgeAnswer (issue 50): each MRTR server rule the proxy holds, an
// answer breaking it, and answers that keep it.
func TestJudgeAnswer(t *testing.T) {
	all := capabilities{"elicitation": true, "sampling": true, "roots": true}
	const elicit = `{"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object","properties":{}}}}`
	const sample = `{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`
	const roots = `{"method":"roots/list"}`
	for _, tc := range []struct {
		name, method string
		caps         capabilities
		result       string
		want         *specFault
	}{
		{"a complete result", "tools/call", all, `{"resultType":"complete","content":[]}`, nil},
		{"a tools/list result", "tools/list", nil, `{"tools":[],"resultType":"complete"}`, nil},
		{"asks each kind, all declared", "tools/call", all, `{"resultType":"input_required","inputRequests":{"a":` + elicit + `,"b":` + sample + `,"c":` + roots + `},"requestState":"s"}`, nil},
		{"a state alone", "prompts/get", all, `{"resultType":"input_required","requestState":"s"}`, nil},
		{"asks without a state", "resources/read", capabilities{"roots": true}, `{"resultType":"input_required","inputRequests":{"r":` + roots + `}}`, nil},
		{"input_required to tools/list", "tools/list", all, `{"resultType":"input_required","inputRequests":{"a":` + elicit + `}}`, faultMethod},
		{"a state in a result of initialize", "initialize", all, `{"requestState":"s"}`, faultMethod},
		{"asks nothing, no state", "tools/call", all, `{"resultType":"input_required"}`, faultNothingAsked},
		{"an empty inputRequests, no state", "tools/call", all, `{"resultType":"input_required","inputRequests":{},"requestState":""}`, faultNothingAsked},
		{"asks by ping", "tools/call", all, `{"resultType":"input_required","inputRequests":{"a":{"method":"ping"}}}`, faultInputMethod},
		{"asks by a method in another case", "tools/call", all, `{"resultType":"input_required","inputRequests":{"a":{"method":"Elicitation/create"}}}`, faultInputMethod},
		{"a method member in another case beside", "tools/call", all, `{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list","Method":"ping"}}}`, faultInputMethod},
		{"a request that is no object", "tools/call", all, `{"resultType":"input_required","inputRequests":{"a":"roots/list"}}`, faultInputMethod},
		{"inputRequests no object", "tools/call", all, `{"resultType":"input_required","inputRequests":["a"]}`, faultInputMethod},
		{"elicitation not declared", "tools/call", capabilities{"sampling": true}, `{"resultType":"input_required","inputRequests":{"s":` + sample + `,"a":` + elicit + `}}`, faultCapability},
		{"roots not declared", "tools/call", capabilities{"sampling": true}, `{"resultType":"input_required","inputRequests":{"r":` + roots + `},"requestState":"s"}`, faultCapability},
		{"no capabilities declared", "tools/call", capabilities{}, `{"resultType":"input_required","inputRequests":{"s":` + sample + `}}`, faultCapability},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result, err := parseObject([]byte(tc.result))
			if err != nil {
				t.Fatal(err)
			}
			if got := judgeAnswer(tc.method, tc.caps, result); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCallCapabilities: what a request's _meta declares, null and absent
// members declaring nothing.
func TestCallCapabilities(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   []string
	}{
		{`{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"form":{}},"roots":null}}}`, []string{"sampling", "elicitation"}},
		{`{"name":"x","_meta":{}}`, nil},
		{`{"name":"x"}`, nil},
		{`{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":"all"}}`, nil},
	} {
		c, err := parseCall([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + tc.params + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got := c.capabilities()
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.params, got, tc.want)
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("%s: got %v, want %v", tc.params, got, tc.want)
			}
		}
	}
}

// TestProxy_SpecGateReplacesTheAnswer: an answer that breaks a rule is
// replaced by the error of its fault, with the request's id, and its state
// is never sealed; reported, it passes sealed.
func TestProxy_SpecGateReplacesTheAnswer(t *testing.T) {
	const asks = `{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{}}},"requestState":"plain"}}`
	const call = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}},"name":"t","arguments":{}}}`
	for _, gate := range []string{SpecGateEnforce, SpecGateReport} {
		up := newUpstream(t, "application/json", asks)
		fs := &fakeSealer{}
		h := newProxy(t, up, fs, func(c *Config) { c.SpecGate = gate })
		_, got := post(h, call, "Authorization", "Bearer tok")
		e, _ := got["error"].(map[string]any)
		switch {
		case gate == SpecGateEnforce && (e == nil || e["code"] != float64(codeMissingCapability) || got["id"] != float64(5) || fs.seals != 0):
			t.Errorf("enforced: got %v after %d seals; want error %d for id 5, no seal", got, fs.seals, codeMissingCapability)
		case gate == SpecGateReport && (e != nil || fs.seals != 1):
			t.Errorf("reported: got %v after %d seals; want the answer, sealed", got, fs.seals)
		}
	}
}

// TestProxy_SpecGateLeavesNotificationsAndResponses: a notification and a
// client's response to the server get the upstream's answer as it is, an
// empty 202 of unknown length included: there is no answer to judge.
func TestProxy_SpecGateLeavesNotificationsAndResponses(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		w.(http.Flusher).Flush() // no Content-Length: a length the proxy cannot know
	}))
	t.Cleanup(up.Close)
	cfg := Defaults()
	cfg.Upstream, cfg.Principal = up.URL+"/mcp", PrincipalAnonymous
	p, err := New(cfg, &fakeSealer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}`,
	} {
		resp, _ := post(p, body)
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("%s: HTTP %d, want the upstream's 202", body, resp.StatusCode)
		}
	}
}
