// Package proxy is sealer-proxy: a reverse proxy for the MCP Streamable
// HTTP transport that seals and opens the requestStates of an MCP server
// that does not protect them itself, so that the server keeps emitting its
// own plain state and never sees one it did not write.
//
// # What it does to the traffic
//
//   - A tools/call, prompts/get or resources/read whose params carry a
//     requestState: the state is opened by the sealer with the caller's
//     principal and the request as received (client.Binding, the same
//     binding as the Go client's), whatever its value ("" included). On
//     success the upstream gets its own original state in its place. A
//     refused state is a JSON-RPC error -32602 echoing the id, and the
//     upstream is never called; a sealer that cannot answer (LEDGER_UNAVAILABLE, a timeout) is
//     a retryable error (HTTP 503, JSON-RPC -32603), never a pass.
//   - A result carrying a requestState, in a JSON body or in the SSE event
//     that holds it: the state is sealed with the caller's principal and
//     the originating request, and replaced. A state over the cap is an
//     error, never truncated.
//   - Flows (Policy.Flows, latest-only by default): every state is sealed
//     as a round of a flow, bound to the keys of the result's
//     inputRequests. A result to a call whose state the proxy opened
//     continues that state's flow (the same deadline, the next round), so
//     the client can neither stretch, rewind nor fork the request, and a
//     retry is opened with the keys of its inputResponses, which must be
//     exactly those its round asked. A flow past its deadline or its
//     rounds answers -32602 in place of the next round. A response to one of the three methods that
//     the proxy cannot read (a media type other than application/json or
//     text/event-stream, a JSON body that is not one object, a compressed
//     body, on any Content-Encoding line) is replaced by a JSON-RPC error, HTTP 502 in place of a success,
//     never passed unsealed. A leading byte order mark is removed.
//   - The arguments of tools/call and prompts/get reach the upstream in the
//     form the digest hashed (RFC 8785), first round and retry alike, so
//     that two requests bound alike are one text to any decoder.
//   - For a one-time tool, prompt or resource, inputResponses without a
//     requestState are refused: they would repeat what the one open of the
//     proxy's own state allows once.
//   - Recorded outcomes (Config.RecordOutcomes, on by default): the answer
//     to a call whose state the open consumed (one-time, or a latest-only
//     round) is recorded at the sealer as the client got it, once it is
//     out. A retry of that state (its answer lost on the way back) that
//     passes every check gets that answer again, under its own id, and the
//     upstream is not called; a retry while the call still runs gets a
//     retryable error. A call the upstream did not answer records none,
//     and its retries are refused (outcome.go).
//   - Everything else passes through unchanged and unbuffered: other SSE
//     events in order, notifications, GET streams, session and protocol
//     headers.
//   - Only POST carries a body, which the proxy inspects. GET, DELETE and
//     OPTIONS pass without one (a body on them is refused); any other HTTP
//     method, another case of POST included, is answered 405 with an Allow
//     header. Method override headers (X-HTTP-Method-Override,
//     X-HTTP-Method, X-Method-Override, in any spelling) are removed. A
//     request asking a protocol upgrade is refused, and a 101 from the
//     upstream is a 502: past it no byte would be read.
//
// A state is sealed only in the response to the request that made it: a
// result sent elsewhere (on a GET stream, or replayed on resumption) passes
// as it is, and its plain state is refused when it comes back.
//
// The MRTR server rules an upstream may break are held on the answer to
// every request the proxy reads (gate.go, Config.SpecGate): an
// InputRequiredResult only for the three methods, asking only by
// elicitation, sampling or roots, of a kind the client declared, and
// asking something.
//
// A round that asks input without a state gets a state of the proxy's own
// (no payload), removed from the retry before the upstream sees it. Every
// state is bound to the proxy's audience (Config.Audience), and a call's
// MCP headers are checked against its body before its state is opened.
// Bodies are read within BodyTimeout, and MaxConcurrentRequests and
// MaxBufferedBytes bound what is held at once, the answers read to be
// sealed included (budget.go); a client that reads such an answer, or an
// event of it, more slowly than WriteTimeout allows is cut off.
//
// What the proxy and the upstream could read differently is refused: a
// batch, a body that is not one JSON object, a member named twice, a member
// named like a JSON-RPC member or like requestState, name, arguments or uri
// in another case, with '_' or '-', or under NFKC and case folding
// (mcpdigest.Fold; decoders such as Go's encoding/json match names
// regardless of case; pydantic models with camelCase aliases and
// populate_by_name, as in the Python SDK, read request_state too; others
// fold names by str.casefold or NFKC), and on
// the three methods a member named like inputResponses in another spelling.
// Trailers, and other spellings of the headers the proxy owns or checks,
// never reach the upstream.
package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/sealer"
)

