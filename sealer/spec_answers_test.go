package sealer_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"

	"github.com/gowebpki/jcs"
)

// This file is the answers digest of FORMAT.md, "Recorded outcomes",
// written again without package mcpdigest: a digester that can be told to
// make the mistakes the answers vectors exist to catch
// (TestAnswersVectors_BrokenDigestersFail). It validates JSON text with an
// RFC 8785 library, as FORMAT.md asks, and writes the canonical form with
// the request digest's canonicalizer (spec_digest_test.go).

// answersMistakes are the ways an answers digester can depart from
// FORMAT.md. The zero value is faithful.
type answersMistakes struct {
	absentAsNull   bool // absent and null hashed as "null", not "{}"
	keepMeta       bool // each response's _meta hashed with it
	metaEverywhere bool // _meta removed at every depth, not only from each response
	metaOfAll      bool // a member of inputResponses named _meta removed too
	noLabel        bool // the canonical form hashed without the label
	codePointOrder bool // JCS: members sorted by code point, not UTF-16 unit
}

// specAnswers returns the canonical form and the digest of a retry's
// inputResponses given as JSON text (absent: no inputResponses member), or
// an error if FORMAT.md refuses them.
func specAnswers(text []byte, absent bool, m answersMistakes) (canonical, digest []byte, err error) {
	if absent || string(bytes.TrimSpace(text)) == "null" {
		canonical = []byte("{}")
		if m.absentAsNull {
			canonical = []byte("null")
		}
	} else {
		if _, err := jcs.Transform(text); err != nil {
			return nil, nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		v, err := specParse(dec)
		if err != nil {
			return nil, nil, err
		}
		obj, ok := v.([]specMember)
		if !ok {
			return nil, nil, errors.New("not an object")
		}
		var kept []specMember
		for _, mb := range obj {
			if m.metaOfAll && mb.name == "_meta" {
				continue
			}
			switch {
			case m.metaEverywhere:
				mb.value = specWithoutMeta(mb.value)
			case !m.keepMeta:
				if response, ok := mb.value.([]specMember); ok {
					mb.value = specDrop(response, "_meta")
				}
			}
			kept = append(kept, mb)
		}
		if canonical, err = specCanonical(nil, kept, digestMistakes{codePointOrder: m.codePointOrder}); err != nil {
			return nil, nil, err
		}
	}
	h := sha256.New()
	if !m.noLabel {
		h.Write([]byte("mcp-sealer/v1 answers\x00"))
	}
	h.Write(canonical)
	return canonical, h.Sum(nil), nil
}

// specDrop returns obj without its members named name.
func specDrop(obj []specMember, name string) []specMember {
	kept := []specMember{}
	for _, mb := range obj {
		if mb.name != name {
			kept = append(kept, mb)
		}
	}
	return kept
}

// specWithoutMeta returns v with every member named _meta removed, at any
// depth: a mistake.
func specWithoutMeta(v any) any {
	switch v := v.(type) {
	case []specMember:
		kept := []specMember{}
		for _, mb := range specDrop(v, "_meta") {
			kept = append(kept, specMember{mb.name, specWithoutMeta(mb.value)})
		}
		return kept
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = specWithoutMeta(e)
		}
		return out
	}
	return v
}
