package sealer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxParams is the largest params object RequestDigest reads: 1 MiB.
const MaxParams = 1 << 20

// Limits of the arguments the digest accepts, the same on every path
// (RequestDigest and DigestCanonical, and so every caller of these).
const (
	// MaxDepth is the deepest nesting of objects and arrays in the
	// arguments: 64 levels, the arguments object itself being the first.
	MaxDepth = 64
	// MaxValues is the most values the arguments may hold: 100,000, counting
	// every object, array, string, number, true, false and null in them,
	// the arguments object included. Member names are not values.
	MaxValues = 100_000
)

// maxSafeInteger is 2^53-1, the largest integer that every IEEE double, and
// so RFC 8785, holds exactly together with its neighbours: 2^53+1 already
// rounds to 2^53.
const maxSafeInteger = 1<<53 - 1

const requestLabel = "mcp-sealer/v1 request\x00"

// salient names, per method that may carry a requestState (R9), the params
// member that names the target and the member that holds its arguments ("" for
// none). Every other member is ignored: an allowlist, so that _meta,
// inputResponses, requestState and fields added by later protocol versions
// never change the digest. Salient names are ASCII lowercase.
var salient = map[string]struct{ target, arguments string }{
	"tools/call":     {"name", "arguments"},
	"prompts/get":    {"name", "arguments"},
	"resources/read": {"uri", ""},
}

