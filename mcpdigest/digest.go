// Package mcpdigest computes the request digest that binds a sealed
// requestState to the MCP request that produced it (FORMAT.md, "Request
// digest"), so that the retry of that request opens the state and any other
// request does not.
//
// It defines, once for the sealer, its Go client and its proxy, which
// methods may carry a requestState (R9), which params members the digest
// reads (the salient members), which member names are refused as
// look-alikes of those (LookAlike), and the limits on the arguments.
//
// # Forms of params
//
// [Request] reads params as JSON text, exactly as received: the form
// FORMAT.md specifies; [RequestArguments] also returns the arguments in the
// form it hashed them. [Decoded] reads params a program already decoded
// into a map; [Params] reads params held as a [Value], such as a protobuf
// Struct (package [github.com/mcp-sealer/sealer/mcpdigest/protostruct]),
// and writes the arguments' RFC 8785 form itself; [Canonical] takes the
// salient parts of params held in any other form, their arguments already
// in RFC 8785 form. The last three apply the rules FORMAT.md gives for
// decoded params. Every path gives the same digest for the same request,
// which the fuzz targets hold them to.
package mcpdigest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/mcp-sealer/sealer/sealer"
)

// The MCP methods whose requests may carry a requestState (R9).
const (
	ToolsCall     = "tools/call"
	PromptsGet    = "prompts/get"
	ResourcesRead = "resources/read"
)

// Limits of the params the digest reads (FORMAT.md, "Request digest").
const (
	// MaxParams is the most bytes of params as JSON text that Request
	// reads: 1 MiB, whitespace included.
	MaxParams = 1 << 20
	// MaxDepth is the deepest nesting of objects and arrays in the
	// arguments: 64 levels, the arguments object itself being the first.
	MaxDepth = 64
	// MaxValues is the most values the arguments may hold: 100,000, counting
	// every object, array, string, number, true, false and null in them,
	// the arguments object included. Member names are not values.
	MaxValues = 100_000
)

// Members names the params members the digest of a method reads. Every
// other member is ignored: an allowlist, so that _meta, inputResponses,
// requestState and members added by later protocol versions never change
// the digest.
type Members struct {
	// Target names the tool, prompt or resource: "name" or "uri".
	Target string
	// Arguments holds the arguments: "arguments", or "" for a method
	// without them.
	Arguments string
}

// Names returns the names of the members, the target first.
func (m Members) Names() []string {
	if m.Arguments == "" {
		return []string{m.Target}
	}
	return []string{m.Target, m.Arguments}
}

// salient is the one table of the methods that may carry a requestState and
// of the members their digest reads. Salient names are ASCII lowercase.
var salient = map[string]Members{
	ToolsCall:     {"name", "arguments"},
	PromptsGet:    {"name", "arguments"},
	ResourcesRead: {"uri", ""},
}

// Salient returns the members the digest of a request of method reads, and
// false for a method whose requests cannot carry a requestState (R9).
func Salient(method string) (Members, bool) {
	m, ok := salient[method]
	return m, ok
}

// Request returns the digest of an MCP request from its method and its
// params object exactly as received.
//
// The method must be tools/call, prompts/get or resources/read
// (sealer.ErrMethod). The params must be a JSON object of at most MaxParams
// bytes, in valid UTF-8, without duplicate member names, with a non-empty
// string target (name or uri), arguments that are an object or null, and no
// member whose name is a case variant of a salient one (CheckParamName).
// The arguments may nest at most MaxDepth levels deep and hold at most
// MaxValues values, and no number beyond ±(2^53-1), which JSON parsers
// disagree on (send such numbers as strings). Arguments beyond these limits
// are refused after one pass over params, before they are parsed. Every
// other refusal wraps sealer.ErrArgument.
func Request(method string, params []byte) (sealer.Digest, error) {
	d, _, err := RequestArguments(method, params)
	return d, err
}

