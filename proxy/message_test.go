package proxy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mcp-sealer/sealer/client"
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
		{"name in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","NAME":"b","requestState":"x"}}`, errBindParams},
		{"arguments with a repeated member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}`, errBindParams},
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"requestState":"x"}}`, errBindParams},
		{"uri not a string", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5}}`, errBindParams},
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

func TestWithState_ChangesTheStateAlone(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"a":1},"name":"t","arguments":{"z":1, "a":[1,2]},"requestState":"sealed","inputResponses":{"k":{"action":"accept"}}}}`
	c, err := parseCall([]byte(body))
	if err != nil || !c.hasState || c.state != "sealed" {
		t.Fatalf("got %+v, %v", c, err)
	}
	got := string(c.withState([]byte(`{"round":"</2>"}`)))
	want := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"a":1},"name":"t","arguments":{"z":1, "a":[1,2]},"requestState":"{\"round\":\"\u003c/2\u003e\"}","inputResponses":{"k":{"action":"accept"}}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
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
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseCall(body)
		if err != nil || !c.hasState {
			return
		}
		if !stateMethods[c.method] || c.binding == nil {
			t.Fatalf("a state accepted on %q with binding %v", c.method, c.binding)
		}
		again, err := parseCall(c.withState([]byte("original")))
		if err != nil || again.state != "original" || !bytes.Equal(again.binding.Digest, c.binding.Digest) {
			t.Fatalf("the rewritten body parses to %+v, %v", again, err)
		}
	})
}