// RequestDigest returns the digest of an MCP request from its method and its
// params object exactly as received (FORMAT.md, "Request digest"). The
// original request and its retries have the same digest; a request with
// another method, target or arguments has another.
//
// The method must be tools/call, prompts/get or resources/read (ErrMethod).
// The params must be a JSON object of at most MaxParams bytes, in valid UTF-8,
// without duplicate member names, with a non-empty string target (name or
// uri), arguments that are an object or null, and no member whose name
// differs from a salient one only in case (see CheckParamName). The arguments
// may nest at most MaxDepth levels deep and hold at most MaxValues values,
// and no number beyond ±(2^53-1), which JSON parsers disagree on (send such
// numbers as strings). Arguments beyond these limits are refused after one
// pass over params, before they are parsed.
func RequestDigest(method string, params []byte) (Digest, error) {
	fields, ok := salient[method]
	if !ok {
		return Digest{}, fmt.Errorf("%w: %q", ErrMethod, truncate(method))
	}
	if len(params) > MaxParams {
		return Digest{}, fmt.Errorf("%w: params of %d bytes exceed %d", ErrArgument, len(params), MaxParams)
	}
	if err := boundArguments(fields.arguments, params); err != nil {
		return Digest{}, err
	}
	// jcs rejects syntax errors, duplicate names, invalid UTF-8 and lone
	// surrogates. Its messages quote the input, so they are not passed on.
	canon, err := jcs.Transform(params)
	if err != nil || len(canon) == 0 || canon[0] != '{' {
		return Digest{}, fmt.Errorf("%w: params must be a JSON object in UTF-8 without duplicate names", ErrArgument)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil {
		return Digest{}, fmt.Errorf("%w: params must be a JSON object", ErrArgument)
	}
	for name := range members {
		if err := CheckParamName(method, name); err != nil {
			return Digest{}, err
		}
	}
	var target string
	if err := json.Unmarshal(members[fields.target], &target); err != nil {
		return Digest{}, fmt.Errorf("%w: params.%s must be a non-empty string", ErrArgument, fields.target)
	}
	var args []byte
	if fields.arguments != "" {
		args = members[fields.arguments]
	}
	return DigestCanonical(method, target, args)
}

// CheckParamName returns an error wrapping ErrArgument if name, the name of a
// member of the params of a request of method, is not one of the members the
// digest reads (SalientParams) but differs from one only in case: "NAME",
// "Arguments", "URI", "argumentſ" (U+017F folds to s). The digest ignores
// such a member, but an MCP server that binds params case-insensitively (Go's
// encoding/json, .NET's PropertyNameCaseInsensitive) may act on it, so a
// request carrying one is refused. Case-insensitive here means equal under
// strings.EqualFold, or once both names are upper-cased or lower-cased
// (which adds U+0130 and U+0131 for i): on Go's Unicode tables, exactly the
// list of FORMAT.md (each character the salient one, its ASCII upper case,
// U+017F for s, U+0130 or U+0131 for i), which a test holds them to. Only
// the members of params are checked, not those of objects inside them.
// RequestDigest checks every member of params; callers that digest params
// held in another form call CheckParamName for the name of every member of
// params before DigestCanonical. It returns ErrMethod for a method that
// cannot carry a requestState.
func CheckParamName(method, name string) error {
	fields, ok := salient[method]
	if !ok {
		return fmt.Errorf("%w: %q", ErrMethod, truncate(method))
	}
	for _, s := range [...]string{fields.target, fields.arguments} {
		if s != "" && caseVariant(name, s) {
			return fmt.Errorf("%w: params member %q differs from %q only in case", ErrArgument, truncate(name), s)
		}
	}
	return nil
}

// caseVariant reports whether name is not salient, an ASCII lowercase name,
// but matches it case-insensitively.
func caseVariant(name, salient string) bool {
	if name == salient || utf8.RuneCountInString(name) != len(salient) {
		return false // case mappings keep the number of runes
	}
	return strings.EqualFold(name, salient) || strings.ToLower(name) == salient ||
		strings.ToUpper(name) == strings.ToUpper(salient)
}

// DigestCanonical returns the request digest of a request already reduced to
// its salient parts: the method, the target (the tool or prompt name, the
// resource uri) and the arguments in RFC 8785 canonical form (empty when
// absent; empty for resources/read). It gives what RequestDigest gives for
// the same request, for callers that hold params in another form than JSON
// text and canonicalize them themselves. The arguments MUST be canonical:
// other spellings of the same value give other digests. The limits of
// RequestDigest apply: at most MaxDepth levels and MaxValues values, no
// number beyond ±(2^53-1). The caller checks member names with
// CheckParamName.
func DigestCanonical(method, target string, args []byte) (Digest, error) {
	fields, ok := salient[method]
	switch {
	case !ok:
		return Digest{}, fmt.Errorf("%w: %q", ErrMethod, truncate(method))
	case target == "":
		return Digest{}, fmt.Errorf("%w: params.%s must be a non-empty string", ErrArgument, fields.target)
	case fields.arguments == "":
		return digest(method, target, nil), nil
	case len(args) == 0:
		args = []byte("null")
	case args[0] != '{' && string(args) != "null":
		return Digest{}, fmt.Errorf("%w: params.%s must be an object", ErrArgument, fields.arguments)
	}
	if err := checkArguments(fields.arguments, args); err != nil {
		return Digest{}, err
	}
	return digest(method, target, args), nil
}

// SalientParams returns the names of the params members that RequestDigest
// reads for method (nil for a method that cannot carry a requestState).
// Callers that hold params in another form may pass only these members.
func SalientParams(method string) []string {
	fields, ok := salient[method]
	switch {
	case !ok:
		return nil
	case fields.arguments == "":
		return []string{fields.target}
	}
	return []string{fields.target, fields.arguments}
}

// DigestOf returns b as a Digest, for callers that bind states to requests of
// their own with a digest they compute. b must be 32 bytes.
func DigestOf(b []byte) (Digest, error) {
	var d Digest
	if len(b) != len(d) {
		return d, fmt.Errorf("%w: digest of %d bytes, want %d", ErrArgument, len(b), len(d))
	}
	copy(d[:], b)
	return d, nil
}

func digest(method, target string, args []byte) Digest {
	h := sha256.New()
	h.Write([]byte(requestLabel))
	for _, part := range [][]byte{[]byte(method), []byte(target), args} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var d Digest
	h.Sum(d[:0])
	return d
}

// checkArguments checks the JSON text of the arguments named name against
// the limits: nesting, number of values, numbers within ±(2^53-1). It reads
// the text as a run of tokens without checking its grammar, in one pass and
// without allocating beyond a number's text: text a JSON parser accepts gets
// the same verdict canonical or as received (whitespace, escapes and number
// spellings do not change it), and other text is refused by the parser.
func checkArguments(name string, text []byte) error {
	depth, values := 0, 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '{' || c == '[':
			if depth++; depth > MaxDepth {
				return fmt.Errorf("%w: params.%s nested deeper than %d levels", ErrArgument, name, MaxDepth)
			}
			values++
		case c == '}' || c == ']':
			depth--
		case c == '"':
			i = stringEnd(text, i)
			if colonAfter(text, i+1) < 0 { // a member name is not a value
				values++
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(text) && isNumberByte(text[j]) {
				j++
			}
			f, err := strconv.ParseFloat(string(text[i:j]), 64)
			if err != nil || math.Abs(f) > maxSafeInteger {
				return fmt.Errorf("%w: params.%s holds a number beyond ±(2^53-1); send it as a string", ErrArgument, name)
			}
			i = j - 1
			values++
		case c >= 'a' && c <= 'z': // true, false, null
			for i+1 < len(text) && text[i+1] >= 'a' && text[i+1] <= 'z' {
				i++
			}
			values++
		}
		if values > MaxValues {
			return fmt.Errorf("%w: params.%s holds more than %d values", ErrArgument, name, MaxValues)
		}
	}
	return nil
}

