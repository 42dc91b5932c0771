package mcpdigest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// FuzzCanonical checks that Canonical never panics on arguments that are
// not canonical JSON (its callers promise they are; a broken promise must
// cost a wrong digest at worst) and agrees with Request.
func FuzzCanonical(f *testing.F) {
	f.Add("get_weather", []byte(`{"location":"New York"}`))
	f.Add("x", []byte(`{"a":"\"`))
	f.Add("x", []byte(`null`))
	f.Add("", []byte(`{`))
	f.Fuzz(func(t *testing.T, target string, args []byte) {
		d, err := mcpdigest.Canonical("tools/call", target, args)
		if err != nil {
			return
		}
		if !json.Valid(args) || !utf8.ValidString(target) {
			return
		}
		params, _ := json.Marshal(map[string]any{"name": target, "arguments": json.RawMessage(args)})
		if d2, err := mcpdigest.Request("tools/call", params); err == nil && canonical(args) && d2 != d {
			t.Fatalf("Canonical %v, Request %v for the canonical arguments %s", d, d2, args)
		}
	})
}

// canonical reports whether b is already in RFC 8785 form.
func canonical(b []byte) bool {
	c, err := jcs.Transform(b)
	return err == nil && bytes.Equal(c, b)
}

// FuzzDecoded holds Decoded to Request: params that Request digests, decoded
// as a program would hold them (every member as received, the target a
// string), give the same digest; and Decoded refuses only with
// ErrArgument.
func FuzzDecoded(f *testing.F) {
	for _, s := range []string{
		original,
		transfer,
		`{"name":"x","arguments":{"a":[1,2.5,-0,1e3,{"b":null}],"c":"\u00e9\ud83d\ude42"},"_meta":{}}`,
		`{"uri":"file:///x","requestState":"abc","arguments":[1]}`,
		`{"name":"x","arguments":null,"inputResponses":{"a":{}}}`,
		`{"name":"x","Arguments":{}}`,
		`{"name":"x","arguments":{"a":9007199254740993}}`,
	} {
		for _, m := range []byte{0, 1, 2} {
			f.Add(m, []byte(s))
		}
	}
	methods := []string{"tools/call", "prompts/get", "resources/read"}
	f.Fuzz(func(t *testing.T, m byte, params []byte) {
		method := methods[int(m)%len(methods)]
		want, wantErr := mcpdigest.Request(method, params)
		var members map[string]json.RawMessage
		if wantErr != nil || json.Unmarshal(params, &members) != nil {
			return
		}
		decoded := make(map[string]any, len(members))
		for name, v := range members {
			decoded[name] = v
		}
		s, _ := mcpdigest.Salient(method)
		var target string
		json.Unmarshal(members[s.Target], &target)
		decoded[s.Target] = target
		got, err := mcpdigest.Decoded(method, decoded)
		if err != nil || got != want {
			t.Fatalf("%s %q: Decoded %v, %v; Request %v", method, params, got, err, want)
		}
	})
}

// FuzzParams holds Params to Request: params that Request digests, decoded
// by encoding/json and read through a Value, give the same digest. Params
// never panics, whatever the params.
func FuzzParams(f *testing.F) {
	for _, s := range []string{
		original,
		transfer,
		`{"name":"x","arguments":{"b":[1,2.5,-0,1e21,1e-7,{"é":null,"\u2028":true}],"a":"\"\\\b\f\n\r\t\u0001\u007f\ud83d\ude42"}}`,
		`{"name":"x","arguments":{"\ud83d\ude42":1,"\uff61":2,"z":3}}`,
		`{"uri":"file:///x","_meta":{"k":1},"requestState":"abc","arguments":[1]}`,
		`{"name":"x","arguments":{"id":9007199254740993}}`,
		`{"name":"x","arguments":[1]}`,
		`{"name":"","arguments":{}}`,
		`{"name":7}`,
		`{"name":"x","arguments":null}`,
		`{"name":"x","NAME":"y","argument\u017f":{}}`,
		`{"name":"x","arguments":` + nested(mcpdigest.MaxDepth) + `}`,
		`{"name":"x","arguments":` + nested(mcpdigest.MaxDepth+1) + `}`,
		`[]`,
	} {
		for _, m := range []byte{0, 1, 2, 3} {
			f.Add(m, []byte(s))
		}
	}
	methods := []string{"tools/call", "prompts/get", "resources/read", "tools/list"}
	f.Fuzz(func(t *testing.T, m byte, params []byte) {
		method := methods[int(m)%len(methods)]
		var v any
		if json.Unmarshal(params, &v) != nil {
			return
		}
		got, err := mcpdigest.Params(method, jsonValue{v})
		if err != nil && !errors.Is(err, sealer.ErrArgument) && !errors.Is(err, sealer.ErrMethod) {
			t.Fatalf("%s %q: Params refused with %v, want ErrArgument or ErrMethod", method, params, err)
		}
		if want, wantErr := mcpdigest.Request(method, params); wantErr == nil && (err != nil || got != want) {
			t.Fatalf("%s %q: Params %v, %v; Request %v", method, params, got, err, want)
		}
	})
}

// jsonValue is a value as encoding/json decodes it into an any, as a
// mcpdigest.Value.
type jsonValue struct{ v any }

func (j jsonValue) Kind() mcpdigest.Kind {
	switch j.v.(type) {
	case nil:
		return mcpdigest.Null
	case bool:
		return mcpdigest.Bool
	case float64:
		return mcpdigest.Number
	case string:
		return mcpdigest.String
	case []any:
		return mcpdigest.Array
	case map[string]any:
		return mcpdigest.Object
	}
	return mcpdigest.Invalid
}