// Sealer seals and opens states, and records the outcomes of those it
// consumed: *client.Client.
type Sealer interface {
	Seal(ctx context.Context, r client.SealRequest) (string, time.Time, error)
	Open(ctx context.Context, r client.OpenRequest) (*client.Opened, error)
	Record(ctx context.Context, state string, outcome []byte) error
}

var _ Sealer = (*client.Client)(nil)

// Proxy is the HTTP handler of the MCP endpoint.
type Proxy struct {
	cfg      Config
	sealer   Sealer
	upstream *url.URL
	audience string
	rp       *httputil.ReverseProxy
	metrics  *metrics
	log      *slog.Logger
	// slots holds a token per request being served (MaxConcurrentRequests);
	// buffered is the budget of the bytes held (MaxBufferedBytes), where an
	// answer waits for room up to roomWait (WriteTimeout).
	slots    chan struct{}
	buffered *budget
	roomWait time.Duration
}

// New returns the proxy of cfg, which must be valid, calling s.
func New(cfg Config, s Sealer) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Upstream)
	p := &Proxy{cfg: cfg, sealer: s, upstream: u, audience: cfg.audience(), metrics: newMetrics(), log: cfg.Logger,
		slots: make(chan struct{}, cfg.MaxConcurrentRequests), roomWait: cfg.WriteTimeout}
	p.buffered = newBudget(cfg.MaxBufferedBytes, p.metrics.bufferGauges())
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = cfg.UpstreamHeaderTimeout
	transport.MaxIdleConnsPerHost = 256
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := *p.upstream
			out.RawQuery = pr.In.URL.RawQuery
			pr.Out.URL, pr.Out.Host = &out, ""
			// The proxy reads the bodies it seals in: no compression.
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:      transport,
		FlushInterval:  -1,
		ModifyResponse: p.response,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// exchange is what the response to a call needs: the call, who made it,
// and the state it carried as opened (nil when none), whose flow the next
// round continues; when that open consumed the state for an outcome, the
// outcome the client got (keep). held reserves the answer's bytes while the
// proxy holds them, and the answer kept; rc sets the deadline of their
// writing.
type exchange struct {
	call      *call
	principal string
	opened    *client.Opened
	answer    []byte
	held      *reservation
	events    *reservation // the SSE event being read or written
	rc        *http.ResponseController
}

type exchangeKey struct{}

