package sealer_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"
)

// This file is the request digest of FORMAT.md written again without package
// sealer: a digester that can be told to make the mistakes the digest
// vectors exist to catch (TestVectors_BrokenDigestersFail). It validates
// JSON text with an RFC 8785 library, as FORMAT.md asks, and writes the
// canonical arguments itself, so that the mistakes of a canonicalizer can be
// made on purpose.

// digestMistakes are the ways a digester can depart from FORMAT.md,
// "Request digest". The zero value is faithful, and digests JSON text.
type digestMistakes struct {
	decoded          bool // the decoded-params path: only salient members are checked (allowed)
	noSizeLimit      bool // step 2: params over 1 MiB accepted
	ignoreBOM        bool // step 2: a byte order mark before params skipped, as RFC 8259 lets a parser do
	noCaseCheck      bool // step 3: members like NAME or Arguments accepted
	asciiCaseCheck   bool // step 3: case compared in ASCII only (misses ſ, ı, İ)
	noLowerCase      bool // step 3: folding and upper-casing only (misses İ)
	noUpperCase      bool // step 3: folding and lower-casing only (misses ı)
	fullCaseMappings bool // step 3: Unicode's full case mappings, not the simple ones (İ lower-cases to i U+0307)
	deepCaseCheck    bool // step 3: members inside arguments and _meta checked too
	absentArgsEmpty  bool // step 3: absent arguments digested as "" instead of null
	resourceArgsNull bool // step 3: resources/read digested with "null" arguments
	noNumberCheck    bool // step 4
	integerCheck     bool // step 4: only integer spellings checked, as integers
	decimalCheck     bool // step 4: the decimal value checked, not the double
	noDepthLimit     bool // step 4
	depthFromParams  bool // step 4: params counted as level 1, arguments as 2
	noValueLimit     bool // step 4
	namesAreValues   bool // step 4: member names counted as values
	noLengthPrefix   bool // step 5: parts concatenated without u32 lengths
	codePointOrder   bool // JCS: members sorted by code point, not UTF-16 unit
	negativeZero     bool // JCS: -0 written "-0"
	escapeNonASCII   bool // JCS: non-ASCII characters written as \u escapes
}

var specSalient = map[string][2]string{
	"tools/call":     {"name", "arguments"},
	"prompts/get":    {"name", "arguments"},
	"resources/read": {"uri", ""},
}

// specDigest returns the target, the canonical arguments and the digest of
// a request, or an error if FORMAT.md refuses it.
func specDigest(method string, params []byte, m digestMistakes) (target string, args []byte, digest []byte, err error) {
	fields, ok := specSalient[method]
	if !ok {
		return "", nil, nil, errors.New("method")
	}
	if m.ignoreBOM {
		params = bytes.TrimPrefix(params, []byte("\ufeff"))
	}
	if !m.decoded {
		if len(params) > 1<<20 && !m.noSizeLimit {
			return "", nil, nil, errors.New("size")
		}
		if _, err := jcs.Transform(params); err != nil {
			return "", nil, nil, err
		}
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(params, &members); err != nil || members == nil {
		return "", nil, nil, errors.New("not an object")
	}
	names := slices.Collect(maps.Keys(members))
	if m.deepCaseCheck {
		names = specMemberNames(params)
	}
	for _, name := range names {
		for _, s := range fields {
			if s != "" && name != s && !m.noCaseCheck && specCaseVariant(name, s, m) {
				return "", nil, nil, fmt.Errorf("case variant %q", name)
			}
		}
	}
	raw, ok := members[fields[0]]
	if !ok {
		return "", nil, nil, errors.New("no target")
	}
	if m.decoded { // the decoded form holds only what JCS can express
		if _, err := jcs.Transform(raw); err != nil {
			return "", nil, nil, err
		}
	}
	if err := json.Unmarshal(raw, &target); err != nil || target == "" || raw[0] != '"' {
		return "", nil, nil, errors.New("target")
	}
	switch raw, present := members[fields[1]]; {
	case fields[1] == "" && m.resourceArgsNull:
		args = []byte("null")
	case fields[1] == "":
		args = []byte{}
	case !present && m.absentArgsEmpty:
		args = []byte{}
	case !present || string(raw) == "null":
		args = []byte("null")
	case raw[0] != '{':
		return "", nil, nil, errors.New("arguments not an object")
	default:
		if m.decoded {
			if _, err := jcs.Transform(raw); err != nil {
				return "", nil, nil, err
			}
		}
		v, err := specParse(json.NewDecoder(bytes.NewReader(raw)))
		if err != nil {
			return "", nil, nil, err
		}
		values := 0
		level := 1
		if m.depthFromParams {
			level = 2
		}
		if err := specLimits(v, level, &values, m); err != nil {
			return "", nil, nil, err
		}
		if args, err = specCanonical(nil, v, m); err != nil {
			return "", nil, nil, err
		}
	}
	h := sha256.New()
	h.Write([]byte("mcp-sealer/v1 request\x00"))
	for _, part := range [][]byte{[]byte(method), []byte(target), args} {
		if !m.noLengthPrefix {
			h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(part))))
		}
		h.Write(part)
	}
	return target, args, h.Sum(nil), nil
}

