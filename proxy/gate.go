package proxy

import (
	"bytes"
	"encoding/json"
)

// The MRTR server rules that an upstream left unchanged may break and that
// the proxy, standing in front of it, holds on every answer it reads
// (docs/PROXY.md, "The spec's gate"): an InputRequiredResult only for
// tools/call, prompts/get and resources/read; each of its inputRequests an
// elicitation/create, sampling/createMessage or roots/list request, of a
// kind the client declared in its capabilities; at least one of
// inputRequests and requestState. An answer that breaks one is replaced by
// the JSON-RPC error of its fault (Config.SpecGate), never forwarded.

// The values of Config.SpecGate.
const (
	SpecGateEnforce = "enforce"
	SpecGateReport  = "report"
)

// judge returns the error the client gets instead of the message msg
// whose result is result, when that result breaks an MRTR server rule and
// the gate enforces them; nil otherwise. A broken rule is logged, with the
// upstream named as at fault, and counted, here.
func (p *Proxy) judge(x *exchange, result *object) []byte {
	if !inputRequired(result) {
		return nil // most answers: no need to read the call's capabilities
	}
	f := judgeAnswer(x.call.method, x.call.capabilities(), result)
	if f == nil {
		return nil
	}
	action := "refused"
	if p.cfg.SpecGate == SpecGateReport {
		action = "reported"
	}
	p.log.Warn("the MCP server's answer broke an MRTR server rule", "rule", f.rule, "method", x.call.method, "action", action)
	p.metrics.spec.WithLabelValues(f.rule, action).Inc()
	if action == "reported" {
		return nil
	}
	p.metrics.request(methodLabel(x.call.method), "spec_refused")
	x.recordNone()
	return errorResponse(x.call.id, f.code, f.message, map[string]string{"rule": f.rule})
}

// specFault is a rule an upstream's answer broke: its name for metrics and
// logs, and the JSON-RPC error the client gets instead of the answer.
type specFault struct {
	rule    string
	code    int
	message string
}

// codeMissingCapability is the spec's MISSING_REQUIRED_CLIENT_CAPABILITY.
const codeMissingCapability = -32021

var (
	faultMethod = &specFault{"input_required_method", -32603,
		"the MCP server answered input_required to a request that cannot take it (only tools/call, prompts/get and resources/read can)"}
	faultNothingAsked = &specFault{"nothing_asked", -32603,
		"the MCP server answered input_required with neither inputRequests nor a requestState"}
	faultInputMethod = &specFault{"input_request_method", -32603,
		"the MCP server asked for input by a method MRTR does not allow (only elicitation/create, sampling/createMessage and roots/list)"}
	faultCapability = &specFault{"missing_capability", codeMissingCapability,
		"the MCP server asked for input of a kind the client did not declare in its capabilities"}
)

// inputMethods are the methods of the requests an InputRequiredResult may
// make, each with the client capability that allows it.
var inputMethods = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// capabilities are the client capabilities a request declared in its
// _meta (io.modelcontextprotocol/clientCapabilities): the names of those
// whose value is not null. A request without them declared none.
type capabilities map[string]bool

// capabilities returns what the call's client declared.
func (c *call) capabilities() capabilities {
	declared := capabilities{}
	raw, ok := c.meta("io.modelcontextprotocol/clientCapabilities")
	if !ok {
		return declared
	}
	caps, err := parseObject(raw)
	if err != nil {
		return declared
	}
	for i, name := range caps.names {
		if !bytes.Equal(caps.values[i], []byte("null")) {
			declared[name] = true
		}
	}
	return declared
}

// inputRequired reports whether result is an InputRequiredResult: its
// resultType says so, or it carries inputRequests or a requestState, which
// only such a result does.
func inputRequired(result *object) bool {
	if v, ok := result.get("resultType"); ok && bytes.Equal(v, []byte(`"input_required"`)) {
		return true
	}
	_, asks := result.get("inputRequests")
	_, hasState := result.get("requestState")
	return asks || hasState
}

// judgeAnswer returns the rule that result, the answer to a request of
// method whose client declared caps, breaks, or nil.
func judgeAnswer(method string, caps capabilities, result *object) *specFault {
	if !inputRequired(result) {
		return nil
	}
	if !carriesState(method) {
		return faultMethod
	}
	var state string
	if v, ok := result.get("requestState"); ok {
		json.Unmarshal(v, &state) // not a string: sealMessage refuses it
	}
	raw, ok := result.get("inputRequests")
	if !ok || bytes.Equal(raw, []byte("null")) {
		if state == "" {
			return faultNothingAsked
		}
		return nil
	}
	asked, err := parseObject(raw)
	if err != nil {
		return faultInputMethod // not one object of requests: none of them allowed
	}
	if len(asked.names) == 0 && state == "" {
		return faultNothingAsked
	}
	for _, v := range asked.values {
		request, err := parseObject(v)
		if err != nil || request.variant("method", "params") {
			return faultInputMethod // a client's decoder could read another method
		}
		var m string
		if raw, ok := request.get("method"); !ok || json.Unmarshal(raw, &m) != nil {
			return faultInputMethod
		}
		capability, ok := inputMethods[m]
		switch {
		case !ok:
			return faultInputMethod
		case !caps[capability]:
			return faultCapability
		}
	}
	return nil
}
