package server

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// errNotCanonical marks a value RFC 8785 cannot express.
var errNotCanonical = errors.New("not representable in RFC 8785 JSON")

// errLimit marks arguments beyond the limits of the request digest; it is
// returned wrapped in sealer.ErrArgument, as mcpdigest returns it.
var errLimit = errors.New("beyond the limits of the request digest")

// bindingDigest returns the digest a request binds to: the caller's own, or
// the MCP request digest of its method and params. It is an adapter onto
// mcpdigest.Canonical, which applies every rule of the digest: it checks
// every member name (mcpdigest.CheckParamName), reads only the salient
// members, and writes the arguments' RFC 8785 form straight from the Struct,
// which costs a fraction of encoding the Struct as JSON for mcpdigest to
// parse again. FuzzBindingDigest holds it to mcpdigest.Request.
func bindingDigest(b *sealerv1.Binding) (sealer.Digest, error) {
	switch {
	case b == nil:
		return sealer.Digest{}, fmt.Errorf("%w: no request", errBadRequest)
	case len(b.Digest) > 0 && (b.Method != "" || b.Params != nil):
		return sealer.Digest{}, fmt.Errorf("%w: request has both a digest and a method or params", errBadRequest)
	case len(b.Digest) > 0:
		return sealer.DigestOf(b.Digest)
	}
	m, ok := mcpdigest.Salient(b.Method)
	if !ok {
		return mcpdigest.Canonical(b.Method, "", nil) // ErrMethod
	}
	fields := b.GetParams().GetFields()
	for name := range fields {
		if err := mcpdigest.CheckParamName(b.Method, name); err != nil {
			return sealer.Digest{}, err
		}
	}
	target, _ := fields[m.Target].GetKind().(*structpb.Value_StringValue)
	if target == nil {
		return mcpdigest.Canonical(b.Method, "", nil) // target missing or not a string
	}
	var args []byte
	if m.Arguments != "" {
		if v, ok := fields[m.Arguments]; ok {
			var err error
			var small [512]byte // most arguments: no allocation
			buf := small[:0]
			if hint := canonicalSizeHint(v); hint > len(small) {
				buf = make([]byte, 0, hint)
			}
			if args, err = appendCanonical(buf, v, 0, new(int)); err != nil {
				wrap := errBadRequest
				if errors.Is(err, errLimit) {
					wrap = sealer.ErrArgument
				}
				return sealer.Digest{}, fmt.Errorf("%w: params.%s: %v", wrap, m.Arguments, err)
			}
		}
	}
	return mcpdigest.Canonical(b.Method, target.StringValue, args)
}

// canonicalSizeHint guesses the length of the canonical form of v from its
// top-level member names alone, so that the buffer seldom grows without a
// walk of the whole Struct (proto.Size), which costs as much as the digest.
func canonicalSizeHint(v *structpb.Value) int {
	n := 0
	for name := range v.GetStructValue().GetFields() {
		n += len(name) + 16
	}
	return n
}

// appendCanonical appends the RFC 8785 form of v, found depth levels deep in
// the arguments, to dst, and adds the values it holds to *values. It refuses
// arguments beyond the limits mcpdigest.Canonical enforces
// (mcpdigest.MaxDepth levels, mcpdigest.MaxValues values) as soon as it
// meets a container that goes beyond them, before it sorts or writes its
// members, so that a huge Struct is not copied first.
func appendCanonical(dst []byte, v *structpb.Value, depth int, values *int) ([]byte, error) {
	if *values++; *values > mcpdigest.MaxValues {
		return nil, errTooMany
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_ListValue:
		if err := checkContainer(depth, *values+len(k.ListValue.GetValues())); err != nil {
			return nil, err
		}
	case *structpb.Value_StructValue:
		if err := checkContainer(depth, *values+len(k.StructValue.GetFields())); err != nil {
			return nil, err
		}
	}
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return append(dst, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(dst, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return nil, fmt.Errorf("%w: %v", errNotCanonical, k.NumberValue)
		}
		n, err := jcs.NumberToJSON(k.NumberValue)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotCanonical, err)
		}
		return append(dst, n...), nil
	case *structpb.Value_StringValue:
		return appendString(dst, k.StringValue)
	case *structpb.Value_ListValue:
		dst = append(dst, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendCanonical(dst, e, depth+1, values); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case *structpb.Value_StructValue:
		fields := k.StructValue.GetFields()
		names := make([]string, 0, len(fields))
		for name := range fields {
			if !utf8.ValidString(name) {
				return nil, fmt.Errorf("%w: invalid UTF-8", errNotCanonical)
			}
			names = append(names, name)
		}
		slices.SortFunc(names, compareUTF16)
		dst = append(dst, '{')
		for i, name := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendString(dst, name); err != nil {
				return nil, err
			}
			dst = append(dst, ':')
			if dst, err = appendCanonical(dst, fields[name], depth+1, values); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("%w: unknown value kind", errNotCanonical)
}

// errTooMany is returned for arguments of more than mcpdigest.MaxValues values.
var errTooMany = fmt.Errorf("%w: more than %d values", errLimit, mcpdigest.MaxValues)

// checkContainer refuses an object or array found depth levels deep in the
// arguments, whose members or elements will make at least values values.
func checkContainer(depth, values int) error {
	switch {
	case depth >= mcpdigest.MaxDepth:
		return fmt.Errorf("%w: nested deeper than %d levels", errLimit, mcpdigest.MaxDepth)
	case values > mcpdigest.MaxValues:
		return errTooMany
	}
	return nil
}

// compareUTF16 orders a and b, valid UTF-8, by their UTF-16 code units, as
// RFC 8785 orders member names, without converting them: past their common
// prefix, the first runes that differ decide (utf16Order), and a prefix comes
// before the longer string.
func compareUTF16(a, b string) int {
	n, i := min(len(a), len(b)), 0
	for i+32 <= n && a[i:i+32] == b[i:i+32] {
		i += 32 // long common prefixes, as in an attacker's names, at memequal speed
	}
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i-- // back to the first byte of the rune that differs
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	return cmp.Compare(utf16Order(ra), utf16Order(rb))
}

// utf16Order maps r to a number that orders runes as their UTF-16 code units
// do. A rune past U+FFFF is a surrogate pair whose first unit, 0xD800 to
// 0xDBFF, sorts above U+0000 to U+D7FF and below U+E000 to U+FFFF, and whose
// units order such runes among themselves as their values do; so those runes
// map into 0xD800 to 0x10D7FF, and U+E000 to U+FFFF above that.
func utf16Order(r rune) rune {
	switch {
	case r < 0xD800:
		return r
	case r >= 0x10000:
		return r - 0x10000 + 0xD800
	}
	return r + 0x100000
}

// appendString appends s as an RFC 8785 string: the two-character escapes
// for quote, backslash, \b \f \n \r \t, \u00xx for other control characters,
// every other character as it is, in runs.
func appendString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: invalid UTF-8", errNotCanonical)
	}
	dst = append(dst, '"')
	run := 0 // start of the bytes not yet appended
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[run:i]...)
		run = i + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"'), nil
}
