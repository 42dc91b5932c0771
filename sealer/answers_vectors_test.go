package sealer_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/mcpdigest"
)

// The answers vectors of testdata/outcomes.json (member answers): the
// answers digest of FORMAT.md, "Recorded outcomes", of retries'
// inputResponses. buildAnswers writes them with mcpdigest.Answers, after
// checking each against the digester of spec_answers_test.go.

// answersVector is a retry's inputResponses and its answers digest, or its
// refusal.
type answersVector struct {
	Name string `json:"name"`
	// InputResponses is the JSON text of the member's value; absent (with
	// InputResponsesHex) when the retry has none.
	InputResponses    *string `json:"inputResponses,omitempty"`
	InputResponsesHex string  `json:"inputResponsesHex,omitempty"`
	Want              string  `json:"want"`
	Canonical         string  `json:"canonical,omitempty"`
	Digest            string  `json:"digest,omitempty"`
	Note              string  `json:"note,omitempty"`
}

// text returns the vector's inputResponses as bytes, and whether the retry
// has none.
func (v answersVector) text(tb testing.TB) ([]byte, bool) {
	switch {
	case v.InputResponses != nil:
		return []byte(*v.InputResponses), false
	case v.InputResponsesHex != "":
		return mustHex(tb, v.InputResponsesHex), false
	}
	return nil, true
}

// answersCase is an answers vector as written here: absent when in is nil.
type answersCase struct {
	name string
	in   *string
	hex  string
	ok   bool
	note string
}

func buildAnswers(t *testing.T) []answersVector {
	s := func(v string) *string { return &v }
	const seat12A = `{"seat":{"action":"accept","content":{"seat":"12A"}}}`
	cases := []answersCase{
		{"absent", nil, "", true, "no inputResponses member: the digest of {}"},
		{"null", s(`null`), "", true, "same digest as absent"},
		{"empty object", s(`{}`), "", true, "same digest as absent"},
		{"seat 12A", s(seat12A), "", true, ""},
		{"seat 12A, members reordered and spaced", s(" {\"seat\" : {\"content\":{\"seat\" : \"12A\"},\n\t\"action\":\"accept\"}} "), "", true, "same digest as seat 12A"},
		{"seat 12A, escaped", s(`{"s\u0065at":{"action":"acc\u0065pt","content":{"seat":"\u0031\u0032A"}}}`), "", true, "same digest as seat 12A"},
		{"seat 1A", s(`{"seat":{"action":"accept","content":{"seat":"1A"}}}`), "", true, "another answer: another digest"},
		{"Seat 12A", s(`{"Seat":{"action":"accept","content":{"seat":"12A"}}}`), "", true, "keys compared as bytes: another digest"},
		{"seat 12A, with _meta", s(`{"seat":{"_meta":{"io.example/trace":"t-2"},"action":"accept","content":{"seat":"12A"}}}`), "", true,
			"each response's _meta is removed: same digest as seat 12A"},
		{"seat 12A, with _meta null", s(`{"seat":{"action":"accept","content":{"seat":"12A"},"_meta":null}}`), "", true, "same digest as seat 12A"},
		{"seat 12A, with an escaped _meta", s(`{"seat":{"\u005fmeta":{"t":1},"action":"accept","content":{"seat":"12A"}}}`), "", true,
			"names match after unescaping: same digest as seat 12A"},
		{"_meta inside content", s(`{"seat":{"action":"accept","content":{"seat":"12A","_meta":{"t":1}}}}`), "", true,
			"only each response's own _meta is removed: another digest"},
		{"_meta inside an array", s(`{"roots":{"roots":[{"uri":"file:///a","_meta":{"t":1}}]}}`), "", true, "kept: only each response's own _meta is removed"},
		{"an answer named _meta", s(`{"_meta":{"action":"accept"}}`), "", true, "a member of inputResponses named _meta is an answer like any other"},
		{"a response that is not an object", s(`{"seat":"12A","n":[1,{"_meta":2}]}`), "", true, "hashed as it is"},
		{"numbers", s(`{"n":{"action":"accept","content":{"a":1.0,"b":1e21,"c":-0,"d":0.000001,"e":1e-7,"f":9007199254740993}}}`), "", true,
			"written as doubles, as JCS writes them: 9007199254740993 reads as 2^53"},
		{"non-ASCII and controls", s(`{"s\u00e9at":{"action":"accept","content":{"seat":"\u2603\t\u001f"}}}`), "", true, "JCS writes non-ASCII as itself"},
		{"members sorted by UTF-16 units", s(`{"\uff61":{"action":"accept"},"\ud83d\ude00":{"action":"decline"}}`), "", true,
			"U+1F600 (D83D DE00) sorts before U+FF61"},
		{"an array", s(`[{"action":"accept"}]`), "", false, "not an object"},
		{"a string", s(`"accept"`), "", false, "not an object"},
		{"a number", s(`1`), "", false, "not an object"},
		{"not JSON", s(`{"seat":`), "", false, ""},
		{"duplicate names", s(`{"seat":{"action":"accept"},"seat":{"action":"decline"}}`), "", false, ""},
		{"duplicate _meta", s(`{"seat":{"_meta":1,"_meta":2,"action":"accept"}}`), "", false, "refused before _meta is removed"},
		{"a lone surrogate", s(`{"seat":{"action":"\ud800"}}`), "", false, ""},
		{"a number beyond a double", s(`{"seat":{"content":{"n":1e400}}}`), "", false, ""},
		{"invalid UTF-8", nil, hex.EncodeToString([]byte("{\"seat\":{\"action\":\"acc\xffpt\"}}")), false, ""},
	}
	var out []answersVector
	for _, c := range cases {
		v := answersVector{Name: c.name, InputResponses: c.in, InputResponsesHex: c.hex, Want: "refused", Note: c.note}
		text, absent := v.text(t)
		d, err := mcpdigest.Answers(text)
		canonical, want, specErr := specAnswers(text, absent, answersMistakes{})
		switch {
		case (err == nil) != c.ok || (specErr == nil) != c.ok:
			t.Fatalf("answers vector %q: mcpdigest.Answers says %v, FORMAT.md %v, the vector ok %v", c.name, err, specErr, c.ok)
		case c.ok && hex.EncodeToString(d[:]) != hex.EncodeToString(want):
			t.Fatalf("answers vector %q: mcpdigest.Answers and FORMAT.md disagree", c.name)
		case c.ok:
			v.Want, v.Canonical, v.Digest = "ok", string(canonical), hex.EncodeToString(want)
		}
		out = append(out, v)
	}
	return out
}