// ServeHTTP judges a request, forwards it and rewrites the response.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case p.slots <- struct{}{}:
		p.metrics.inflight.Inc()
		defer func() { <-p.slots; p.metrics.inflight.Dec() }()
	default:
		p.overloaded(w, "concurrency")
		return
	}
	p.dropOwnedHeaders(r.Header)
	if asksUpgrade(r.Header) {
		p.refuse(w, nil, "upgrade", http.StatusBadRequest, errUpgrade)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete, http.MethodOptions:
		// GET streams, DELETE, CORS preflights: as they are, without a body
		// the proxy would not read.
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			p.refuse(w, nil, "body_without_post", http.StatusBadRequest, errBodyWithoutPost)
			return
		}
		p.metrics.request("other", "passed")
		p.rp.ServeHTTP(w, r)
		return
	default:
		w.Header().Set("Allow", allowedMethods)
		p.refuse(w, nil, "http_method", http.StatusMethodNotAllowed, errHTTPMethod)
		return
	}
	if encoded(r.Header) {
		p.refuse(w, nil, "encoded_body", http.StatusUnsupportedMediaType, &requestError{-32600, "invalid request: compressed bodies are not accepted"})
		return
	}
	body, held, ok := p.readBody(w, r)
	if !ok {
		return
	}
	defer held.release()
	c, err := parseCall(body)
	if err != nil {
		// parseCall refuses with a *requestError; anything else (none today)
		// is refused as unparsable rather than handed on as a nil one.
		var re *requestError
		if !errors.As(err, &re) {
			re = errParse
		}
		var id json.RawMessage
		if c != nil {
			id = c.id
		}
		p.refuse(w, id, refusal(re), http.StatusBadRequest, re)
		return
	}
	if c.binding == nil && (c.id == nil || c.method == "") {
		p.metrics.request(methodLabel(c.method), "passed")
		p.forward(w, r, body) // a notification, or a client's response: no answer to judge
		return
	}
	if c.binding == nil {
		// The answer to any other request is read, for the spec's gate only.
		x := &exchange{call: c, held: p.buffered.reserve(kindResponse), rc: http.NewResponseController(w)}
		defer func() { x.held.release(); x.events.release() }()
		p.metrics.request(methodLabel(c.method), "passed")
		p.forward(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x)), body)
		return
	}
	// A one-time round's answers come with its state: without one, they
	// would reach an upstream that asks without a state as often as they
	// are sent, past the one open of the proxy's own state.
	if c.answered && !c.hasState && p.cfg.Policy.oneTime(c.method, c.target()) {
		p.refuse(w, c.id, "one_time_answers_without_state", http.StatusBadRequest, errAnswersWithoutState)
		return
	}
	// What the upstream would refuse is refused before the Open, which
	// spends a latest-only round.
	if err := checkHeaders(r.Header, c); err != nil {
		p.refuse(w, c.id, "header_mismatch", http.StatusBadRequest, err)
		return
	}
	c.binding.Digest = p.bind(c.binding.Digest)
	who, ok := p.principal(r)
	if !ok {
		p.refuse(w, c.id, "no_principal", http.StatusUnauthorized, &requestError{-32600, "invalid request: the caller is not identified"})
		return
	}
	var opened *client.Opened
	if c.hasState {
		var err error
		if opened, err = p.open(r.Context(), c, who); err != nil {
			p.openFailed(w, c, err)
			return
		}
		if opened.Outcome != nil {
			p.replay(w, c, opened.Outcome)
			return
		}
		body = c.withState(opened.Payload)
	} else {
		body = c.forwarded(body)
	}
	x := &exchange{call: c, principal: who, opened: opened, held: p.buffered.reserve(kindResponse),
		rc: http.NewResponseController(w)}
	defer func() { x.held.release(); x.events.release() }()
	if opened != nil && opened.Recording {
		// The answer is out before the sealer is asked to keep it, also
		// when the client was cut off on the way (ReverseProxy then panics
		// with http.ErrAbortHandler): its retry gets it.
		defer func() {
			x.rc.Flush()
			p.record(r.Context(), x)
		}()
	}
	if !p.holdForwarded(held, c, len(body)) {
		x.recordNone()
		p.overloaded(w, "buffer")
		return
	}
	p.metrics.request(methodLabel(c.method), "forwarded")
	p.forward(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x)), body)
}

// holdForwarded reserves, beside the body received, the copy of it that
// the upstream gets (n bytes) when it is one: with the params' encoding
// that the call keeps, and the arguments rewritten in their digest's form.
func (p *Proxy) holdForwarded(held *reservation, c *call, n int) bool {
	switch {
	case c.rewritten:
		return held.tryGrow(3 * int64(n))
	case c.hasState:
		return held.tryGrow(2 * int64(n))
	}
	return true
}

// bind returns the digest a state of this proxy is bound to: the request's
// digest d with the proxy's audience folded in, so that a state sealed in
// front of one upstream does not open in front of another of the same
// tenant. It is a digest of the caller's own (FORMAT.md, "Request digest"),
// domain-separated from the request digest.
func (p *Proxy) bind(d []byte) []byte {
	h := sha256.New()
	h.Write([]byte("mcp-sealer/v1 proxy audience\x00"))
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(p.audience))))
	h.Write([]byte(p.audience))
	h.Write(d)
	return h.Sum(nil)
}