func (j jsonValue) Bool() bool                  { b, _ := j.v.(bool); return b }
func (j jsonValue) Number() float64             { f, _ := j.v.(float64); return f }
func (j jsonValue) String() string              { s, _ := j.v.(string); return s }
func (j jsonValue) Index(i int) mcpdigest.Value { return jsonValue{j.v.([]any)[i]} }

func (j jsonValue) Len() int {
	switch v := j.v.(type) {
	case []any:
		return len(v)
	case map[string]any:
		return len(v)
	}
	return 0
}

func (j jsonValue) AppendMembers(dst []mcpdigest.Member) []mcpdigest.Member {
	for name, v := range j.v.(map[string]any) {
		dst = append(dst, mcpdigest.Member{Name: name, Value: jsonValue{v}})
	}
	return dst
}

func TestDecoded(t *testing.T) {
	tests := []struct {
		name   string
		method string
		params map[string]any
		want   string // params as text, for Request; "" when refused
	}{
		{"tool", "tools/call", map[string]any{"name": "get_weather", "arguments": map[string]any{"location": "New York"}},
			`{"name":"get_weather","arguments":{"location":"New York"}}`},
		{"raw arguments", "tools/call", map[string]any{"name": "get_weather", "arguments": json.RawMessage(`{ "location" : "New York" }`)},
			`{"name":"get_weather","arguments":{"location":"New York"}}`},
		{"prompt", "prompts/get", map[string]any{"name": "p", "arguments": map[string]string{"b": "2", "a": "1"}},
			`{"name":"p","arguments":{"a":"1","b":"2"}}`},
		{"no arguments", "prompts/get", map[string]any{"name": "p"}, `{"name":"p"}`},
		{"resource", "resources/read", map[string]any{"uri": "file:///a", "arguments": func() {}}, `{"uri":"file:///a"}`},
		{"ignored member not read", "tools/call", map[string]any{"name": "x", "_meta": func() {}}, `{"name":"x"}`},
		{"case variant", "tools/call", map[string]any{"name": "x", "Arguments": 1}, ""},
		{"target not a string", "tools/call", map[string]any{"name": json.RawMessage(`"x"`)}, ""},
		{"arguments an array", "tools/call", map[string]any{"name": "x", "arguments": []int{1}}, ""},
		{"arguments not JSON", "tools/call", map[string]any{"name": "x", "arguments": json.RawMessage(`{"a":1,"a":2}`)}, ""},
		{"arguments not encodable", "tools/call", map[string]any{"name": "x", "arguments": func() {}}, ""},
		{"number beyond 2^53", "tools/call", map[string]any{"name": "x", "arguments": map[string]any{"a": 1 << 60}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mcpdigest.Decoded(tc.method, tc.params)
			if tc.want == "" {
				if !errors.Is(err, sealer.ErrArgument) {
					t.Fatalf("got %v, %v; want ErrArgument", got, err)
				}
				return
			}
			if want := mustDigest(t, tc.method, tc.want); err != nil || got != want {
				t.Fatalf("got %v, %v; want %v", got, err, want)
			}
		})
	}
	if _, err := mcpdigest.Decoded("tools/list", nil); !errors.Is(err, sealer.ErrMethod) {
		t.Errorf("tools/list: got %v, want ErrMethod", err)
	}
}

func BenchmarkRequest(b *testing.B) {
	for _, n := range []int{256, 1 << 10, 16 << 10} {
		params := []byte(fmt.Sprintf(`{"_meta":{"progressToken":1},"name":"get_weather","arguments":{"location":"New York","notes":%q}}`,
			bytes.Repeat([]byte("x"), n-90)))
		b.Run(fmt.Sprintf("%dB", len(params)), func(b *testing.B) {
			b.SetBytes(int64(len(params)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := mcpdigest.Request("tools/call", params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzAnswers holds Answers to its definition on any input: it never
// panics, refuses only with ErrArgument, gives the digest of the text's RFC
// 8785 form to the text, and the same digest to the answers decoded and
// encoded again with encoding/json (what client.Answers digests).
func FuzzAnswers(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`,
		`{"seat":{"action":"accept","content":{"seat":"12A"}}}`,
		`{"seat":{"_meta":{"t":1},"action":"accept","content":{"seat":"12A","_meta":2}}}`,
		`{"_meta":{"_meta":1},"x":"<&>","\ud83d\ude00":[1,{"_meta":0}],"\uff61":-0}`,
		`{"a":{"_meta":1,"_meta":2}}`, `[1]`, `{"a":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		d, err := mcpdigest.Answers(text)
		if err != nil {
			if !errors.Is(err, sealer.ErrArgument) {
				t.Fatalf("Answers(%q): %v, want an error wrapping ErrArgument", text, err)
			}
			return
		}
		if len(text) == 0 {
			return
		}
		c, err := jcs.Transform(text)
		if err != nil {
			t.Fatalf("Answers(%q) accepted what RFC 8785 refuses: %v", text, err)
		}
		if d2, err := mcpdigest.Answers(c); err != nil || d2 != d {
			t.Fatalf("Answers(%q) = %v, of its RFC 8785 form %v, %v", text, d, d2, err)
		}
		var v map[string]any
		if json.Unmarshal(text, &v) != nil {
			return // null
		}
		again, err := json.Marshal(v)
		if err != nil {
			return
		}
		if d2, err := mcpdigest.Answers(again); err != nil || d2 != d {
			t.Fatalf("Answers(%q) = %v, decoded and encoded again %v, %v", text, d, d2, err)
		}
	})
}
