package mcpdigest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/mcp-sealer/sealer/mcpdigest"
)

// TestNamesCollide (issues 35 and 50): two member names of one object equal
// under case folding or Unicode's foldings (mcpdigest.Fold) collide, at any depth; names that differ by '_' or '-', the
// same name in sibling objects, and strings that are values do not.
func TestNamesCollide(t *testing.T) {
	many := func(n int, last string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range n {
			fmt.Fprintf(&b, `"k%d":{"x":1},`, i)
		}
		b.WriteString(`"` + last + `":1}`)
		return b.String()
	}
	for _, tc := range []struct {
		name, args string
		want       bool
	}{
		{"top level", `{"Item":"car","item":"pen"}`, true},
		{"upper case", `{"item":"pen","ITEM":"car"}`, true},
		{"in an object in an array", `{"o":[1,{"x":{"sku":1,"SKU":2}}]}`, true},
		{"after a nested object", `{"a":{"b":{"c":1}},"A":2}`, true},
		{"long s", `{"size":1,"ſize":2}`, true},
		{"Kelvin sign", `{"kind":1,"Kind":2}`, true},
		{"dotless i", `{"item":1,"ıtem":2}`, true},
		{"dotted capital I", `{"item":1,"İtem":2}`, true},
		{"escaped", `{"item":1,"\u0049tem":2}`, true},
		{"escaped twice", `{"\u0069tem":1,"\u0069tem":2}`, true},
		{"non-ASCII, another case", `{"Ärger":1,"ärger":2}`, true},
		{"Greek sigma", `{"σ":1,"ς":2}`, true},
		{"fullwidth", `{"item":1,"ｉｔｅｍ":2}`, true},
		{"sharp s", `{"strasse":1,"straße":2}`, true},
		{"ligature st", `{"list":1,"liﬆ":2}`, true},
		{"fullwidth, then dotless i", `{"item":1,"ｉtem":2,"ıtem":3}`, true},
		{"past the linear names", many(40, "K39"), true},
		{"separators differ", `{"item_id":1,"itemId":2,"item-id":3}`, false},
		{"same name in sibling objects", `{"a":{"x":1},"b":{"X":1},"c":[{"x":1},{"X":2}]}`, false},
		{"names in values are not members", `{"x":"X","y":["x","X"],"z":"\"x\":"}`, false},
		{"a quote and colon inside a name", `{"a\":":1,"A\"":2}`, false},
		{"different letters", `{"a":1,"b":2,"ä":3,"æ":4}`, false},
		{"a homoglyph no folding takes to a", `{"a":1,"а":2}`, false},
		{"a combining mark", `{"e":1,"e\u0301":2}`, false},
		{"past the linear names, none", many(40, "k40"), false},
		{"not an object", `[1,"a","A"]`, false},
		{"null", `null`, false},
		{"empty", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mcpdigest.NamesCollide([]byte(tc.args)); got != tc.want {
				t.Errorf("NamesCollide(%s) = %v, want %v", tc.args, got, tc.want)
			}
			if got := referenceCollide([]byte(tc.args)); got != tc.want && json.Valid([]byte(tc.args)) {
				t.Errorf("the reference says %v for %s, want %v", got, tc.args, tc.want)
			}
		})
	}
}

// The digest does not apply the rule: colliding arguments have a digest,
// the same in both orders, which is why their readers must refuse them.
func TestNamesCollide_TheDigestBindsBothOrders(t *testing.T) {
	a, errA := mcpdigest.Request("tools/call", []byte(`{"name":"buy","arguments":{"Item":"car","item":"pen"}}`))
	b, errB := mcpdigest.Request("tools/call", []byte(`{"name":"buy","arguments":{"item":"pen","Item":"car"}}`))
	if errA != nil || errB != nil || a != b {
		t.Fatalf("digests %v (%v) and %v (%v), want equal", a, errA, b, errB)
	}
}

// referenceCollide is the rule read from encoding/json's tokens, each name
// folded rune by rune to the least of the simple folding orbit of its lower
// case's upper case, then by NFKC, full case folding and NFKC, then rune by
// rune again: slow and plain, for NamesCollide to agree with.
func referenceCollide(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type open struct {
		object   bool
		seen     map[string]bool
		wantName bool
	}
	var stack []*open
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return false
		}
		top := (*open)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.wantName {
			simple := func(s string) string {
				return strings.Map(func(r rune) rune {
					least := unicode.ToUpper(unicode.ToLower(r))
					for f := unicode.SimpleFold(least); f != least; f = unicode.SimpleFold(f) {
						least = min(least, f)
					}
					return least
				}, s)
			}
			key := simple(norm.NFKC.String(cases.Fold().String(norm.NFKC.String(simple(s)))))
			if top.seen[key] {
				return true
			}
			top.seen[key], top.wantName = true, false
			continue
		}
		if top != nil && top.object {
			top.wantName = true // after a value, a name or the end
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &open{object: true, seen: map[string]bool{}, wantName: true})
		case json.Delim('['):
			stack = append(stack, &open{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantName = true
			}
		}
	}
}

// FuzzNamesCollide: no input panics NamesCollide, and on valid JSON it
// agrees with the reference.
func FuzzNamesCollide(f *testing.F) {
	for _, s := range []string{
		`{"Item":"car","item":"pen"}`, `{"o":[1,{"x":{"sku":1,"SKU":2}}]}`, `{"size":1,"ſize":2}`,
		`{"kind":1,"Kind":2}`, `{"item":1,"İtem":2}`, `{"\u0069tem":1,"I\u0074em":2}`,
		`{"a":{"x":1},"b":{"X":1}}`, `{"x":"X","y":["x","X"]}`, `{"a\":":1,"A\"":2}`,
		`{"a":"\u00ff","b":"\xff"}`, `{"\xff":1,"\xfe":2}`, `{"ｉｔｅｍ":1,"item":2}`, `{"ß":1,"ss":2}`, `{"ﬆ":1,"ST":2}`, `[`, `{"a`, `}}]]{"a":1`, `{"a":1,"A"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := mcpdigest.NamesCollide(data)
		if !json.Valid(data) {
			return
		}
		if want := referenceCollide(data); got != want {
			t.Fatalf("NamesCollide(%q) = %v, the reference %v", data, got, want)
		}
	})
}

// BenchmarkNamesCollide reads small arguments and arguments of 600 members
// in nested objects.
func BenchmarkNamesCollide(b *testing.B) {
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
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			args := []byte(bc.args)
			for b.Loop() {
				if mcpdigest.NamesCollide(args) {
					b.Fatal("collides")
				}
			}
		})
	}
}
