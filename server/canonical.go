package server

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/sealer"
)

// maxDepth bounds the nesting of arguments, as protobuf decoding does.
const maxDepth = 10000

// errNotCanonical marks a value RFC 8785 cannot express.
var errNotCanonical = errors.New("not representable in RFC 8785 JSON")

// bindingDigest returns the digest a request binds to: the caller's own, or
// the MCP request digest of its method and params. It reads only the salient
// members (a retry's _meta, inputResponses and requestState are ignored by
// the digest anyway) and writes their RFC 8785 form straight from the
// Struct, instead of encoding the Struct as JSON and canonicalizing that
// text again; FuzzBindingDigest holds it to sealer.RequestDigest.
func bindingDigest(b *sealerv1.Binding) (sealer.Digest, error) {
	switch {
	case b == nil:
		return sealer.Digest{}, fmt.Errorf("%w: no request", errBadRequest)
	case len(b.Digest) > 0 && (b.Method != "" || b.Params != nil):
		return sealer.Digest{}, fmt.Errorf("%w: request has both a digest and a method or params", errBadRequest)
	case len(b.Digest) > 0:
		return sealer.DigestOf(b.Digest)
	}
	names := sealer.SalientParams(b.Method)
	if names == nil {
		return sealer.DigestCanonical(b.Method, "", nil) // ErrMethod
	}
	fields := b.GetParams().GetFields()
	target, _ := fields[names[0]].GetKind().(*structpb.Value_StringValue)
	if target == nil {
		return sealer.DigestCanonical(b.Method, "", nil) // target missing or not a string
	}
	var args []byte
	if len(names) == 2 {
		if v, ok := fields[names[1]]; ok {
			var err error
			if args, err = appendCanonical(nil, v, 0); err != nil {
				return sealer.Digest{}, fmt.Errorf("%w: params.%s: %v", errBadRequest, names[1], err)
			}
		}
	}
	return sealer.DigestCanonical(b.Method, target.StringValue, args)
}

// appendCanonical appends the RFC 8785 form of v to dst.
func appendCanonical(dst []byte, v *structpb.Value, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", errNotCanonical, maxDepth)
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
			if dst, err = appendCanonical(dst, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case *structpb.Value_StructValue:
		fields := k.StructValue.GetFields()
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		// RFC 8785 orders members by their names' UTF-16 code units.
		slices.SortFunc(names, func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		})
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
			if dst, err = appendCanonical(dst, fields[name], depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("%w: unknown value kind", errNotCanonical)
}

// appendString appends s as an RFC 8785 string: the two-character escapes
// for quote, backslash, \b \f \n \r \t, \u00xx for other control characters,
// every other character as it is.
func appendString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: invalid UTF-8", errNotCanonical)
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
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
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"'), nil
}
