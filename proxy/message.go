package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/mcpdigest"
)

// object is a JSON object as received: its members in order, each value the
// bytes that spelled it. A name given twice is refused when parsed, so that
// the proxy and the upstream can never read different members.
type object struct {
	names  []string
	values []json.RawMessage
}

var (
	errNotObject = errors.New("not a JSON object")
	errDuplicate = errors.New("a member is named twice")
)

// parseObject parses data as one JSON object and nothing after it. The
// values are copies of their bytes as received, the names as encoding/json
// decodes them (invalid UTF-8 replaced). json.Valid checks the whole text
// first, so the walk below only splits a valid object into its members.
func parseObject(data []byte) (*object, error) {
	if !json.Valid(data) {
		return nil, errNotObject
	}
	d := bytes.Clone(bytes.TrimRight(data, " \t\r\n"))
	i := skipSpace(d, 0)
	if d[i] != '{' {
		return nil, errNotObject
	}
	o := &object{}
	for i = skipSpace(d, i+1); d[i] != '}'; {
		end := stringEnd(d, i)
		name, err := memberName(d[i:end])
		if err != nil {
			return nil, errNotObject
		}
		if slices.Contains(o.names, name) {
			return nil, errDuplicate
		}
		i = skipSpace(d, skipSpace(d, end)+1) // past the colon
		v := valueEnd(d, i)
		o.names, o.values = append(o.names, name), append(o.values, json.RawMessage(d[i:v]))
		if i = skipSpace(d, v); d[i] == ',' {
			i = skipSpace(d, i+1)
		}
	}
	return o, nil
}

// memberName decodes a name as encoding/json does, at once when it holds
// only ASCII and no escape.
func memberName(quoted []byte) (string, error) {
	inner := quoted[1 : len(quoted)-1]
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			var name string
			err := json.Unmarshal(quoted, &name)
			return name, err
		}
	}
	return string(inner), nil
}