// boundArguments applies checkArguments to the value of every top-level
// member of params named arguments ("" for none), as received, so that
// arguments beyond the limits cost one pass over params and not a parse. It
// refuses only what the check of the canonical arguments would refuse.
func boundArguments(arguments string, params []byte) error {
	if arguments == "" {
		return nil
	}
	depth, start := 0, -1
	for i := 0; i < len(params); i++ {
		switch c := params[i]; c {
		case '{', '[':
			depth++
		case '}', ']', ',':
			if depth == 1 && start >= 0 {
				if err := checkArguments(arguments, params[start:i]); err != nil {
					return err
				}
				start = -1
			}
			if c != ',' {
				depth--
			}
		case '"':
			end := stringEnd(params, i)
			if end == len(params) {
				return nil // unterminated: jcs refuses it
			}
			if depth == 1 {
				if colon := colonAfter(params, end+1); colon >= 0 && isName(params[i:end+1], arguments) {
					start = colon + 1
				}
			}
			i = end
		}
	}
	return nil
}

// stringEnd returns the index of the quote that closes the JSON string whose
// opening quote is text[i], or len(text) if none does. It looks for the next
// quote, then for a backslash before it, so that it reads each byte once.
func stringEnd(text []byte, i int) int {
	for i++; i < len(text); {
		q := bytes.IndexByte(text[i:], '"')
		if q < 0 {
			return len(text)
		}
		q += i
		for { // skip the escapes before the quote at q
			b := bytes.IndexByte(text[i:q], '\\')
			if b < 0 {
				return q
			}
			if i += b + 2; i > q {
				break // the quote was escaped: look for the next
			}
		}
	}
	return len(text)
}

// colonAfter returns the index of the colon that follows text[i:] after
// whitespace, or -1.
func colonAfter(text []byte, i int) int {
	for ; i < len(text); i++ {
		switch text[i] {
		case ':':
			return i
		case ' ', '\t', '\n', '\r':
		default:
			return -1
		}
	}
	return -1
}

// isName reports whether the JSON string quoted decodes to name.
func isName(quoted []byte, name string) bool {
	switch {
	case len(quoted) > 2+len(`\u0000`)*len(name):
		return false
	case !bytes.ContainsRune(quoted, '\\'):
		return string(quoted[1:len(quoted)-1]) == name
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == name
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// truncate bounds attacker-controlled text quoted in an error.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
