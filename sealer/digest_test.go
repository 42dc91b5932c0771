package sealer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/sealer"
)

func mustDigest(t *testing.T, method, params string) sealer.Digest {
	t.Helper()
	d, err := sealer.RequestDigest(method, []byte(params))
	if err != nil {
		t.Fatalf("RequestDigest(%s, %s): %v", method, params, err)
	}
	return d
}

const original = `{"name":"get_weather","arguments":{"location":"New York","days":1,"units":{"t":"C","w":"kmh"}}}`

func TestRequestDigest_R5_SameRequest(t *testing.T) {
	want := mustDigest(t, "tools/call", original)
	same := []struct{ name, params string }{
		{"reordered keys", `{"arguments":{"units":{"w":"kmh","t":"C"},"days":1,"location":"New York"},"name":"get_weather"}`},
		{"whitespace", "{ \"name\" : \"get_weather\",\n\t\"arguments\" : { \"location\" : \"New York\" , \"days\" : 1 , \"units\":{\"t\":\"C\",\"w\":\"kmh\"} } }"},
		{"1.0 for 1", `{"name":"get_weather","arguments":{"location":"New York","days":1.0,"units":{"t":"C","w":"kmh"}}}`},
		{"1e0 for 1", `{"name":"get_weather","arguments":{"location":"New York","days":1e0,"units":{"t":"C","w":"kmh"}}}`},
		{"escaped letters", `{"name":"get_\u0077eather","arguments":{"location":"New\u0020York","days":1,"units":{"t":"C","w":"kmh"}}}`},
		{"retry with _meta, inputResponses and requestState", `{
			"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}},
			"name":"get_weather","arguments":{"location":"New York","days":1,"units":{"t":"C","w":"kmh"}},
			"inputResponses":{"github_login":{"action":"accept","content":{"name":"octocat"}}},
			"requestState":"AQAAAAE"}`},
		{"unknown member", `{"name":"get_weather","arguments":{"location":"New York","days":1,"units":{"t":"C","w":"kmh"}},"task":{"ttl":5}}`},
	}
	for _, tc := range same {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustDigest(t, "tools/call", tc.params); got != want {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestRequestDigest_R5_OtherRequest(t *testing.T) {
	base := mustDigest(t, "tools/call", original)
	other := []struct{ name, method, params string }{
		{"other argument value", "tools/call", `{"name":"get_weather","arguments":{"location":"Boston","days":1,"units":{"t":"C","w":"kmh"}}}`},
		{"other number", "tools/call", `{"name":"get_weather","arguments":{"location":"New York","days":2,"units":{"t":"C","w":"kmh"}}}`},
		{"number as string", "tools/call", `{"name":"get_weather","arguments":{"location":"New York","days":"1","units":{"t":"C","w":"kmh"}}}`},
		{"extra argument", "tools/call", `{"name":"get_weather","arguments":{"location":"New York","days":1,"units":{"t":"C","w":"kmh"},"x":null}}`},
		{"other name", "tools/call", `{"name":"get_weather2","arguments":{"location":"New York","days":1,"units":{"t":"C","w":"kmh"}}}`},
		{"prompts/get", "prompts/get", original},
		{"no arguments", "tools/call", `{"name":"get_weather"}`},
		{"empty arguments", "tools/call", `{"name":"get_weather","arguments":{}}`},
	}
	seen := map[sealer.Digest]string{base: "original"}
	for _, tc := range other {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDigest(t, tc.method, tc.params)
			if prev, dup := seen[d]; dup {
				t.Fatalf("same digest as %s", prev)
			}
			seen[d] = tc.name
		})
	}
	if mustDigest(t, "tools/call", `{"name":"get_weather"}`) != mustDigest(t, "tools/call", `{"name":"get_weather","arguments":null}`) {
		t.Error("absent arguments and null arguments differ, want one digest")
	}
}

func TestRequestDigest_R5_Resources(t *testing.T) {
	a := mustDigest(t, "resources/read", `{"uri":"file:///a.txt"}`)
	retry := mustDigest(t, "resources/read", `{"uri":"file:///a.txt","_meta":{"x":1},"inputResponses":{},"requestState":"s","arguments":{"ignored":true}}`)
	b := mustDigest(t, "resources/read", `{"uri":"file:///b.txt"}`)
	if a != retry {
		t.Errorf("retry: got %v, want %v", retry, a)
	}
	if a == b {
		t.Error("two uris have one digest")
	}
}

func TestRequestDigest_NoConcatenationCollision(t *testing.T) {
	// Method, target and arguments are length-prefixed: moving bytes from one
	// to another changes the digest.
	a := mustDigest(t, "prompts/get", `{"name":"ab","arguments":{"c":"d"}}`)
	b := mustDigest(t, "prompts/get", `{"name":"a","arguments":{"bc":"d"}}`)
	if a == b {
		t.Fatal("collision across the name/arguments boundary")
	}
}

func TestRequestDigest_Rejects(t *testing.T) {
	tests := []struct {
		name, method, params string
		err                  error
	}{
		{"R9 initialize", "initialize", `{"name":"x"}`, sealer.ErrMethod},
		{"R9 tools/list", "tools/list", `{}`, sealer.ErrMethod},
		{"R9 sampling", "sampling/createMessage", `{}`, sealer.ErrMethod},
		{"R9 empty method", "", `{"name":"x"}`, sealer.ErrMethod},
		{"R9 method case", "Tools/Call", `{"name":"x"}`, sealer.ErrMethod},
		{"not JSON", "tools/call", `{"name":`, sealer.ErrArgument},
		{"trailing data", "tools/call", `{"name":"x"} {}`, sealer.ErrArgument},
		{"array", "tools/call", `[{"name":"x"}]`, sealer.ErrArgument},
		{"null", "tools/call", `null`, sealer.ErrArgument},
		{"empty", "tools/call", ``, sealer.ErrArgument},
		{"duplicate name", "tools/call", `{"name":"x","name":"y"}`, sealer.ErrArgument},
		{"duplicate argument", "tools/call", `{"name":"x","arguments":{"a":1,"a":2}}`, sealer.ErrArgument},
		{"duplicate in ignored member", "tools/call", `{"name":"x","_meta":{"a":1,"a":2}}`, sealer.ErrArgument},
		{"invalid UTF-8", "tools/call", "{\"name\":\"x\xff\"}", sealer.ErrArgument},
		{"lone surrogate", "tools/call", `{"name":"x\ud800"}`, sealer.ErrArgument},
		{"missing name", "tools/call", `{"arguments":{}}`, sealer.ErrArgument},
		{"name differs by case", "tools/call", `{"Name":"x"}`, sealer.ErrArgument},
		{"empty name", "tools/call", `{"name":""}`, sealer.ErrArgument},
		{"numeric name", "tools/call", `{"name":7}`, sealer.ErrArgument},
		{"arguments array", "tools/call", `{"name":"x","arguments":[1]}`, sealer.ErrArgument},
		{"arguments string", "prompts/get", `{"name":"x","arguments":"a=b"}`, sealer.ErrArgument},
		{"missing uri", "resources/read", `{"name":"x"}`, sealer.ErrArgument},
		{"integer beyond 2^53", "tools/call", `{"name":"x","arguments":{"id":9007199254740993}}`, sealer.ErrArgument},
		{"2^53", "tools/call", `{"name":"x","arguments":{"id":9007199254740992}}`, sealer.ErrArgument},
		{"negative integer beyond 2^53", "tools/call", `{"name":"x","arguments":{"a":[-9007199254740993]}}`, sealer.ErrArgument},
		{"huge exponent", "tools/call", `{"name":"x","arguments":{"a":1e300}}`, sealer.ErrArgument},
		{"number out of range", "tools/call", `{"name":"x","arguments":{"a":1e999}}`, sealer.ErrArgument},
		{"oversize", "tools/call", `{"name":"x","_meta":"` + strings.Repeat("a", sealer.MaxParams) + `"}`, sealer.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sealer.RequestDigest(tc.method, []byte(tc.params))
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
}

func TestRequestDigest_Accepts(t *testing.T) {
	for _, params := range []string{
		`{"name":"x","arguments":{"id":9007199254740991,"n":-9007199254740991,"f":0.1,"s":"9007199254740993"}}`,
		`{"name":"x","_meta":{"big":9007199254740993}}`,
		`{"name":"ünïcødé 🙂","arguments":{"k":"\ud83d\ude42"}}`,
		`{"name":"x","arguments":{"a":{"b":{"c":[1,2,{"d":"e\"}"}]}}}}`,
	} {
		if _, err := sealer.RequestDigest("tools/call", []byte(params)); err != nil {
			t.Errorf("%s: %v", params, err)
		}
	}
}

func TestDigestOf(t *testing.T) {
	d, err := sealer.DigestOf(make([]byte, 32))
	if err != nil || d != (sealer.Digest{}) {
		t.Fatalf("32 zero bytes: got %v, %v", d, err)
	}
	for _, n := range []int{0, 31, 33} {
		if _, err := sealer.DigestOf(make([]byte, n)); !errors.Is(err, sealer.ErrArgument) {
			t.Errorf("%d bytes: got %v, want ErrArgument", n, err)
		}
	}
}

func TestSalientParams(t *testing.T) {
	for method, want := range map[string]string{
		"tools/call": "name arguments", "prompts/get": "name arguments", "resources/read": "uri", "tools/list": "",
	} {
		if got := strings.Join(sealer.SalientParams(method), " "); got != want {
			t.Errorf("%s: got %q, want %q", method, got, want)
		}
	}
}