// RequestArguments returns what Request returns, and the arguments as the
// digest read them: the bytes of args in step 5 of FORMAT.md, "Request
// digest" (their RFC 8785 form, or null), nil when params have none or the
// method has none. A layer that forwards the request hands these bytes to
// the server in place of the arguments as received, so that two requests
// with one digest are read one way (FORMAT.md, "Case in the arguments").
func RequestArguments(method string, params []byte) (sealer.Digest, []byte, error) {
	m, ok := salient[method]
	if !ok {
		return sealer.Digest{}, nil, errMethod(method)
	}
	if len(params) > MaxParams {
		return sealer.Digest{}, nil, fmt.Errorf("%w: params of %d bytes exceed %d", sealer.ErrArgument, len(params), MaxParams)
	}
	if err := boundArguments(m.Arguments, params); err != nil {
		return sealer.Digest{}, nil, err
	}
	// jcs rejects syntax errors, duplicate names, invalid UTF-8 and lone
	// surrogates. Its messages quote the input, so they are not passed on.
	canon, err := jcs.Transform(params)
	if err != nil || len(canon) == 0 || canon[0] != '{' {
		return sealer.Digest{}, nil, fmt.Errorf("%w: params must be a JSON object in UTF-8 without duplicate names", sealer.ErrArgument)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil {
		return sealer.Digest{}, nil, fmt.Errorf("%w: params must be a JSON object", sealer.ErrArgument)
	}
	if err := checkNames(method, members); err != nil {
		return sealer.Digest{}, nil, err
	}
	var target string
	if err := json.Unmarshal(members[m.Target], &target); err != nil {
		return sealer.Digest{}, nil, errTarget(m)
	}
	var args []byte
	if m.Arguments != "" {
		args = members[m.Arguments] // a copy of canon's bytes: JCS form
	}
	d, err := Canonical(method, target, args)
	if err != nil {
		return sealer.Digest{}, nil, err
	}
	return d, args, nil
}

// Decoded returns the digest of an MCP request whose params a program holds
// decoded: the target a string, the arguments any value encoding/json
// encodes as an object or null (a map, a struct, a json.RawMessage as
// received). It gives what Request gives for the same request, under the
// rules FORMAT.md gives for decoded params: every member name is checked
// (CheckParamName) but only the salient members' values are read, and
// MaxParams, a bound on text, does not apply.
func Decoded(method string, params map[string]any) (sealer.Digest, error) {
	m, ok := salient[method]
	if !ok {
		return sealer.Digest{}, errMethod(method)
	}
	if err := checkNames(method, params); err != nil {
		return sealer.Digest{}, err
	}
	target, _ := params[m.Target].(string)
	v, ok := params[m.Arguments]
	if !ok || m.Arguments == "" {
		return Canonical(method, target, nil)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return sealer.Digest{}, fmt.Errorf("%w: params.%s: %v", sealer.ErrArgument, m.Arguments, err)
	}
	// As in Request, jcs's messages quote the input.
	args, err := jcs.Transform(raw)
	if err != nil {
		return sealer.Digest{}, fmt.Errorf("%w: params.%s is not JSON in UTF-8 without duplicate names", sealer.ErrArgument, m.Arguments)
	}
	return Canonical(method, target, args)
}

// Canonical returns the digest of a request already reduced to its salient
// parts: the method, the target (the tool or prompt name, the resource uri)
// and the arguments in RFC 8785 canonical form (empty when absent; empty for
// resources/read). It is for callers that hold params in another form than
// JSON text, a map or a Value and canonicalize the arguments themselves; they check
// every member name of params with CheckParamName first. The arguments MUST
// be canonical: other spellings of the same value give other digests. The
// limits of Request apply: at most MaxDepth levels and MaxValues values, no
// number beyond ±(2^53-1).
func Canonical(method, target string, args []byte) (sealer.Digest, error) {
	m, ok := salient[method]
	switch {
	case !ok:
		return sealer.Digest{}, errMethod(method)
	case target == "":
		return sealer.Digest{}, errTarget(m)
	case m.Arguments == "":
		return digest(method, target, nil), nil
	case len(args) == 0:
		args = []byte("null")
	case args[0] != '{' && string(args) != "null":
		return sealer.Digest{}, fmt.Errorf("%w: params.%s must be an object", sealer.ErrArgument, m.Arguments)
	}
	if err := checkArguments(m.Arguments, args); err != nil {
		return sealer.Digest{}, err
	}
	return digest(method, target, args), nil
}

// CheckParamName returns an error wrapping sealer.ErrArgument if name, the
// name of a member of the params of a request of method, is a case variant
// or look-alike of a salient member's name (LookAlike): "NAME", "Arguments",
// "URI", "argumentſ", "ａｒｇｕｍｅｎｔｓ". The digest ignores such a member,
// but an MCP server that binds params case-insensitively (Go's
// encoding/json, .NET's PropertyNameCaseInsensitive) or through Unicode
// folding (Python's str.casefold, NFKC) may act on it, so a request carrying one is
// refused. Only the members of params are checked, not those of objects
// inside them. It returns an error wrapping sealer.ErrMethod for a method
// whose requests cannot carry a requestState.
func CheckParamName(method, name string) error {
	m, ok := salient[method]
	if !ok {
		return errMethod(method)
	}
	for _, s := range m.Names() {
		if LookAlike(name, s) {
			return fmt.Errorf("%w: params member %q is a look-alike of %q", sealer.ErrArgument, truncate(name), s)
		}
	}
	return nil
}

// checkNames applies CheckParamName to every member of params.
func checkNames[V any](method string, params map[string]V) error {
	for name := range params {
		if err := CheckParamName(method, name); err != nil {
			return err
		}
	}
	return nil
}

const requestLabel = "mcp-sealer/v1 request\x00"

// digest is step 5 of FORMAT.md, "Request digest".
func digest(method, target string, args []byte) sealer.Digest {
	h := sha256.New()
	h.Write([]byte(requestLabel))
	for _, part := range [][]byte{[]byte(method), []byte(target), args} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var d sealer.Digest
	h.Sum(d[:0])
	return d
}

func errMethod(method string) error {
	return fmt.Errorf("%w: %q", sealer.ErrMethod, truncate(method))
}

func errTarget(m Members) error {
	return fmt.Errorf("%w: params.%s must be a non-empty string", sealer.ErrArgument, m.Target)
}

// truncate bounds attacker-controlled text quoted in an error.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