// allowedMethods are the HTTP methods of the Streamable HTTP transport, and
// OPTIONS for browsers' CORS preflights. Any other (another case of POST, PUT,
// PATCH) is refused: an upstream matching methods regardless of case would
// read a body the proxy never inspected.
const allowedMethods = "GET, POST, DELETE, OPTIONS"

var (
	errHTTPMethod          = &requestError{-32600, "invalid request: HTTP method not allowed (GET, POST, DELETE, OPTIONS)"}
	errBodyWithoutPost     = &requestError{-32600, "invalid request: a request body is accepted on POST only"}
	errUpgrade             = &requestError{-32600, "invalid request: protocol upgrades are not accepted"}
	errAnswersWithoutState = &requestError{-32602, "invalid params: the inputResponses of a one-time request come with its requestState"}
)

// forward sends body to the upstream in place of the request's own, without
// the request's trailers or transfer coding: the upstream gets the body the
// proxy judged, with its length, and nothing after it.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	r.TransferEncoding, r.Trailer = nil, nil
	p.rp.ServeHTTP(w, r)
}

// open opens the call's state, whose payload is the upstream's original.
// The binding carries the keys of the call's inputResponses, which must be
// those its round asked.
func (p *Proxy) open(ctx context.Context, c *call, who string) (*client.Opened, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.SealerTimeout)
	defer cancel()
	start := time.Now()
	o, err := p.sealer.Open(ctx, client.OpenRequest{State: c.state, Principal: who, Request: *c.binding,
		RecordOutcome: p.cfg.RecordOutcomes})
	p.metrics.sealerCall("open", reasonOf(err), time.Since(start))
	return o, err
}

// openFailed answers a call whose state did not open: -32602 for a refused
// state, a retryable error for a sealer that could not judge it, or for a
// retry of a call that still runs (IN_PROGRESS).
func (p *Proxy) openFailed(w http.ResponseWriter, c *call, err error) {
	reason := reasonOf(err)
	if errors.Is(err, client.ErrOutcomeConflict) {
		// Answered before with other inputResponses: the outcome is not this
		// retry's, and the upstream is not called for it either.
		p.log.Info("state refused", "method", c.method, "reason", reason)
		p.metrics.request("refused", "state_"+reason)
		writeJSON(w, http.StatusConflict, errorResponse(c.id, -32602, "invalid requestState: answered before for other inputResponses",
			map[string]string{"reason": "outcome_conflict"}))
		return
	}
	if client.Rejected(err) || errors.Is(err, client.ErrInvalidArgument) {
		p.log.Info("state refused", "method", c.method, "reason", reason)
		p.refuse(w, c.id, "state_"+reason, http.StatusBadRequest, &requestError{-32602, "invalid params: requestState rejected"})
		return
	}
	w.Header().Set("Retry-After", "1")
	if errors.Is(err, client.ErrInProgress) {
		p.inProgress(w, c)
		return
	}
	p.log.Warn("sealer could not open a state", "method", c.method, "reason", reason, "err", errText(err))
	p.metrics.request(methodLabel(c.method), "unavailable")
	writeJSON(w, http.StatusServiceUnavailable, errorResponse(c.id, -32603,
		"requestState could not be checked now: retry later", map[string]any{"retryable": true}))
}

