package sealer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/gowebpki/jcs"
)

// MaxParams is the largest params object RequestDigest reads: 1 MiB.
const MaxParams = 1 << 20

// maxSafeInteger is 2^53-1, the largest integer that every IEEE double, and
// so RFC 8785, holds exactly together with its neighbours: 2^53+1 already
// rounds to 2^53.
const maxSafeInteger = 1<<53 - 1

const requestLabel = "mcp-sealer/v1 request\x00"

// salient names, per method that may carry a requestState (R9), the params
// member that names the target and the member that holds its arguments ("" for
// none). Every other member is ignored: an allowlist, so that _meta,
// inputResponses, requestState and fields added by later protocol versions
// never change the digest.
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
// uri), arguments that are an object or null, and no number in the arguments
// beyond ±(2^53-1), which JSON parsers disagree on (send such numbers as strings).
func RequestDigest(method string, params []byte) (Digest, error) {
	fields, ok := salient[method]
	if !ok {
		return Digest{}, fmt.Errorf("%w: %q", ErrMethod, truncate(method))
	}
	if len(params) > MaxParams {
		return Digest{}, fmt.Errorf("%w: params of %d bytes exceed %d", ErrArgument, len(params), MaxParams)
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

// DigestCanonical returns the request digest of a request already reduced to
// its salient parts: the method, the target (the tool or prompt name, the
// resource uri) and the arguments in RFC 8785 canonical form (empty when
// absent; empty for resources/read). It gives what RequestDigest gives for
// the same request, for callers that hold params in another form than JSON
// text and canonicalize them themselves. The arguments MUST be canonical:
// other spellings of the same value give other digests.
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
	if !exactNumbers(args) {
		return Digest{}, fmt.Errorf("%w: params.%s holds a number beyond ±(2^53-1); send it as a string", ErrArgument, fields.arguments)
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

// exactNumbers reports whether every number in canonical JSON is within
// ±(2^53-1). canonical must be RFC 8785 output: no whitespace, numbers in
// ECMAScript form.
func exactNumbers(canonical []byte) bool {
	for i := 0; i < len(canonical); i++ {
		switch c := canonical[i]; {
		case c == '"':
			for i++; i < len(canonical) && canonical[i] != '"'; i++ {
				if canonical[i] == '\\' {
					i++
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(canonical) && isNumberByte(canonical[j]) {
				j++
			}
			f, err := strconv.ParseFloat(string(canonical[i:j]), 64)
			if err != nil || math.Abs(f) > maxSafeInteger {
				return false
			}
			i = j - 1
		}
	}
	return true
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e'
}

// truncate bounds attacker-controlled text quoted in an error.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