// specCaseExtras are the characters step 1 of FORMAT.md's folding replaces.
var specCaseExtras = strings.NewReplacer("\u017f", "s", "\u0130", "i", "\u0131", "i", "\u212a", "k")

// specCaseVariant is FORMAT.md's look-alike rule: a name other than the
// salient one that equals it once folded (step 1, NFKC, full case folding,
// NFKC).
func specCaseVariant(name, salient string, m digestMistakes) bool {
	switch {
	case m.asciiCaseCheck:
		for _, r := range name {
			if r >= 0x80 {
				return false
			}
		}
		return strings.EqualFold(name, salient)
	case m.fullCaseMappings:
		return cases.Fold().String(name) == cases.Fold().String(salient) ||
			cases.Lower(language.Und).String(name) == salient ||
			cases.Upper(language.Und).String(name) == strings.ToUpper(salient)
	case m.noLowerCase:
		return strings.EqualFold(name, salient) || strings.ToUpper(name) == strings.ToUpper(salient)
	case m.noUpperCase:
		return strings.EqualFold(name, salient) || strings.ToLower(name) == salient
	}
	folded := norm.NFKC.String(cases.Fold().String(norm.NFKC.String(specCaseExtras.Replace(name))))
	return name != salient && folded == salient
}

// specMemberNames returns the name of every member of every object in the
// JSON text params, at any depth.
func specMemberNames(params []byte) []string {
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for name, member := range v {
				names = append(names, name)
				walk(member)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var v any
	if json.Unmarshal(params, &v) == nil {
		walk(v)
	}
	return names
}

// specMember is a member of a parsed object, in the order received.
type specMember struct {
	name  string
	value any
}

// specParse reads one JSON value: []specMember for an object, []any for an
// array, json.Number, string, bool or nil.
func specParse(dec *json.Decoder) (any, error) {
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := []specMember{}
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := specParse(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, specMember{name.(string), v})
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := specParse(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	if tok == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	return tok, nil
}

// specLimits checks v, found level levels deep, against step 4, and adds
// its values to *values.
func specLimits(v any, level int, values *int, m digestMistakes) error {
	if *values++; *values > 100_000 && !m.noValueLimit {
		return errors.New("too many values")
	}
	switch v := v.(type) {
	case []specMember:
		if level > 64 && !m.noDepthLimit {
			return errors.New("too deep")
		}
		for _, mb := range v {
			if m.namesAreValues {
				*values++
			}
			if err := specLimits(mb.value, level+1, values, m); err != nil {
				return err
			}
		}
	case []any:
		if level > 64 && !m.noDepthLimit {
			return errors.New("too deep")
		}
		for _, e := range v {
			if err := specLimits(e, level+1, values, m); err != nil {
				return err
			}
		}
	case json.Number:
		return specNumber(string(v), m)
	}
	return nil
}

// specNumber applies the rule of step 4 to a number as written.
func specNumber(text string, m digestMistakes) error {
	limit := new(big.Rat).SetInt64(1<<53 - 1)
	switch {
	case m.noNumberCheck:
		return nil
	case m.integerCheck:
		if strings.ContainsAny(text, ".eE") {
			return nil
		}
		n, _ := new(big.Rat).SetString(text)
		if n.Abs(n).Cmp(limit) > 0 {
			return errors.New("number")
		}
		return nil
	case m.decimalCheck:
		n, ok := new(big.Rat).SetString(text)
		if !ok || n.Abs(n).Cmp(limit) > 0 {
			return errors.New("number")
		}
		return nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.Abs(f) > 1<<53-1 {
		return errors.New("number")
	}
	return nil
}

// specCanonical appends the RFC 8785 form of v to dst.
func specCanonical(dst []byte, v any, m digestMistakes) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return specString(dst, v, m), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, err
		}
		if f == 0 && math.Signbit(f) && m.negativeZero {
			return append(dst, "-0"...), nil
		}
		s, err := jcs.NumberToJSON(f)
		return append(dst, s...), err
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = specCanonical(dst, e, m); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case []specMember:
		sorted := slices.Clone(v)
		slices.SortFunc(sorted, func(a, b specMember) int {
			if m.codePointOrder {
				return strings.Compare(a.name, b.name)
			}
			return slices.Compare(utf16.Encode([]rune(a.name)), utf16.Encode([]rune(b.name)))
		})
		dst = append(dst, '{')
		for i, mb := range sorted {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(specString(dst, mb.name, m), ':')
			var err error
			if dst, err = specCanonical(dst, mb.value, m); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("unexpected %T", v)
}

// specString appends s as RFC 8785 writes a string.
func specString(dst []byte, s string, m digestMistakes) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\b':
			dst = append(dst, `\b`...)
		case r == '\f':
			dst = append(dst, `\f`...)
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r < 0x20:
			dst = fmt.Appendf(dst, `\u%04x`, r)
		case r >= 0x80 && m.escapeNonASCII:
			for _, u := range utf16.Encode([]rune{r}) {
				dst = fmt.Appendf(dst, `\u%04x`, u)
			}
		default:
			dst = append(dst, string(r)...)
		}
	}
	return append(dst, '"')
}