// TestAnswersVectors_Digest computes every answers vector with
// mcpdigest.Answers and the digester of spec_answers_test.go.
func TestAnswersVectors_Digest(t *testing.T) {
	v := loadOutcomeVectors(t)
	if len(v.Answers) == 0 {
		t.Fatal("no answers vectors")
	}
	for _, tc := range v.Answers {
		t.Run(tc.Name, func(t *testing.T) {
			text, absent := tc.text(t)
			d, err := mcpdigest.Answers(text)
			canonical, spec, specErr := specAnswers(text, absent, answersMistakes{})
			if tc.Want != "ok" {
				if err == nil || specErr == nil {
					t.Fatalf("got %v (FORMAT.md: %v), want a refusal", err, specErr)
				}
				return
			}
			if err != nil || specErr != nil {
				t.Fatalf("got %v (FORMAT.md: %v), want the digest", err, specErr)
			}
			if got := hex.EncodeToString(d[:]); got != tc.Digest || hex.EncodeToString(spec) != tc.Digest || string(canonical) != tc.Canonical {
				t.Errorf("got %s (FORMAT.md: %x of %s), want %s of %s", got, spec, canonical, tc.Digest, tc.Canonical)
			}
		})
	}
	// The notes that say "same digest as" hold.
	digests := map[string]string{}
	for _, tc := range v.Answers {
		digests[tc.Name] = tc.Digest
	}
	for _, tc := range v.Answers {
		if same, ok := strings.CutPrefix(tc.Note, "same digest as "); ok && tc.Digest != digests[same] {
			t.Errorf("%s: digest %s, its note says that of %s, %s", tc.Name, tc.Digest, same, digests[same])
		}
	}
}

// brokenAnswersDigesters are the likely mistakes of an answers digester.
var brokenAnswersDigesters = map[string]answersMistakes{
	"absent hashed as null":              {absentAsNull: true},
	"each response's _meta kept":         {keepMeta: true},
	"_meta removed at every depth":       {metaEverywhere: true},
	"an answer named _meta removed":      {metaOfAll: true},
	"no label":                           {noLabel: true},
	"members sorted by code point (JCS)": {codePointOrder: true},
}

// TestAnswersVectors_BrokenDigestersFail shows that the answers vectors
// catch the mistakes an implementation of the answers digest is likely to
// make.
func TestAnswersVectors_BrokenDigestersFail(t *testing.T) {
	v := loadOutcomeVectors(t)
	for name, m := range brokenAnswersDigesters {
		t.Run(name, func(t *testing.T) {
			for _, tc := range v.Answers {
				text, absent := tc.text(t)
				_, d, err := specAnswers(text, absent, m)
				if (err == nil) != (tc.Want == "ok") || err == nil && hex.EncodeToString(d) != tc.Digest {
					t.Logf("caught by %s", tc.Name)
					return
				}
			}
			t.Fatal("no vector catches this digester")
		})
	}
}