// skipSpace returns the index of the first byte of d from i on that is not
// JSON white space.
func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index after the string of valid JSON d that starts
// at i.
func stringEnd(d []byte, i int) int {
	for i++; d[i] != '"'; i++ {
		if d[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd returns the index after the value of valid JSON d that starts at
// i.
func valueEnd(d []byte, i int) int {
	switch d[i] {
	case '"':
		return stringEnd(d, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch d[i] {
			case '"':
				i = stringEnd(d, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(d) && strings.IndexByte(",}] \t\r\n", d[i]) < 0 {
		i++
	}
	return i
}

// get returns the value of the member name, exactly so named.
func (o *object) get(name string) (json.RawMessage, bool) {
	for i, n := range o.names {
		if n == name {
			return o.values[i], true
		}
	}
	return nil, false
}

// set replaces the value of the member name, or adds the member last.
func (o *object) set(name string, v json.RawMessage) {
	for i, n := range o.names {
		if n == name {
			o.values[i] = v
			return
		}
	}
	o.names, o.values = append(o.names, name), append(o.values, v)
}

// del removes the member name, if any.
func (o *object) del(name string) {
	for i, n := range o.names {
		if n == name {
			o.names, o.values = slices.Delete(o.names, i, i+1), slices.Delete(o.values, i, i+1)
			return
		}
	}
}

// variant reports whether a member is named like one of names but is not
// it: a decoder that matches names regardless of case (Go's encoding/json
// does), through Unicode's foldings (Python's str.casefold, NFKC), or that
// also takes a snake_case or kebab-case spelling (pydantic's
// populate_by_name with a camelCase alias, as the Python MCP SDK's models
// have) would read it as that member.
func (o *object) variant(names ...string) bool {
	for _, n := range o.names {
		folded, dropped := looseForms(n)
		for _, want := range names {
			if looseMatch(n, want, folded, dropped) {
				return true
			}
		}
	}
	return false
}

// looseVariant reports whether name differs from want, an ASCII name
// without '_' or '-', but matches it once folded by the digest's rule
// (mcpdigest.Fold) with every '_' and '-' dropped.
func looseVariant(name, want string) bool {
	folded, dropped := looseForms(name)
	return looseMatch(name, want, folded, dropped)
}

// looseMatch is looseVariant of name, whose looseForms are folded and
// dropped, computed once for every want.
func looseMatch(name, want, folded, dropped string) bool {
	return name != want && (strings.EqualFold(folded, want) || strings.EqualFold(dropped, want))
}

// looseForms returns name folded (mcpdigest.Fold, which has no ASCII upper
// case: equal under EqualFold to an ASCII name only when equal to its lower
// case) without its separators, and the same with the separators that the
// folding made dropped too (a fullwidth low line folds to '_').
func looseForms(name string) (folded, dropped string) {
	folded = mcpdigest.Fold(strings.Map(dropSeparator, name))
	return folded, strings.Map(dropSeparator, folded)
}

// dropSeparator drops the separators of snake_case and kebab-case names.
func dropSeparator(r rune) rune {
	if r == '_' || r == '-' {
		return -1
	}
	return r
}

// encode writes the object back, its members in their order.
func (o *object) encode() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range o.names {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(n)
		b.Write(name)
		b.WriteByte(':')
		b.Write(o.values[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// envelope members of a JSON-RPC message.
var envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// call is a JSON-RPC request as the proxy judged it.
type call struct {
	env    *object
	params *object         // nil when the request has none
	id     json.RawMessage // nil for a notification
	method string
	// state is params.requestState; hasState is true when params have one,
	// whatever its value ("" included).
	state    string
	hasState bool
	// answered is true when params have inputResponses, of any value.
	answered bool
	// binding is the request's digest, for the three methods with params;
	// when the call carries a state, with the keys of its inputResponses.
	binding *client.Binding
	// rewritten is true when params.arguments were replaced by the form
	// the digest hashed, which the upstream gets in place of theirs.
	rewritten bool
}

// requestError is a JSON-RPC error the proxy answers itself.
type requestError struct {
	code    int
	message string
}

func (e *requestError) Error() string { return e.message }

var (
	errParse      = &requestError{-32700, "parse error: the body is not one JSON object without repeated members"}
	errBatch      = &requestError{-32600, "invalid request: JSON-RPC batches are not accepted"}
	errEnvelope   = &requestError{-32600, "invalid request: a member is named like a JSON-RPC member in another spelling"}
	errStateParam = &requestError{-32602, "invalid params: requestState must be a string, on tools/call, prompts/get or resources/read only, named exactly so"}
	errBindName   = &requestError{-32602, "invalid params: a member is named like name, arguments or uri in another spelling"}
	errBindParams = &requestError{-32602, "invalid params: the request cannot be bound to a requestState"}
	errInputsName = &requestError{-32602, "invalid params: a member is named like inputResponses in another spelling"}
	errInputs     = &requestError{-32602, "invalid params: inputResponses must be one JSON object without repeated keys"}
)

// parseCall reads a POST body. It refuses what the proxy and an upstream
// might read differently: anything but one object, a member named twice, a
// member named like a JSON-RPC member, like requestState, like the binding's
// name, arguments or uri, or, on the three methods, like inputResponses
// (whose keys a flow binds) in another spelling (another case, snake_case or
// kebab-case: looseVariant); with a state, an inputResponses that is not one
// object without repeated keys. Members the proxy reads nothing from (_meta)
// are passed as they are: an upstream that reads them under another name
// reads nothing the proxy has checked. The arguments of tools/call and
// prompts/get are set to the form the digest hashed (FORMAT.md, "Case in
// the arguments"). With an error, the call it returns (possibly nil) holds
// the id to echo.
func parseCall(body []byte) (*call, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return nil, errBatch
	}
	env, err := parseObject(body)
	if err != nil {
		return nil, errParse
	}
	c := &call{env: env}
	if id, ok := env.get("id"); ok && len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9') {
		c.id = id // a string or a number: echoed in an error
	}
	if env.variant(envelopeNames...) {
		return c, errEnvelope
	}
	if raw, ok := env.get("method"); ok {
		if json.Unmarshal(raw, &c.method) != nil {
			return c, errParse
		}
	}
	raw, ok := env.get("params")
	if !ok || bytes.Equal(raw, []byte("null")) {
		return c, nil
	}
	salient, bindable := mcpdigest.Salient(c.method)
	if c.params, err = parseObject(raw); err != nil {
		switch {
		case err != errNotObject || raw[0] == '{':
			return c, errParse
		case bindable:
			return c, errBindParams
		}
		c.params = nil
		return c, nil // not an object, on another method: the upstream answers it
	}
	if c.params.variant("requestState") {
		return c, errStateParam
	}
	if bindable && c.params.variant(salient.Names()...) {
		return c, errBindName
	}
	// A state present is opened, whatever its value: an upstream may tell
	// "" from none (Python's `is None`), and null is no string.
	if v, ok := c.params.get("requestState"); ok {
		if bytes.Equal(v, []byte("null")) || json.Unmarshal(v, &c.state) != nil || !bindable {
			return c, errStateParam
		}
		c.hasState = true
	}
	if !bindable {
		return c, nil
	}
	if c.params.variant("inputResponses") {
		return c, errInputsName
	}
	_, c.answered = c.params.get("inputResponses")
	var answers []byte
	var keys []string
	if c.hasState {
		if keys, err = memberNames(c.params, "inputResponses"); err != nil {
			return c, errInputs
		}
		// A retry of a recorded round gets its outcome only with the answers
		// it ran with (FORMAT.md, "Recorded outcomes").
		v, _ := c.params.get("inputResponses")
		d, err := mcpdigest.Answers(v)
		if err != nil {
			return c, errInputs
		}
		answers = d[:]
	}
	// The params are text, so the digest's rules for text apply to the
	// whole of them (FORMAT.md, "Request digest"), ignored members included.
	d, args, err := mcpdigest.RequestArguments(c.method, raw)
	if err != nil {
		return c, errBindParams
	}
	// Spellings the digest binds alike (members in another order, 1.0 for
	// 1) may be read two ways by the upstream's decoder: it gets the one
	// the digest hashed, in every round.
	if received, ok := c.params.get(salient.Arguments); ok && args != nil && !bytes.Equal(received, args) {
		c.params.set(salient.Arguments, args)
		c.rewritten = true
	}
	c.binding = &client.Binding{Digest: d[:], Responded: keys, Answers: answers}
	return c, nil
}

// carriesState reports whether requests of method may carry a requestState.
func carriesState(method string) bool {
	_, ok := mcpdigest.Salient(method)
	return ok
}

// memberNames returns the names of the object o holds as name: none when it
// is absent, nil (not known) when it is null, an error when it is not one
// object without repeated names.
func memberNames(o *object, name string) ([]string, error) {
	v, ok := o.get(name)
	switch {
	case !ok:
		return []string{}, nil
	case bytes.Equal(v, []byte("null")):
		return nil, nil // as the sealer takes it: a round that asked keys does not open
	}
	inner, err := parseObject(v)
	if err != nil {
		return nil, err
	}
	if inner.names == nil {
		return []string{}, nil // {}: no names, which is known
	}
	return inner.names, nil
}

// forwarded returns the body of a call without a state for the upstream:
// the body as received, or, when its arguments were rewritten, with them
// and every other byte of params and of the envelope as received.
func (c *call) forwarded(received []byte) []byte {
	if !c.rewritten {
		return received
	}
	c.env.set("params", c.params.encode())
	return c.env.encode()
}

// withState returns the request's body with params.requestState replaced by
// state, or removed when state is empty (a state of the proxy's own),
// every other byte of params and of the envelope as received but the
// arguments, in the form the digest hashed.
func (c *call) withState(state []byte) []byte {
	if len(state) == 0 {
		c.params.del("requestState")
	} else {
		v, _ := json.Marshal(string(state))
		c.params.set("requestState", v)
	}
	c.env.set("params", c.params.encode())
	return c.env.encode()
}

// errorResponse is a JSON-RPC error response echoing id (null when the
// request had none).
func errorResponse(id json.RawMessage, code int, message string, data any) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	type jerr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jerr            `json:"error"`
	}{"2.0", id, jerr{code, message, data}})
	return b
}
