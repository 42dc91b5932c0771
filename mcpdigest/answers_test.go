package mcpdigest_test

import (
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

func mustAnswers(t *testing.T, inputResponses string) sealer.Digest {
	t.Helper()
	var in []byte
	if inputResponses != "" {
		in = []byte(inputResponses)
	}
	d, err := mcpdigest.Answers(in)
	if err != nil {
		t.Fatalf("Answers(%s): %v", inputResponses, err)
	}
	return d
}

// The answers digest is SHA-256 of its label and the RFC 8785 form of the
// object: absent, null and {} hash {}.
func TestAnswers_Formula(t *testing.T) {
	want := sealer.Digest(sha256.Sum256([]byte("mcp-sealer/v1 answers\x00{}")))
	for _, in := range []string{"", "null", "{}", " { } "} {
		if got := mustAnswers(t, in); got != want {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
	want = sha256.Sum256([]byte(`mcp-sealer/v1 answers` + "\x00" + `{"seat":{"action":"accept","content":{"seat":"12A"}}}`))
	if got := mustAnswers(t, `{"seat":{"content":{"seat":"12A"},"action":"accept"}}`); got != want {
		t.Errorf("seat 12A: got %v, want %v", got, want)
	}
}

// Issue 50, 5b: the same answers spelled otherwise have one digest; other
// answers another.
func TestAnswers_SameAnswersOtherSpelling(t *testing.T) {
	const base = `{"seat":{"action":"accept","content":{"seat":"12A","n":1}}}`
	want := mustAnswers(t, base)
	for name, in := range map[string]string{
		"members reordered":     `{"seat":{"content":{"n":1,"seat":"12A"},"action":"accept"}}`,
		"whitespace":            "{ \"seat\" : {\n\"action\":\"accept\", \"content\":{\"seat\":\"12A\",\"n\":1}}}",
		"1.0 for 1":             `{"seat":{"action":"accept","content":{"seat":"12A","n":1.0}}}`,
		"escaped letters":       `{"s\u0065at":{"action":"accept","content":{"seat":"\u0031\u0032A","n":1}}}`,
		"a response's _meta":    `{"seat":{"_meta":{"trace":"t-2"},"action":"accept","content":{"seat":"12A","n":1}}}`,
		"a response's _meta, 2": `{"seat":{"action":"accept","_meta":null,"content":{"seat":"12A","n":1}}}`,
	} {
		if got := mustAnswers(t, in); got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	for name, in := range map[string]string{
		"another seat":             `{"seat":{"action":"accept","content":{"seat":"1A","n":1}}}`,
		"declined":                 `{"seat":{"action":"decline","content":{"seat":"12A","n":1}}}`,
		"another key":              `{"Seat":{"action":"accept","content":{"seat":"12A","n":1}}}`,
		"one more answer":          `{"seat":{"action":"accept","content":{"seat":"12A","n":1}},"meal":{"action":"decline"}}`,
		"none":                     `{}`,
		"_meta deeper is content":  `{"seat":{"action":"accept","content":{"seat":"12A","n":1,"_meta":1}}}`,
		"_meta as an answer's key": `{"seat":{"action":"accept","content":{"seat":"12A","n":1}},"_meta":{"action":"accept"}}`,
	} {
		if got := mustAnswers(t, in); got == want {
			t.Errorf("%s: got the digest of %s", name, base)
		}
	}
}

func TestAnswers_Refused(t *testing.T) {
	for name, in := range map[string]string{
		"an array":         `[{"action":"accept"}]`,
		"a string":         `"accept"`,
		"not JSON":         `{"seat":`,
		"duplicate names":  `{"seat":{"action":"accept"},"seat":{"action":"decline"}}`,
		"duplicate _meta":  `{"seat":{"_meta":1,"_meta":2,"action":"accept"}}`,
		"a lone surrogate": `{"seat":{"action":"\ud800"}}`,
		"beyond a double":  `{"seat":{"n":1e400}}`,
		"whitespace only":  ` `,
	} {
		if _, err := mcpdigest.Answers([]byte(in)); !errors.Is(err, sealer.ErrArgument) {
			t.Errorf("%s: got %v, want sealer.ErrArgument", name, err)
		}
	}
}
