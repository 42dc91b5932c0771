package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/mcp-sealer/sealer/sealer"
)

// Recorded outcomes (README, "Recorded outcomes"; Config.RecordOutcomes):
// every Open asks the sealer to claim the state's ledger entry for an
// outcome, which it does only for a state it consumes (one-time, or a
// latest-only round) and says so (Opened.Recording). The proxy then
// forwards the call and records the answer the client got for it; a retry
// of that state that passes every check gets that answer back
// (Opened.Outcome), under its own id, and the upstream is not called.
//
// The outcome is the JSON-RPC response to the call's id as the client got
// it (its state sealed), without jsonrpc and id: {"result":...} or
// {"error":...}, each value as sent. When the client got no such response
// from the upstream (an HTTP error status, a body the proxy cannot read, a
// connection cut, a stream that ended before it), or got the proxy's own
// error in its place (a state the sealer could not seal, a failure that
// may pass), the proxy records none, so that retries are refused at once
// rather than after the sealer's outcome wait, and the client starts the
// request over: the upstream may have acted, and only its own answer could
// say how. Record runs when the exchange ends
// (the JSON body sent, or the SSE stream closed), within the request, so
// that it never holds up the answer and a graceful stop waits for it.

// Results of sealer_proxy_outcomes_total.
const (
	outcomeRecorded   = "recorded"      // Record kept the answer
	outcomeNone       = "none"          // the client got no answer to keep: none recorded
	outcomeTooLarge   = "too_large"     // an answer over sealer.MaxOutcome: none recorded
	outcomeFailed     = "record_failed" // Record failed (logged): retries are refused
	outcomeReplayed   = "replayed"      // a retry got the recorded answer
	outcomeInProgress = "in_progress"   // a retry while the call still ran: answered retryable
	outcomeUnreadable = "unreadable"    // a recorded answer the proxy could not read
)

// keep keeps the outcome of the message data, which the client gets in a
// response of the HTTP status given, when the call's open consumed its
// state for one and data is the first response to the call's id in a 2xx
// response.
func (x *exchange) keep(status int, data []byte) {
	if x.opened == nil || !x.opened.Recording || x.answer != nil || status/100 != 2 {
		return
	}
	x.answer = outcomeOf(x.call.id, data)
}

// recordNone records none for x, whatever the exchange sends after: the
// client gets the proxy's own error.
func (x *exchange) recordNone() { x.answer = noOutcome }

// noOutcome is the answer recorded as none, not nil so that keep leaves it.
var noOutcome = []byte{}

// outcomeOf returns {"result":...} or {"error":...} of the JSON-RPC
// message data when it is a response to id, nil otherwise (a notification,
// a request, a message with both or neither).
func outcomeOf(id json.RawMessage, data []byte) []byte {
	msg, err := parseObject(data)
	if err != nil {
		return nil
	}
	if got, ok := msg.get("id"); !ok || !sameID(got, id) {
		return nil
	}
	result, isResult := msg.get("result")
	e, isError := msg.get("error")
	out := &object{}
	switch {
	case isResult && !isError:
		out.set("result", result)
	case isError && !isResult:
		out.set("error", e)
	default:
		return nil
	}
	return out.encode()
}

// sameID reports whether the id of a response, as the upstream wrote it,
// is the request's id as the client wrote it: the same string, or the
// same number in any spelling (an upstream may write 5.0 back as 5).
func sameID(got, want json.RawMessage) bool {
	if want == nil {
		return false // a notification has no response
	}
	var g, w any
	dg, dw := json.NewDecoder(bytes.NewReader(got)), json.NewDecoder(bytes.NewReader(want))
	dg.UseNumber()
	dw.UseNumber()
	if dg.Decode(&g) != nil || dw.Decode(&w) != nil {
		return false
	}
	switch g := g.(type) {
	case string:
		w, ok := w.(string)
		return ok && g == w
	case json.Number:
		w, ok := w.(json.Number)
		if !ok {
			return false
		}
		if g == w {
			return true
		}
		fg, err1 := strconv.ParseFloat(string(g), 64)
		fw, err2 := strconv.ParseFloat(string(w), 64)
		return err1 == nil && err2 == nil && fg == fw
	}
	return false
}

// record records the outcome the client got for x, or none, once the
// answer is out. A Record that fails is logged and counted, never
// answered: the answer has gone, and the retries of the state are then
// refused as consumed.
func (p *Proxy) record(ctx context.Context, x *exchange) {
	// The client may be gone (its answer lost): the outcome is for its retry.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.SealerTimeout)
	defer cancel()
	outcome, result := x.answer, outcomeRecorded
	switch {
	case len(outcome) == 0:
		outcome, result = nil, outcomeNone
	case len(outcome) > sealer.MaxOutcome:
		// More than any sealer keeps: none, so that retries are refused at
		// once instead of waiting.
		outcome, result = nil, outcomeTooLarge
	}
	start := time.Now()
	err := p.sealer.Record(ctx, x.opened.State, outcome)
	p.metrics.sealerCall("record", reasonOf(err), time.Since(start))
	if err != nil {
		p.log.Warn("outcome not recorded: retries of the state will be refused", "method", x.call.method,
			"reason", reasonOf(err), "err", errText(err))
		result = outcomeFailed
	}
	p.metrics.outcome(methodLabel(x.call.method), result)
}

// replay answers the call c with the outcome recorded for its state, under
// c's own id, as a JSON body (as the proxy answers its own errors), without
// calling the upstream.
func (p *Proxy) replay(w http.ResponseWriter, c *call, outcome []byte) {
	method := methodLabel(c.method)
	o, err := parseObject(outcome)
	if err != nil || len(o.names) != 1 || o.names[0] != "result" && o.names[0] != "error" {
		// Not an outcome of this proxy's: none other opens its states
		// (Config.Audience).
		p.log.Warn("recorded outcome unreadable", "method", c.method)
		p.metrics.outcome(method, outcomeUnreadable)
		p.metrics.request(method, "replay_failed")
		writeJSON(w, http.StatusBadGateway, errorResponse(c.id, -32603, "the recorded answer to this request could not be read", nil))
		return
	}
	id := c.id
	if id == nil {
		id = json.RawMessage("null")
	}
	msg := &object{}
	msg.set("jsonrpc", json.RawMessage(`"2.0"`))
	msg.set("id", id)
	msg.set(o.names[0], o.values[0])
	p.log.Info("recorded outcome replayed", "method", c.method)
	p.metrics.outcome(method, outcomeReplayed)
	p.metrics.request(method, "replayed")
	writeJSON(w, http.StatusOK, msg.encode())
}

// inProgress answers a retry of a call that still runs, whose outcome the
// sealer waited for in vain: a retryable error, as for a sealer that cannot
// judge, and the upstream is not called.
func (p *Proxy) inProgress(w http.ResponseWriter, c *call) {
	method := methodLabel(c.method)
	p.log.Info("retry of a call still in progress", "method", c.method)
	p.metrics.outcome(method, outcomeInProgress)
	p.metrics.request(method, "in_progress")
	writeJSON(w, http.StatusServiceUnavailable, errorResponse(c.id, -32603,
		"the request is still being processed: retry later", map[string]any{"retryable": true, "reason": "in_progress"}))
}