// refuse answers a request the upstream never sees.
func (p *Proxy) refuse(w http.ResponseWriter, id json.RawMessage, why string, status int, e *requestError) {
	p.metrics.request("refused", why)
	writeJSON(w, status, errorResponse(id, e.code, e.message, nil))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// response seals the state of a result to one of the three methods: in a
// JSON body, or in the SSE events of the stream.
func (p *Proxy) response(resp *http.Response) error {
	// Past a 101 every byte would bypass the proxy: an error, answered 502.
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return errUpstreamUpgraded
	}
	x, _ := resp.Request.Context().Value(exchangeKey{}).(*exchange)
	if x == nil {
		return nil
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType != "application/json" && mediaType != "text/event-stream" {
		if resp.ContentLength == 0 {
			return nil // no body: no state
		}
		return p.replace(resp, x, errUpstreamMediaType)
	}
	if encoded(resp.Header) {
		return p.replace(resp, x, errUpstreamEncoded)
	}
	ctx := resp.Request.Context()
	if mediaType == "text/event-stream" {
		// The events are rewritten: the upstream's length is not theirs.
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		events := newEventReader(resp.Body, p.cfg.MaxResponseBytes,
			func(data []byte) []byte {
				if len(bytes.TrimSpace(data)) == 0 {
					return nil // no message (a priming event): no state
				}
				msg, err := parseObject(data)
				if err != nil {
					return p.failure(x, errUpstreamEvent)
				}
				room := p.keepRoom(x, len(data))
				if err := x.held.grow(ctx, room, p.roomWait); err != nil {
					return p.dropped(x, err)
				}
				out := p.sealMessage(ctx, x, msg)
				if out != nil {
					x.keep(resp.StatusCode, out)
				} else {
					x.keep(resp.StatusCode, data)
				}
				x.held.shrink(room - min(int64(cap(x.answer)), room))
				return out
			},
			func(err error) []byte {
				if errors.Is(err, errBufferFull) {
					return append(append([]byte("data: "), p.dropped(x, err)...), '\n', '\n')
				}
				p.log.Warn("upstream event stream failed", "method", x.call.method, "err", errText(err))
				return append(append([]byte("data: "), p.failure(x, err)...), '\n', '\n')
			})
		x.events = p.buffered.reserve(kindResponse)
		events.bounds = &eventBounds{
			ctx:     ctx,
			held:    x.events,
			wait:    p.roomWait,
			room:    func(data []byte) int64 { return judgeRoom(len(data)) + p.sealRoom(data) },
			rc:      x.rc,
			timeout: p.cfg.WriteTimeout,
			cut:     p.metrics.cut.Inc,
		}
		resp.Body = events
		return nil
	}
	room := func(n int) int64 { return judgeRoom(n) + p.keepRoom(x, n) }
	data, err := p.readAnswer(ctx, resp, x.held, room)
	resp.Body.Close()
	switch {
	case errors.Is(err, errBufferFull):
		return p.shed(resp, x, err)
	case err != nil:
		return p.replace(resp, x, err)
	}
	data = bytes.TrimPrefix(data, byteOrderMark) // as lenient decoders do
	if len(bytes.TrimSpace(data)) == 0 {
		p.hold(resp, x, data)
		return nil
	}
	if err := x.held.grow(ctx, p.sealRoom(data), p.roomWait); err != nil {
		return p.shed(resp, x, err)
	}
	msg, err := parseObject(data)
	if err != nil {
		return p.replace(resp, x, errUpstreamNotObject)
	}
	if sealed := p.sealMessage(ctx, x, msg); sealed != nil {
		data = sealed
	}
	x.keep(resp.StatusCode, data)
	p.hold(resp, x, data)
	return nil
}

// hold makes data, which x.held reserves with the answer x keeps, the body
// of resp: what it holds beyond them is given back, and the client gets
// WriteTimeout to read it. Its bytes are given back once written or cut.
func (p *Proxy) hold(resp *http.Response, x *exchange, data []byte) {
	n := int64(cap(data))
	x.held.resize(n + int64(cap(x.answer)))
	h := &heldBody{Reader: bytes.NewReader(data), p: p, held: x.held, n: n, rc: x.rc,
		deadline: time.Now().Add(p.cfg.WriteTimeout)}
	x.rc.SetWriteDeadline(h.deadline)
	resp.Body = h
	resp.ContentLength = int64(len(data))
	resp.Header.Set("Content-Length", strconv.Itoa(len(data)))
}

// shed makes resp the proxy's error for an answer dropped for want of room
// in the budget (errBufferFull), or because the client left while it
// waited: 503, and the exchange records no outcome.
func (p *Proxy) shed(resp *http.Response, x *exchange, err error) error {
	resp.Body.Close()
	x.held.release() // what was read of the answer
	resp.StatusCode, resp.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Type", "application/json")
	setBody(resp, p.dropped(x, err))
	return nil
}

// dropped is the JSON-RPC error the caller gets instead of an answer the
// proxy had no room to hold; it is logged once, here, and records none.
func (p *Proxy) dropped(x *exchange, err error) []byte {
	p.log.Warn("answer dropped: no room in max-buffered-bytes", "method", x.call.method, "err", errText(err))
	p.metrics.request(methodLabel(x.call.method), "answer_overloaded")
	x.recordNone()
	return errorResponse(x.call.id, -32603, "the proxy had no room to hold the server's answer, which is lost", nil)
}

// byteOrderMark is UTF-8's, which JSON and SSE decoders may skip.
var byteOrderMark = []byte("\uFEFF")

var (
	errUpstreamEncoded   = errors.New("proxy: the upstream compressed a response the proxy must read")
	errUpstreamUpgraded  = errors.New("proxy: the upstream switched protocols (101), which Streamable HTTP never does")
	errUpstreamMediaType = errors.New("proxy: the upstream answered in a media type the proxy does not read (application/json and text/event-stream only)")
	errUpstreamNotObject = errors.New("proxy: the upstream's JSON response is not one JSON object without repeated members")
	errUpstreamEvent     = errors.New("proxy: the upstream's SSE event is not one JSON object without repeated members")
	errUpstreamResult    = errors.New("proxy: the upstream's message has a member named like result, requestState or inputRequests in another spelling, or a result that is not one object without repeated members")
	errResponseTooLarge  = errors.New("proxy: the upstream's response exceeds the response size cap")
	errStateTooLarge     = errors.New("proxy: the upstream's requestState exceeds the state size cap")
	errStateNotString    = errors.New("proxy: the upstream's requestState is not a string")
	errInputRequests     = errors.New("proxy: the upstream's inputRequests is not one JSON object without repeated keys")
)

// sealMessage returns the JSON-RPC message msg with the state of its result
// sealed, a JSON-RPC error in its place when sealing failed, or nil when it
// carries no state.
func (p *Proxy) sealMessage(ctx context.Context, x *exchange, msg *object) []byte {
	// A client's decoder may read what the proxy would not: a member in
	// another case (encoding/json), a result that is not one object.
	if msg.variant(envelopeNames...) {
		return p.failure(x, errUpstreamResult)
	}
	raw, ok := msg.get("result")
	if !ok {
		return nil
	}
	result, err := parseObject(raw)
	if err != nil || result.variant("requestState", "inputRequests", "resultType") {
		return p.failure(x, errUpstreamResult)
	}
	if refused := p.judge(x, result); refused != nil {
		return refused
	}
	if x.call.binding == nil {
		return nil // the answer to another method: judged, never sealed
	}
	var state string
	if st, ok := result.get("requestState"); ok && !bytes.Equal(st, []byte("null")) {
		if json.Unmarshal(st, &state) != nil {
			return p.failure(x, errStateNotString)
		}
	}
	if len(state) > p.cfg.MaxStateBytes {
		return p.failure(x, fmt.Errorf("%w: %d bytes, over --max-state-bytes %d", errStateTooLarge, len(state), p.cfg.MaxStateBytes))
	}
	asked, err := memberNames(result, "inputRequests")
	if err != nil {
		return p.failure(x, errInputRequests)
	}
	// A round that asks input without a state of the upstream's gets one of
	// the proxy's own, with no payload, so that its answers are bound too;
	// it is removed from the retry before the upstream sees it.
	if state == "" && len(asked) == 0 {
		return nil
	}
	if asked == nil {
		asked = []string{} // null: the round asks nothing, and that is bound too
	}
	sealed, err := p.seal(ctx, x, []byte(state), asked)
	if errors.Is(err, sealer.ErrFlowExpired) || errors.Is(err, sealer.ErrFlowExhausted) {
		return p.flowEnded(x, err)
	}
	if err != nil {
		return p.failure(x, err)
	}
	v, _ := json.Marshal(sealed)
	result.set("requestState", v)
	msg.set("result", result.encode())
	var out bytes.Buffer
	if err := json.Compact(&out, msg.encode()); err != nil {
		return p.failure(x, err)
	}
	return out.Bytes()
}

// seal seals the upstream's state for the caller and the request, as the
// round of a flow that asks the input keys asked: the round after the state
// the call carried, or the first.
func (p *Proxy) seal(ctx context.Context, x *exchange, state []byte, asked []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.SealerTimeout)
	defer cancel()
	start := time.Now()
	sealed, _, err := p.sealer.Seal(ctx, client.SealRequest{Principal: x.principal, Request: *x.call.binding,
		Payload: state, TTL: p.cfg.Policy.TTL, OneTime: p.cfg.Policy.oneTime(x.call.method, x.call.target()),
		Flow: p.cfg.Policy.flow(asked, x.opened)})
	p.metrics.sealerCall("seal", reasonOf(err), time.Since(start))
	return sealed, err
}

