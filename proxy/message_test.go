package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/mcpdigest"
)

func TestParseCall_RefusesWhatAnUpstreamMightReadOtherwise(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       *requestError
	}{
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"x"}}]`, errBatch},
		{"not JSON", `{"jsonrpc":`, errParse},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, errParse},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, errParse},
		{"method in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call","params":{}}`, errEnvelope},
		{"params in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","PARAMS":{"name":"a"},"params":{"name":"a"}}`, errEnvelope},
		{"requestState twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"x","requestState":"y"}}`, errParse},
		{"requestState in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","RequestState":"x"}}`, errStateParam},
		{"requestState with a long s", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requeſtState":"x"}}`, errStateParam},
		{"requestState not a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":{"round":2}}}`, errStateParam},
		{"requestState on tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"requestState":"x"}}`, errStateParam},
		{"name in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","NAME":"b","requestState":"x"}}`, errBindName},
		// pydantic's populate_by_name reads request_state as requestState.
		{"requestState in snake_case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","request_state":"x"}}`, errStateParam},
		{"requestState in snake_case beside the real one", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"s","request_state":"x"}}`, errStateParam},
		{"requestState in kebab-case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","request-state":"x"}}`, errStateParam},
		{"requestState in SCREAMING_SNAKE_CASE", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","REQUEST_STATE":"x"}}`, errStateParam},
		{"requestState with a long s and an underscore", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u","_requeſt_state_":"x"}}`, errStateParam},
		{"request_state on another method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"request_state":"x"}}`, errStateParam},
		{"name with an underscore", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_name":"b"}}`, errBindName},
		{"arguments in kebab-case", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","argu-ments":{"k":"v"}}}`, errBindName},
		{"uri in snake_case", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","u_r_i":"b"}}`, errBindName},
		{"method in snake_case", `{"jsonrpc":"2.0","id":1,"method":"tools/list","_method":"tools/call","params":{}}`, errEnvelope},
		{"params in kebab-case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","para-ms":{"name":"a","requestState":"x"},"params":{"name":"a"}}`, errEnvelope},
		{"id in snake_case", `{"jsonrpc":"2.0","id":1,"i_d":2,"method":"tools/list"}`, errEnvelope},
		{"jsonrpc in snake_case", `{"json_rpc":"2.0","jsonrpc":"2.0","id":1,"method":"tools/list"}`, errEnvelope},
		{"arguments with a repeated member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}`, errBindParams},
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"requestState":"x"}}`, errBindParams},
		{"uri not a string", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5}}`, errBindParams},
		// A flow binds the keys of inputResponses: Go's encoding/json would
		// read InputResponses, pydantic input_responses, in its place.
		{"inputResponses in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"s","inputResponses":{"k":{}},"InputResponses":{"k":{},"x":{}}}}`, errInputsName},
		{"inputResponses in snake_case", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","requestState":"s","input_responses":{"x":{}}}}`, errInputsName},
		{"inputResponses in another case without a state", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","INPUTRESPONSES":{}}}`, errInputsName},
		{"inputResponses twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"s","inputResponses":{},"inputResponses":{"x":{}}}}`, errParse},
		{"inputResponses with a key twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"s","inputResponses":{"k":{},"k":{}}}}`, errInputs},
		{"inputResponses not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"s","inputResponses":["k"]}}`, errInputs},
		// The params of the three methods are digested as text, whole: what
		// the digest's text rules refuse anywhere in them is refused.
		{"inputResponses with a key twice without a state", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","inputResponses":{"k":12345,"k":null}}}`, errBindParams},
		{"lone surrogate in _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"k":"\ud800"}}}`, errBindParams},
		{"number beyond a double in _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"k":1e400}}}`, errBindParams},
		{"params over 1 MiB", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":"` + strings.Repeat("x", mcpdigest.MaxParams) + `"}}`, errBindParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCall([]byte(tc.body))
			if err != tc.want {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseCall_R5_BindsAsTheGoClient(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       client.Binding
	}{
		{"tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{},"name":"get_weather","arguments":{"location":"Paris"},"requestState":"s"}}`,
			client.ToolCall("get_weather", json.RawMessage(`{"location":"Paris"}`))},
		{"tool without arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`, client.ToolCall("t", nil)},
		{"prompt", `{"jsonrpc":"2.0","id":"a","method":"prompts/get","params":{"name":"p","arguments":{"k":"v"}}}`,
			client.PromptGet("p", map[string]string{"k": "v"})},
		{"prompt without arguments", `{"jsonrpc":"2.0","id":"a","method":"prompts/get","params":{"name":"p"}}`, client.PromptGet("p", nil)},
		{"resource", `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///a"}}`, client.ResourceRead("file:///a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCall([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			want, err := tc.want.RequestDigest()
			if err != nil {
				t.Fatal(err)
			}
			if c.binding == nil || !bytes.Equal(c.binding.Digest, want[:]) {
				t.Errorf("got binding %v, want the digest %x", c.binding, want)
			}
		})
	}
}

// TestParseCall_PassesMembersItDoesNotBind: _meta is read by the upstream
// only, in any spelling; uri is salient on resources/read only.
func TestParseCall_PassesMembersItDoesNotBind(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"meta":{},"_Meta":{},"name":"a","requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"input_responses":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"meta":{},"name":"a","u_r_i":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c","_meta":{"progressToken":1}}}`,
	} {
		if _, err := parseCall([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestWithState_ChangesTheStateAlone: the state, and the arguments into the
// form the digest hashed; every other byte as received.
func TestWithState_ChangesTheStateAlone(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"a":1.0},"name":"t","arguments":{"z":1, "a":[1,2]},"requestState":"sealed","inputResponses":{"k":{"action":"accept"}}}}`
	c, err := parseCall([]byte(body))
	if err != nil || !c.hasState || c.state != "sealed" {
		t.Fatalf("got %+v, %v", c, err)
	}
	got := string(c.withState([]byte(`{"round":"</2>"}`)))
	want := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"a":1.0},"name":"t","arguments":{"a":[1,2],"z":1},"requestState":"{\"round\":\"\u003c/2\u003e\"}","inputResponses":{"k":{"action":"accept"}}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestParseCall_CaseCollidingArgumentsInTheDigestsForm (issue 35; issue
// 40, 6): arguments whose member names collide under case folding, at any
// depth, are no longer refused: on tools/call and prompts/get, state or
// none, the upstream gets them in the one form the digest hashed (RFC
// 8785), so both orders of such members are one text, read one way.
func TestParseCall_CaseCollidingArgumentsInTheDigestsForm(t *testing.T) {
	for _, tc := range []struct{ name, args, want string }{
		{"top level", `{"item":"pen","Item":"car"}`, `{"Item":"car","item":"pen"}`},
		{"in an object in an array", `{"o":[1,{"x":{"sku":1,"SKU":2}}]}`, `{"o":[1,{"x":{"SKU":2,"sku":1}}]}`},
		{"long s", `{"ſize":2,"size":1}`, `{"size":1,"ſize":2}`},
		{"Kelvin sign", `{"kind":1,"Kind":2}`, `{"Kind":2,"kind":1}`},
		{"escaped", `{"item":1,"\u0049tem":2}`, `{"Item":2,"item":1}`},
		{"separators differ", `{"item_id":1,"itemId":2,"item-id":3}`, `{"item-id":3,"itemId":2,"item_id":1}`},
		{"numbers", `{"q":1.0,"r":1e0,"s":10e-1,"t":-0}`, `{"q":1,"r":1,"s":1,"t":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, method := range []string{"tools/call", "prompts/get"} {
				for _, state := range []string{"", `,"requestState":"s"`} {
					c, err := parseCall([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"name":"a","arguments":` + tc.args + state + `}}`))
					if err != nil {
						t.Fatalf("%s%s: %v", method, state, err)
					}
					if got, _ := c.params.get("arguments"); string(got) != tc.want || !c.rewritten {
						t.Errorf("%s%s: got arguments %s (rewritten %v), want %s", method, state, got, c.rewritten, tc.want)
					}
				}
			}
		})
	}
}

// TestEncodingJSON_ReadsCaseVariantsByOrderNotSeparators measures the
// decoder the collision rule is for: encoding/json takes a member in
// another case for a field, the last one it meets winning, so a swap of
// members the digest binds alike changes what it reads; it never takes a
// name with other separators for a field.
func TestEncodingJSON_ReadsCaseVariantsByOrderNotSeparators(t *testing.T) {
	type args struct {
		Item   string `json:"item"`
		ItemID string `json:"item_id"`
	}
	read := func(s string) args {
		var a args
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a, b := read(`{"Item":"car","item":"pen"}`), read(`{"item":"pen","Item":"car"}`); a.Item != "pen" || b.Item != "car" {
		t.Errorf("case variants: read %q and %q, want pen and car (the last member)", a.Item, b.Item)
	}
	if a, b := read(`{"itemId":"b","item_id":"a","item-id":"c"}`), read(`{"item-id":"c","item_id":"a","itemId":"b"}`); a.ItemID != "a" || b.ItemID != "a" {
		t.Errorf("separator variants: read %q and %q, want a both times (the exact name)", a.ItemID, b.ItemID)
	}
}

// FuzzParseCall: no body panics the parser; a state is only ever accepted
// on the three methods, with a binding, and a body the proxy rewrites
// parses again to the same state.
func FuzzParseCall(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[1,{"y":null}]},"requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":"x","method":"prompts/get","params":{"name":"p","arguments":{"k":"v"},"requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u","requestState":""}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","ReQuestState":"s"}}`,
		`[{}]`, `{}`, `{"params":[]}`, `{"params":"x","method":"tools/call","id":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","request_state":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"s","REQUEST-STATE":"t"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","_name":"b","arguments":{},"argu_ments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","URI_":"b","requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"_method":"tools/call","method":"tools/list","para-ms":{"requestState":"s"}}`,
		`{"json_rpc":"2.0","i-d":1,"method":"tools/call","params":{"name":"a","input_responses":{},"requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"Item":"car","item":"pen"},"requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"o":[{"sku":1},{"x":{"ſku":1,"sku":2}}]},"requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","arguments":{"item_id":"1","itemId":"2"},"requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"a","arguments":{"K":1,"k":2},"requestState":"s"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseCall(body)
		if err != nil || !c.hasState {
			return
		}
		if !carriesState(c.method) || c.binding == nil {
			t.Fatalf("a state accepted on %q with binding %v", c.method, c.binding)
		}
		for _, n := range c.env.names {
			if slices.ContainsFunc(envelopeNames, func(want string) bool { return looseVariant(n, want) }) {
				t.Fatalf("accepted beside a state: the envelope member %q", n)
			}
		}
		if args, ok := c.params.get("arguments"); ok && carriesState(c.method) {
			if _, want, _ := mcpdigest.RequestArguments(c.method, c.params.encode()); want != nil && !bytes.Equal(args, want) {
				t.Fatalf("forwarded beside a state: arguments %s, not the form the digest hashed, %s", args, want)
			}
		}
		for _, n := range c.params.names {
			m, _ := mcpdigest.Salient(c.method)
			if slices.ContainsFunc(append(m.Names(), "requestState"), func(want string) bool { return looseVariant(n, want) }) {
				t.Fatalf("accepted beside a state: the params member %q", n)
			}
		}
		again, err := parseCall(c.withState([]byte("original")))
		if err != nil || again.state != "original" || !bytes.Equal(again.binding.Digest, c.binding.Digest) || again.rewritten {
			t.Fatalf("the rewritten body parses to %+v, %v", again, err)
		}
	})
}

// A call carrying a state is bound with the keys of its inputResponses as
// received, case kept; absent or empty, with none; null, not known (as the
// sealer takes it); without a state, with no keys at all.
func TestParseCall_R9_RespondedKeys(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		want         []string
	}{
		{"keys as received", `"requestState":"s","inputResponses":{"seat":{},"Seat":{},"meal":null}`, []string{"seat", "Seat", "meal"}},
		{"escaped names decoded", `"requestState":"s","inputResponses":{"se\u0061t":{}}`, []string{"seat"}},
		{"empty", `"requestState":"s","inputResponses":{}`, []string{}},
		{"null", `"requestState":"s","inputResponses":null`, nil},
		{"absent", `"requestState":"s"`, []string{}},
		{"no state", `"inputResponses":{"seat":{}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCall([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + tc.params + `}}`))
			if err != nil {
				t.Fatal(err)
			}
			got := c.binding.Responded
			if (got == nil) != (tc.want == nil) || !slices.Equal(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// parseObjectDecoder is parseObject as it was, on encoding/json's
// tokenizer: the oracle FuzzParseObject holds the walk to.
func parseObjectDecoder(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errNotObject
	}
	o := &object{}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, errNotObject
		}
		name, ok := t.(string)
		if !ok {
			return nil, errNotObject
		}
		if seen[name] {
			return nil, errDuplicate
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errNotObject
		}
		o.names, o.values = append(o.names, name), append(o.values, v)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return o, nil
}

// The walk on json.Valid splits every input as the tokenizer did: the same
// names, the same values byte for byte; a refusal where it refused (a
// duplicate in an invalid text may be refused as invalid instead, which
// every caller treats alike).
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"a" : [1,{"b":"}"}] , "c":"\"x\\"}`,
		`{"\u0061":1,"a":2}`, "{\"\xff\":1}", `{"a":1}x`, `[1]`, `"s"`, `{"a":}`, `{"a":1,}`,
		`{"n":-1.5e3,"t":true,"f":false,"z":null,"s":"\ud800"}`, "{\"a\":1}\n", `{"a":{"a":{"a":[]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := parseObject(data)
		want, werr := parseObjectDecoder(data)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%q: got %v, want %v", data, gerr, werr)
		}
		if gerr != nil {
			if gerr != werr && !(gerr == errNotObject && werr == errDuplicate) {
				t.Fatalf("%q: got %v, want %v", data, gerr, werr)
			}
			return
		}
		if !slices.Equal(got.names, want.names) || len(got.values) != len(want.values) {
			t.Fatalf("%q: names %q, want %q", data, got.names, want.names)
		}
		for i := range got.values {
			if !bytes.Equal(got.values[i], want.values[i]) {
				t.Fatalf("%q: value %d %q, want %q", data, i, got.values[i], want.values[i])
			}
		}
	})
}

// BenchmarkParseObject parses a tools/call retry as the proxy receives it,
// by the walk and by the tokenizer it replaced.
func BenchmarkParseObject(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":"Paris","units":"metric"},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"` + strings.Repeat("A", 600) + `",` +
		`"_meta":{"progressToken":"p-1"}}}`)
	for _, bc := range []struct {
		name  string
		parse func([]byte) (*object, error)
	}{{"walk", parseObject}, {"tokenizer", parseObjectDecoder}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.parse(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseCall judges a tools/call retry as the proxy receives it:
// small arguments, and arguments of 600 members in nested objects, which
// the case-collision rule walks at every depth.
func BenchmarkParseCall(b *testing.B) {
	var big strings.Builder
	big.WriteString(`{`)
	for i := range 100 {
		if i > 0 {
			big.WriteString(`,`)
		}
		fmt.Fprintf(&big, `"item_%d":{"sku":"A-%d","Quantity":%d,"note":"x","tags":["a","b"]}`, i, i, i)
	}
	big.WriteString(`}`)
	for _, bc := range []struct{ name, args string }{
		{"small", `{"city":"Paris","units":"metric"}`},
		{"600 members", big.String()},
	} {
		msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_weather","arguments":` + bc.args + `,` +
			`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"` + strings.Repeat("A", 600) + `",` +
			`"_meta":{"progressToken":"p-1"}}}`)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, err := parseCall(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
