package mcpdigest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

func mustDigest(t *testing.T, method, params string) sealer.Digest {
	t.Helper()
	d, err := mcpdigest.Request(method, []byte(params))
	if err != nil {
		t.Fatalf("Request(%s, %s): %v", method, params, err)
	}
	return d
}

const original = `{"name":"get_weather","arguments":{"location":"New York","days":1,"units":{"t":"C","w":"kmh"}}}`

func TestRequest_R5_SameRequest(t *testing.T) {
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

// TestRequestArguments_TheFormItHashed (issue 40, 6): every spelling of the
// same request gives one text of arguments, the one the digest hashed, so
// a layer that forwards that text hands the server one reading of them.
func TestRequestArguments_TheFormItHashed(t *testing.T) {
	const want = `{"days":1,"location":"New York","units":{"t":"C","w":"kmh"}}`
	for _, params := range []string{original,
		`{"arguments":{"units":{"w":"kmh","t":"C"},"days":1e0,"location":"New\u0020York"},"name":"get_weather"}`} {
		d, args, err := mcpdigest.RequestArguments("tools/call", []byte(params))
		if err != nil || string(args) != want || d != mustDigest(t, "tools/call", original) {
			t.Errorf("%s: got %s, %v; want %s and Request's digest", params, args, err, want)
		}
		if again, err := mcpdigest.Canonical("tools/call", "get_weather", args); err != nil || again != d {
			t.Errorf("%s: Canonical of the arguments it returned: %v, %v; want %v", params, again, err, d)
		}
	}
	for _, tc := range []struct{ method, params, want string }{
		{"tools/call", `{"name":"t"}`, ""},
		{"tools/call", `{"name":"t","arguments":null}`, "null"},
		{"prompts/get", `{"name":"p","arguments":{ "b" : "\u00e9", "a":"x" }}`, `{"a":"x","b":"é"}`},
		{"resources/read", `{"uri":"file:///a","arguments":{"x":1}}`, ""},
	} {
		if _, args, err := mcpdigest.RequestArguments(tc.method, []byte(tc.params)); err != nil || string(args) != tc.want {
			t.Errorf("%s %s: got %q, %v; want %q", tc.method, tc.params, args, err, tc.want)
		}
	}
}

func TestRequest_R5_OtherRequest(t *testing.T) {
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

func TestRequest_R5_Resources(t *testing.T) {
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

func TestRequest_NoConcatenationCollision(t *testing.T) {
	// Method, target and arguments are length-prefixed: moving bytes from one
	// to another changes the digest.
	a := mustDigest(t, "prompts/get", `{"name":"ab","arguments":{"c":"d"}}`)
	b := mustDigest(t, "prompts/get", `{"name":"a","arguments":{"bc":"d"}}`)
	if a == b {
		t.Fatal("collision across the name/arguments boundary")
	}
}

func TestRequest_Rejects(t *testing.T) {
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
		{"oversize", "tools/call", `{"name":"x","_meta":"` + strings.Repeat("a", mcpdigest.MaxParams) + `"}`, sealer.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mcpdigest.Request(tc.method, []byte(tc.params))
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
}

func TestRequest_Accepts(t *testing.T) {
	for _, params := range []string{
		`{"name":"x","arguments":{"id":9007199254740991,"n":-9007199254740991,"f":0.1,"s":"9007199254740993"}}`,
		`{"name":"x","_meta":{"big":9007199254740993}}`,
		`{"name":"ünïcødé 🙂","arguments":{"k":"\ud83d\ude42"}}`,
		`{"name":"x","arguments":{"a":{"b":{"c":[1,2,{"d":"e\"}"}]}}}}`,
	} {
		if _, err := mcpdigest.Request("tools/call", []byte(params)); err != nil {
			t.Errorf("%s: %v", params, err)
		}
	}
}

func TestSalient(t *testing.T) {
	for method, want := range map[string]string{
		"tools/call": "name arguments", "prompts/get": "name arguments", "resources/read": "uri", "tools/list": "",
	} {
		m, ok := mcpdigest.Salient(method)
		if got := strings.Join(m.Names(), " "); ok != (want != "") || ok && got != want {
			t.Errorf("%s: got %q, %v; want %q", method, got, ok, want)
		}
	}
}

// transfer is the request of the case-variant finding: a server that binds
// params case-insensitively would act on Arguments, the digest on arguments.
const transfer = `{"name":"transfer","arguments":{"amount":1}}`

func TestCheckParamName(t *testing.T) {
	tests := []struct {
		method, name string
		err          error
	}{
		{"tools/call", "name", nil},
		{"tools/call", "arguments", nil},
		{"tools/call", "_meta", nil},
		{"tools/call", "requestState", nil},
		{"tools/call", "names", nil},
		{"tools/call", "argument", nil},
		{"tools/call", "arguments ", nil},
		{"tools/call", "URI", nil},
		{"tools/call", "ａrguments", sealer.ErrArgument}, // U+FF41, fullwidth a: NFKC takes it to a
		{"tools/call", "ａｒｇｕｍｅｎｔｓ", sealer.ErrArgument},
		{"tools/call", "ℕame", sealer.ErrArgument},               // U+2115, double-struck N
		{"tools/call", "\U0001d41arguments", sealer.ErrArgument}, // mathematical bold a
		{"tools/call", "ＮＡＭＥ", sealer.ErrArgument},
		{"resources/read", "ｕｒı", sealer.ErrArgument}, // fullwidth, then ı: both foldings at once
		{"tools/call", "n\u0430me", nil},              // Cyrillic a: a homoglyph no folding takes to a
		{"tools/call", "NAME", sealer.ErrArgument},
		{"tools/call", "Name", sealer.ErrArgument},
		{"tools/call", "nAmE", sealer.ErrArgument},
		{"tools/call", "Arguments", sealer.ErrArgument},
		{"tools/call", "ARGUMENTS", sealer.ErrArgument},
		{"tools/call", "argumentſ", sealer.ErrArgument}, // U+017F, long s, folds to s
		{"tools/call", "ARGUMENTſ", sealer.ErrArgument},
		{"prompts/get", "Name", sealer.ErrArgument},
		{"prompts/get", "arguMents", sealer.ErrArgument},
		{"resources/read", "uri", nil},
		{"resources/read", "Arguments", nil},
		{"resources/read", "NAME", nil},
		{"resources/read", "URI", sealer.ErrArgument},
		{"resources/read", "Uri", sealer.ErrArgument},
		{"resources/read", "urı", sealer.ErrArgument}, // U+0131 upper-cases to I
		{"resources/read", "urİ", sealer.ErrArgument}, // U+0130 lower-cases to i
		{"resources/read", "URİ", sealer.ErrArgument},
		{"resources/read", "uri\u0307", nil}, // i U+0307, İ's full lower case: another name
		{"tools/list", "name", sealer.ErrMethod},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.name, func(t *testing.T) {
			if err := mcpdigest.CheckParamName(tc.method, tc.name); !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
}

// caseVariantExtras are the non-ASCII characters FORMAT.md lists as case
// variants of ASCII letters (and the Kelvin sign, which is in no salient
// name): the rule is this list, not a Unicode version.
var caseVariantExtras = map[rune][]rune{'s': {0x17f}, 'i': {0x130, 0x131}, 'k': {0x212a}}

// TestCheckParamName_TheListIsTheSimpleMappings holds FORMAT.md's list to
// the simple case mappings of the Unicode tables CheckParamName uses: a
// non-ASCII character matches an ASCII letter under simple folding,
// upper-casing or lower-casing exactly when the list names it. It fails on
// Unicode tables that take another character onto an ASCII letter.
func TestCheckParamName_TheListIsTheSimpleMappings(t *testing.T) {
	t.Logf("Unicode %s", unicode.Version)
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		// The ASCII letters r matches: its lower case, the letter whose
		// upper case is its upper case, and those in its folding orbit.
		var matched []rune
		if m := unicode.ToLower(r); 'a' <= m && m <= 'z' {
			matched = append(matched, m)
		}
		if m := unicode.ToUpper(r); 'A' <= m && m <= 'Z' {
			matched = append(matched, m-'A'+'a')
		}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if 'a' <= f && f <= 'z' {
				matched = append(matched, f)
			}
		}
		for c := 'a'; c <= 'z'; c++ {
			if m, listed := slices.Contains(matched, c), slices.Contains(caseVariantExtras[c], r); m != listed {
				t.Errorf("U+%04X and %c: matched %v, listed %v", r, c, m, listed)
			}
		}
	}
	// Each listed character in place of its letter is a case variant.
	for _, salient := range []string{"name", "arguments", "uri"} {
		for i, c := range salient {
			for _, r := range caseVariantExtras[c] {
				name := salient[:i] + string(r) + salient[i+1:]
				method := map[string]string{"uri": "resources/read"}[salient]
				if method == "" {
					method = "tools/call"
				}
				if err := mcpdigest.CheckParamName(method, name); !errors.Is(err, sealer.ErrArgument) {
					t.Errorf("%s: got %v, want ErrArgument", name, err)
				}
			}
		}
	}
}

// TestCheckParamName_FullMappingsAddNothing shows FORMAT.md's reason for
// using the simple mappings alone: every full case mapping (SpecialCasing,
// golang.org/x/text/cases) that gives several ASCII letters gives letters
// that no salient name holds in a row, so full mappings would refuse no
// name more.
func TestCheckParamName_FullMappingsAddNothing(t *testing.T) {
	mappings := map[string]func(string) string{
		"upper": cases.Upper(language.Und).String,
		"lower": cases.Lower(language.Und).String,
		"fold":  cases.Fold().String,
	}
	var found []string
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !unicode.IsLetter(r) {
			continue // every mapping of SpecialCasing.txt is a letter's
		}
		for how, mapping := range mappings {
			out := mapping(string(r))
			if utf8.RuneCountInString(out) < 2 || strings.IndexFunc(out, func(r rune) bool { return r >= 0x80 }) >= 0 {
				continue
			}
			found = append(found, fmt.Sprintf("U+%04X %s %s", r, how, out))
			for _, salient := range []string{"name", "arguments", "uri"} {
				if strings.Contains(strings.ToUpper(salient), strings.ToUpper(out)) {
					t.Errorf("U+%04X: its full %s case %q is in %q", r, how, out, salient)
				}
			}
		}
	}
	if len(found) == 0 {
		t.Fatal("no full mapping to several ASCII letters found: the test reads no SpecialCasing")
	}
	slices.Sort(found)
	t.Logf("full mappings to several ASCII letters: %s", strings.Join(found, ", "))
}

func TestRequest_R5_CaseVariantsRefused(t *testing.T) {
	for _, tc := range []struct{ name, method, params string }{
		{"Arguments", "tools/call", `{"name":"transfer","arguments":{"amount":1},"Arguments":{"amount":100000}}`},
		{"NAME", "tools/call", `{"name":"transfer","arguments":{"amount":1},"NAME":"transfer_all"}`},
		{"NAME and Arguments", "tools/call", `{"name":"transfer","arguments":{"amount":1},"NAME":"transfer","Arguments":{"amount":100000}}`},
		{"Arguments before arguments", "tools/call", `{"Arguments":{"amount":100000},"name":"transfer","arguments":{"amount":1}}`},
		{"escaped", "tools/call", `{"name":"transfer","arguments":{"amount":1},"Argument\u0073":{"amount":100000}}`},
		{"long s", "tools/call", `{"name":"transfer","arguments":{"amount":1},"argument\u017f":{"amount":100000}}`},
		{"variant only", "tools/call", `{"name":"transfer","Arguments":{"amount":100000}}`},
		{"prompts/get", "prompts/get", `{"name":"greeting","Name":"admin_greeting"}`},
		{"URI", "resources/read", `{"uri":"file:///etc/motd","URI":"file:///etc/shadow"}`},
		{"dotless i", "resources/read", `{"uri":"file:///etc/motd","ur\u0131":"file:///etc/shadow"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := mcpdigest.Request(tc.method, []byte(tc.params)); !errors.Is(err, sealer.ErrArgument) {
				t.Fatalf("got %v, want ErrArgument", err)
			}
		})
	}
	// Members that no case-insensitive binder takes for a salient one are
	// still ignored.
	want := mustDigest(t, "tools/call", transfer)
	for _, params := range []string{
		`{"name":"transfer","arguments":{"amount":1},"names":"x","argument":{},"uri":"u","URI":"v"}`,
		`{"name":"transfer","arguments":{"amount":1},"_meta":{"NAME":"x","Arguments":{}}}`,
	} {
		if got := mustDigest(t, "tools/call", params); got != want {
			t.Errorf("%s: got %v, want %v", params, got, want)
		}
	}
	if got, want := mustDigest(t, "resources/read", `{"uri":"u","Arguments":{},"NAME":"x"}`), mustDigest(t, "resources/read", `{"uri":"u"}`); got != want {
		t.Errorf("resources/read with Arguments and NAME: got %v, want %v", got, want)
	}
}

// nested returns arguments nested levels deep: an object, then arrays.
func nested(levels int) string {
	return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
}

// wide returns arguments of n values (n >= 2): an object, an array, zeros.
func wide(n int) string {
	return `{"a":[` + strings.TrimSuffix(strings.Repeat("0,", n-2), ",") + `]}`
}

// members returns arguments of n members (n+1 values), with short names.
func members(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s":0`, strconv.FormatInt(int64(i), 36))
	}
	b.WriteByte('}')
	return b.String()
}

// everyKind is arguments of MaxValues-2 values of every kind, but for its
// closing "]}": an object, an array, and in it true, false, null, a string,
// a number and an empty object, repeated.
var everyKind = `{"a":[` + strings.Repeat(`true,false,null,"s",1.5,{},`, (mcpdigest.MaxValues-4)/6)

func TestRequest_Limits(t *testing.T) {
	tests := []struct {
		name, args string
		ok         bool
	}{
		{"64 levels", nested(mcpdigest.MaxDepth), true},
		{"65 levels", nested(mcpdigest.MaxDepth + 1), false},
		{"64 levels of objects", strings.Repeat(`{"a":`, mcpdigest.MaxDepth-1) + `{}` + strings.Repeat(`}`, mcpdigest.MaxDepth-1), true},
		{"65 levels of objects", strings.Repeat(`{"a":`, mcpdigest.MaxDepth) + `{}` + strings.Repeat(`}`, mcpdigest.MaxDepth), false},
		{"64 levels, scalar at the bottom", `{"a":` + strings.Repeat("[", mcpdigest.MaxDepth-1) + `"s"` + strings.Repeat("]", mcpdigest.MaxDepth-1) + `}`, true},
		{"10000 levels", nested(10000), false},
		{"100,000 values", wide(mcpdigest.MaxValues), true},
		{"100,001 values", wide(mcpdigest.MaxValues + 1), false},
		{"99,999 members", members(mcpdigest.MaxValues - 1), true},
		{"100,000 members", members(mcpdigest.MaxValues), false},
		{"100,000 values of every kind", everyKind + `[0]]}`, true},
		{"100,001 values of every kind", everyKind + `"t",[0]]}`, false},
		{"100,000 strings that end like names", `{"a":[` + strings.Repeat(`"\":",`, mcpdigest.MaxValues-3) + `"\\"]}`, true},
		{"100,001 strings that end like names", `{"a":[` + strings.Repeat(`"\":",`, mcpdigest.MaxValues-2) + `"\\"]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// As received, spaced out, and as the canonical arguments of
			// Canonical: one verdict.
			params := `{"name":"x", "arguments" :` + strings.ReplaceAll(tc.args, ",", ", ") + "}"
			if len(params) > mcpdigest.MaxParams {
				params = `{"name":"x","arguments":` + tc.args + "}"
			}
			canon, err := jcs.Transform([]byte(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			_, errRaw := mcpdigest.Request("tools/call", []byte(params))
			_, errCanon := mcpdigest.Canonical("tools/call", "x", canon)
			for _, err := range []error{errRaw, errCanon} {
				if tc.ok && err != nil || !tc.ok && !errors.Is(err, sealer.ErrArgument) {
					t.Fatalf("Request %v, Canonical %v; want ok %v", errRaw, errCanon, tc.ok)
				}
			}
		})
	}
	// The limits are the arguments': other members and resources/read are
	// as before.
	for _, tc := range []struct{ method, params string }{
		{"tools/call", `{"name":"x","_meta":` + nested(1000) + `}`},
		{"tools/call", `{"name":"x","_meta":` + wide(2*mcpdigest.MaxValues) + `}`},
		{"resources/read", `{"uri":"x","arguments":` + nested(1000) + `}`},
	} {
		if _, err := mcpdigest.Request(tc.method, []byte(tc.params)); err != nil {
			t.Errorf("%s %.60s: %v", tc.method, tc.params, err)
		}
	}
}

// Arguments beyond the limits are refused before they are parsed: in a
// handful of allocations, where parsing 1 MiB of them takes hundreds of
// thousands.
func TestRequest_LimitsBeforeParsing(t *testing.T) {
	for name, params := range map[string]string{
		"wide":         `{"name":"x","arguments":` + wide(500_000) + `}`,
		"deep":         `{"name":"x","arguments":` + nested(10_000) + `}`,
		"escaped name": `{"name":"x","argument\u0073":` + wide(500_000) + `}`,
		"spaced":       "{ \"name\" : \"x\" ,\n\t\"arguments\" :\n" + strings.ReplaceAll(wide(200_000), ",", " , ") + "\n}",
	} {
		t.Run(name, func(t *testing.T) {
			if len(params) > mcpdigest.MaxParams {
				t.Fatalf("params of %d bytes; the test wants them under MaxParams", len(params))
			}
			allocs := testing.AllocsPerRun(3, func() {
				if _, err := mcpdigest.Request("tools/call", []byte(params)); !errors.Is(err, sealer.ErrArgument) {
					t.Fatalf("got %v, want ErrArgument", err)
				}
			})
			if allocs > 100 { // a few under -race and coverage, against 10^5 to parse
				t.Errorf("%v allocations to refuse, want at most 100", allocs)
			}
		})
	}
}

// viaCanonical is Request made of the public parts, as another caller
// would assemble it: jcs, CheckParamName for every member, Canonical.
// It has no early check of the arguments as received.
func viaCanonical(method string, params []byte) (sealer.Digest, error) {
	m, ok := mcpdigest.Salient(method)
	canon, err := jcs.Transform(params)
	if !ok || len(params) > mcpdigest.MaxParams || err != nil || len(canon) == 0 || canon[0] != '{' {
		return sealer.Digest{}, errors.New("refused")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil {
		return sealer.Digest{}, err
	}
	for name := range members {
		if err := mcpdigest.CheckParamName(method, name); err != nil {
			return sealer.Digest{}, err
		}
	}
	var target string
	if err := json.Unmarshal(members[m.Target], &target); err != nil {
		return sealer.Digest{}, err
	}
	var args []byte
	if m.Arguments != "" {
		args = members[m.Arguments]
	}
	return mcpdigest.Canonical(method, target, args)
}

// FuzzRequest_EarlyLimits holds Request, which checks the limits
// on the arguments as received before parsing them, to viaCanonical, which
// checks them on the canonical arguments only: one verdict, one digest.
func FuzzRequest_EarlyLimits(f *testing.F) {
	for _, s := range []string{
		transfer,
		`{"name":"x","arguments":` + nested(mcpdigest.MaxDepth) + `}`,
		`{"name":"x","arguments":` + nested(mcpdigest.MaxDepth+1) + `}`,
		`{"name":"x", "arguments" : {"a" : [ 1 , "b" , true , null , { } ] } , "_meta" : [[[[[[]]]]]] }`,
		`{"name":"x","argument\u0073":{"a":[1E2,-0.0e-1,"\"]"]},"Arguments":1}`,
		`{"name":"x","arguments":{"id":9007199254740993}}`,
		`{"uri":"u","arguments":[[[[]]]]}`,
		`{"name":"x","arguments":{"a":"\\","b":{"c":"d\"e"}}}`,
		`{"name":"x","arguments":{"a":1},"arguments":{"a":2}}`,
		`{"name":"x","arguments":{`,
	} {
		for _, m := range []byte{0, 1, 2} {
			f.Add(m, []byte(s))
		}
	}
	methods := []string{"tools/call", "prompts/get", "resources/read"}
	f.Fuzz(func(t *testing.T, m byte, params []byte) {
		method := methods[int(m)%len(methods)]
		got, err := mcpdigest.Request(method, params)
		want, wantErr := viaCanonical(method, params)
		if (err != nil) != (wantErr != nil) || got != want {
			t.Fatalf("%s %q: Request %v, %v; from the canonical parts %v, %v", method, params, got, err, want, wantErr)
		}
	})
}

// BenchmarkRequest_4000Keys is the sort of member names by
// github.com/gowebpki/jcs at its worst within MaxParams: 4,000 names of 250
// bytes that differ only in their last bytes, out of order.
func BenchmarkRequest_4000Keys(b *testing.B) {
	var params strings.Builder
	params.WriteString(`{"name":"x","arguments":{`)
	prefix := strings.Repeat("k", 242)
	for i := range 4000 {
		if i > 0 {
			params.WriteByte(',')
		}
		fmt.Fprintf(&params, `"%s%08d":%d`, prefix, i*3989%4000, i) // 3989 is prime: a permutation
	}
	params.WriteString(`}}`)
	b.SetBytes(int64(params.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := mcpdigest.Request("tools/call", []byte(params.String())); err != nil {
			b.Fatal(err)
		}
	}
}