// failure is the JSON-RPC error the caller gets instead of a response
// whose state could not be sealed; it is logged once, here.
func (p *Proxy) failure(x *exchange, err error) []byte {
	p.log.Warn("state not sealed", "method", x.call.method, "reason", reasonOf(err), "err", errText(err))
	p.metrics.request(methodLabel(x.call.method), "seal_failed")
	x.recordNone()
	return errorResponse(x.call.id, -32603, "the server's requestState could not be sealed", nil)
}

// flowEnded is the JSON-RPC error the caller gets instead of a next round
// that its flow does not allow: past the flow's deadline, or beyond the
// tenant's rounds. It is logged once, here.
func (p *Proxy) flowEnded(x *exchange, err error) []byte {
	p.log.Info("flow ended", "method", x.call.method, "reason", reasonOf(err))
	p.metrics.request(methodLabel(x.call.method), "flow_ended")
	return errorResponse(x.call.id, -32602, "invalid params: the request has no round left (its deadline passed or its rounds are used)", nil)
}

// replace makes resp a JSON-RPC error for err: HTTP 502 in place of a
// success, the upstream's own status in place of its error (a 404 still
// tells the client its session is gone).
func (p *Proxy) replace(resp *http.Response, x *exchange, err error) error {
	resp.Body.Close()
	x.held.release() // what was read of the answer
	if resp.StatusCode < 400 {
		resp.StatusCode, resp.Status = http.StatusBadGateway, "502 Bad Gateway"
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Type", "application/json")
	setBody(resp, p.failure(x, err))
	return nil
}

func setBody(resp *http.Response, data []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.Header.Set("Content-Length", strconv.Itoa(len(data)))
}

// upstreamError answers a request the upstream did not answer.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var id json.RawMessage
	if x, _ := r.Context().Value(exchangeKey{}).(*exchange); x != nil {
		id = x.call.id
	}
	p.log.Warn("upstream failed", "err", errText(err))
	p.metrics.request("upstream", "error")
	writeJSON(w, http.StatusBadGateway, errorResponse(id, -32603, "the MCP server did not answer", nil))
}

// reasonOf names an error for the proxy's logs and metrics: a reason of
// the sealer as the sealer names it (client.Reason), or one of the proxy's
// own.
func reasonOf(err error) string {
	if r := client.Reason(err); r != "" {
		return r
	}
	switch {
	case err == nil:
		return "OK"
	case errors.Is(err, client.ErrNoFlow):
		return "NO_FLOW"
	case errors.Is(err, context.DeadlineExceeded):
		return "TIMEOUT"
	case errors.Is(err, errStateTooLarge):
		return "STATE_TOO_LARGE"
	case errors.Is(err, errResponseTooLarge), errors.Is(err, errEventTooLarge):
		return "RESPONSE_TOO_LARGE"
	}
	return "ERROR"
}

// errText is an error's message for the log: the sealer's and the proxy's
// own messages name no state, payload or principal.
func errText(err error) string { return err.Error() }

// refusal names a request error for metrics.
func refusal(e *requestError) string {
	switch e {
	case errBatch:
		return "batch"
	case errEnvelope:
		return "envelope_case_variant"
	case errStateParam:
		return "state_param"
	case errBindName:
		return "binding_param_variant"
	case errBindParams:
		return "unbindable"
	case errInputsName:
		return "input_responses_variant"
	case errInputs:
		return "input_responses"
	}
	return "parse"
}

func methodLabel(m string) string {
	if carriesState(m) {
		return m
	}
	return "other"
}
