// Package client is the Go client of the sealer: Seal and Open over gRPC,
// with the sealer's error reasons mapped back to Go sentinel errors, and the
// request digest computed in process, so that an MCP server protects its
// requestState in a few lines per handler:
//
//	bind := client.ToolCall(params.Name, params.Arguments)
//	bind.Responded = client.InputKeys(params.InputResponses) // the retry's answers
//	opened, err := sc.Open(ctx, client.OpenRequest{State: state, Principal: who, Request: bind})
//	if client.Rejected(err) {
//		// answer the MCP client with JSON-RPC invalid params (-32602)
//	}
//
// A one-time tool (a payment) records the answer it sends, so that a retry
// whose answer was lost on the way back gets that answer again instead of
// ledger.ErrConsumed, and the tool acts once (README, "Recorded outcomes"):
//
//	bind.Answers = ... // mcpdigest.Answers of the retry's inputResponses
//	opened, err := sc.Open(ctx, client.OpenRequest{..., Request: bind, RecordOutcome: true})
//	// err: Rejected (ErrOutcomeConflict among them: the state ran with other
//	// answers), or ErrInProgress (the first run goes on: "retry later")
//	if opened.Outcome != nil {
//		// answer opened.Outcome as it is, without acting
//	}
//	answer := act()
//	if opened.Recording {
//		err := sc.Record(ctx, opened.State, answer) // on failure: log, answer anyway
//	}
//
// The module client/gosdk records and replays the answers of the MCP Go
// SDK's tools in one line each.
//
// A request that needs several rounds of input is best sealed as a flow
// (FlowRequest): its rounds share one deadline, the retry must answer exactly
// the input keys its round asked, and, latest-only, a round that was
// answered never opens again:
//
//	flow := client.FlowRequest{LatestOnly: true, Asked: client.InputKeys(inputRequests)}
//	state, _, err := sc.Seal(ctx, client.SealRequest{Principal: who, Request: bind,
//		Payload: progress, Flow: flow.After(opened)}) // opened: nil in round 1
//
// Arguments holding two member names equal under case folding ("Item" and
// "item"), which the digest binds alike in either order while
// encoding/json reads the last, are refused by Seal and Open before any
// call to the sealer (ErrNamesCollide, for which Rejected is true).
//
// # Tokens only over TLS
//
// A call that carries a bearer token (any authorization metadata: from the
// context with metadata.AppendToOutgoingContext, or added by an
// interceptor) goes without TLS only to loopback (127.0.0.0/8, ::1,
// localhost, or a Unix socket), where both the connection's peer and the
// :authority it names must be. Anywhere else Seal and Open fail with
// ErrPlaintextToken before anything is sent, whether the connection came
// from Dial or was given to New. Per-RPC credentials given to the
// connection (grpc.WithPerRPCCredentials) are grpc's to check: it refuses,
// on every connection without TLS, those that require transport security,
// as oauth's do; credentials of your own that do not are not seen here.
//
// It links no MCP SDK and nothing of the service's storage: the adapter for
// the official MCP Go SDK (bindings from its request types, with the input
// keys of the retry; its JSON-RPC error) is the module client/gosdk.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/reasons"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// Errors of the sealer service, one for each reason it sends, so that a
// caller matches any of them from this one import. Where the core or the
// ledger has the sentinel (sealer.ErrExpired, ledger.ErrConsumed...), the
// error here is that one: errors.Is reads the same in process and over the
// network.
var (
	// ErrInvalidState means the state is not an authentic state of this
	// sealer and tenant. Rejected.
	ErrInvalidState = sealer.ErrInvalid
	// ErrExpired means the state is past its expiry. Rejected.
	ErrExpired = sealer.ErrExpired
	// ErrPrincipalMismatch means the state was issued to another principal.
	// Rejected.
	ErrPrincipalMismatch = sealer.ErrPrincipalMismatch
	// ErrRequestMismatch means the state was issued for another request.
	// Rejected.
	ErrRequestMismatch = sealer.ErrRequestMismatch
	// ErrInputMismatch means the retry answers other input keys than the
	// state's round asked. Rejected.
	ErrInputMismatch = sealer.ErrInputMismatch
	// ErrFlowExpired means the state's flow is past its deadline. Rejected.
	ErrFlowExpired = sealer.ErrFlowExpired
	// ErrFlowExhausted means the state's flow used its rounds. Rejected.
	ErrFlowExhausted = sealer.ErrFlowExhausted
	// ErrAlreadyConsumed means the state opens once and was opened before
	// (or, latest-only, a later round of its flow was). Rejected.
	ErrAlreadyConsumed = ledger.ErrConsumed
	// ErrOutcomeConflict means an Open with RecordOutcome presented a state
	// that an earlier open consumed with other answers than the retry's
	// (Binding.Answers; one of the two without any included): the outcome
	// recorded for it answers other inputResponses, and is not given. The
	// same retry is refused the same way: answer it without running the
	// handler. It is ledger.ErrConflict, which wraps ErrAlreadyConsumed.
	// Rejected.
	ErrOutcomeConflict = ledger.ErrConflict
	// ErrLedgerUnavailable means the one-time ledger could not answer, so
	// the open was refused (fail closed); retry later.
	ErrLedgerUnavailable = ledger.ErrUnavailable

	// ErrInvalidArgument means the sealer refused the request as malformed.
	// It is sealer.ErrArgument, which the core returns for the same.
	ErrInvalidArgument = sealer.ErrArgument
	// ErrUnauthenticated means the sealer did not accept the credentials.
	ErrUnauthenticated = reasons.ErrUnauthenticated
	// ErrResourceExhausted means a tenant limit was hit; retry later.
	ErrResourceExhausted = reasons.ErrResourceExhausted
	// ErrKeysUnavailable means the sealer has no keys loaded yet; retry.
	ErrKeysUnavailable = reasons.ErrKeysUnavailable
	// ErrInProgress means an Open with RecordOutcome presented a state
	// that an earlier open consumed, whose handler had not recorded its
	// outcome by the time the sealer stopped waiting for it (near the
	// retry's deadline, or after its --outcome-wait): the handler may still
	// run. Answer the MCP client that the
	// request is still in progress, and never run the handler: a retry
	// later gets the outcome. It is ledger.ErrPending; Rejected is false
	// for it.
	ErrInProgress = ledger.ErrPending
	// ErrNoFlow means a Seal asked for a flow and the sealer answered
	// without one: a release that predates flows, which ignores the request.
	// The state it sealed is not returned (fail closed).
	ErrNoFlow = errors.New("sealer: the sealer sealed no flow (a release without flows?)")
	// ErrNamesCollide means a binding's arguments hold, in one object at any
	// depth, two member names equal under case folding ("Item" and "item":
	// mcpdigest.NamesCollide). The digest binds both orders of such members
	// alike, while a handler that decodes the arguments with encoding/json
	// reads the last of them, so Seal and Open refuse the binding before
	// any call to the sealer (FORMAT.md, "Case in the arguments"). It is the
	// MCP client's error: Rejected is true for it. It wraps
	// sealer.ErrArgument, as the digest's other refusals do.
	ErrNamesCollide = fmt.Errorf("%w: arguments hold member names that differ only in case", sealer.ErrArgument)
)

// Rejected reports whether err means the request must be refused to the
// MCP client (JSON-RPC invalid params, -32602): a state not authentic,
// expired, another principal's, another request's, already consumed (by an
// open with other answers too: ErrOutcomeConflict),
// answered with other input keys than its round asked, or of a flow past
// its deadline or out of rounds (from Open, or from a Seal that continues
// it); or arguments whose member names differ only in case
// (ErrNamesCollide, from Seal or Open). Other errors are the sealer's or the
// network's; the MCP server should report them as its own failure.
func Rejected(err error) bool {
	if errors.Is(err, ErrNamesCollide) {
		return true
	}
	for _, r := range reasons.Table {
		if reasons.Rejects(r.Reason) && errors.Is(err, r.Err) {
			return true
		}
	}
	return false
}

// Reason returns the reason of an error of the sealer as the sealer names
// it in ErrorInfo.reason, its metrics and its README ("EXPIRED",
// "ALREADY_CONSUMED"), whether the error came over the network or from the
// core in process; "" for any other error. A status without one of the
// sealer's reasons (REASON_INTERNAL, a deadline) gives "".
func Reason(err error) string {
	if r, ok := reasons.Of(err); ok {
		return reasons.Text(r.Reason)
	}
	return ""
}

// Client calls a sealer over gRPC. It is safe for concurrent use.
type Client struct {
	rpc  sealerv1.SealerClient
	conn *grpc.ClientConn
}

// New returns a client over an existing connection (with whatever TLS and
// per-call credentials it carries). Its calls send a token in their
// metadata without TLS only to loopback (ErrPlaintextToken).
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: sealerv1.NewSealerClient(conn)}
}

// Dial connects to the sealer at target. Give it TLS
// (grpc.WithTransportCredentials) unless the sealer is on loopback: without
// TLS, calls carrying a token fail with ErrPlaintextToken off loopback.
func Dial(target string, opts ...grpc.DialOption) (*Client, error) {
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("sealer client: %v", err)
	}
	return &Client{rpc: sealerv1.NewSealerClient(conn), conn: conn}, nil
}

// Close closes a connection made by Dial.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Binding names the request a state belongs to.
type Binding struct {
	// Method and Params, the MCP request's params as received (only name,
	// arguments and uri count); or Digest, 32 bytes of the caller's own.
	Method string
	Params map[string]any
	Digest []byte
	// Responded is, on Open, the keys of the retry's inputResponses
	// (InputKeys): empty, not nil, for a retry without any. Nil means not
	// known, and a state whose round asked input keys then does not open
	// (sealer.ErrInputMismatch): the client does not read them from Params.
	// The bindings of client/gosdk fill it from the SDK's params. Seal
	// ignores it.
	Responded []string
	// Answers is, on an Open with RecordOutcome, the answers digest of the
	// retry's inputResponses (mcpdigest.Answers: 32 bytes; nil for none).
	// The open that consumes the state keeps it, and a later open of the
	// state with other answers, or none where it had some, fails with
	// ErrOutcomeConflict instead of getting its outcome (README, "Recorded
	// outcomes"). Digest the answers the handler acts on. The bindings of
	// client/gosdk fill it from the SDK's params. Seal ignores it.
	Answers []byte
}

// InputKeys returns the keys of an inputRequests or inputResponses object,
// sorted, for FlowRequest.Asked and Binding.Responded. It never returns nil:
// a nil map (no inputResponses at all) is the empty set of keys.
func InputKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Answers returns the answers digest of a retry's inputResponses as the
// handler holds them decoded, for Binding.Answers: m encoded with
// encoding/json, then digested by mcpdigest.Answers (FORMAT.md, "Recorded
// outcomes"). A nil or empty map is the digest of no answers. Its error,
// for values encoding/json refuses, wraps ErrInvalidArgument.
func Answers[M ~map[string]V, V any](m M) ([]byte, error) {
	var text []byte
	if len(m) > 0 {
		var err error
		if text, err = json.Marshal(m); err != nil {
			return nil, fmt.Errorf("%w: inputResponses: %v", ErrInvalidArgument, err)
		}
	}
	d, err := mcpdigest.Answers(text)
	if err != nil {
		return nil, err
	}
	return d[:], nil
}

// ToolCall binds to a tools/call request: its tool name and its arguments
// as received (JSON text; nil or empty when absent).
func ToolCall(name string, arguments json.RawMessage) Binding {
	params := map[string]any{"name": name}
	if len(arguments) > 0 {
		params["arguments"] = arguments // as received; canonicalized by the digest
	}
	return Binding{Method: mcpdigest.ToolsCall, Params: params}
}

// PromptGet binds to a prompts/get request: its prompt name and arguments
// (nil when absent).
func PromptGet(name string, arguments map[string]string) Binding {
	params := map[string]any{"name": name}
	if arguments != nil {
		args := make(map[string]any, len(arguments))
		for k, v := range arguments {
			args[k] = v
		}
		params["arguments"] = args
	}
	return Binding{Method: mcpdigest.PromptsGet, Params: params}
}

// ResourceRead binds to a resources/read request: its uri.
func ResourceRead(uri string) Binding {
	return Binding{Method: mcpdigest.ResourcesRead, Params: map[string]any{"uri": uri}}
}

// proto sends the binding as its digest, computed here by the code the sealer
// runs on params (package mcpdigest): 32 bytes on the wire instead of the
// params, twice per round trip, and no Struct to encode or decode on either
// side. Other languages send params and let the sealer digest them; the
// digests are the same (FORMAT.md, "Request digest"). It refuses arguments
// whose names collide (ErrNamesCollide); a Digest of the caller's own is
// sent as it is.
func (b Binding) proto() (*sealerv1.Binding, error) {
	if b.Digest != nil {
		return &sealerv1.Binding{Digest: b.Digest}, nil
	}
	d, err := b.RequestDigest()
	switch {
	case errors.Is(err, ErrInvalidArgument):
		return nil, err // the core's message already says so
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if b.namesCollide() {
		return nil, ErrNamesCollide
	}
	return &sealerv1.Binding{Digest: d[:]}, nil
}

// namesCollide applies mcpdigest.NamesCollide to the arguments of Params,
// which the digest has already read: JSON text as received, or a value
// encoding/json encodes.
func (b Binding) namesCollide() bool {
	m, _ := mcpdigest.Salient(b.Method)
	v, ok := b.Params[m.Arguments]
	if m.Arguments == "" || !ok {
		return false
	}
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return false // the digest encoded it: not reached
		}
	}
	return mcpdigest.NamesCollide(raw)
}

// RequestDigest returns the MCP request digest of Method and Params
// (mcpdigest.Decoded), which the client sends in their place.
func (b Binding) RequestDigest() (sealer.Digest, error) {
	return mcpdigest.Decoded(b.Method, b.Params)
}

// SealRequest is what Seal binds and carries.
type SealRequest struct {
	// Principal is who the request comes from, as the caller's own
	// authentication says: the client has no default and maps no caller
	// to a principal (the sealer refuses an empty one, ErrInvalidArgument).
	// Unauthenticated callers given one shared principal can present each
	// other's states; give them one no authenticated caller can have.
	Principal string
	Request   Binding
	Payload   []byte
	// TTL is the state's life; zero means the sealer's default. A state of a
	// flow expires no later than the flow's deadline.
	TTL time.Duration
	// OneTime makes the state open at most once.
	OneTime bool
	// Flow, when set, makes the state one round of a flow (FlowRequest).
	Flow *FlowRequest
}

// FlowRequest makes a state one round of a flow, a request that takes
// several rounds of input (FORMAT.md, "Flows"): round 1 of a new flow, or
// the round after the state Continues names.
type FlowRequest struct {
	// Continues is the state of the round before, exactly as the retry
	// carried it and Open accepted it (After sets it); empty starts a new
	// flow, with the deadline of the tenant's flow TTL. Seal refuses a
	// state of another principal or request, of a flow past its deadline
	// (sealer.ErrFlowExpired) or out of rounds (sealer.ErrFlowExhausted).
	Continues string
	// LatestOnly lets only the flow's latest round open: once a state of
	// round n opened, no state of round n or earlier opens again
	// (ledger.ErrConsumed), so the client can neither rewind nor fork the
	// flow. It costs a ledger call per Open, as OneTime does. Once a round
	// has it, every later round has it.
	LatestOnly bool
	// Asked is the keys of the inputRequests this round asks (InputKeys):
	// the retry must answer exactly those in its inputResponses, compared
	// as bytes (sealer.ErrInputMismatch). Nil leaves them unbound; empty
	// asks for none.
	Asked []string
}

// After returns f continuing the flow of the state that Open returned as o:
// the round after o's. With o nil (the request's first round: no state was
// opened), or o without a flow (a state sealed before its server used
// flows), it returns f as it is, which starts a new flow.
func (f FlowRequest) After(o *Opened) *FlowRequest {
	if o != nil && o.Flow != nil {
		f.Continues = o.State
	}
	return &f
}

// Flow is what the sealer says of a state's flow.
type Flow struct {
	// ID names the flow: the same in every round.
	ID sealer.FlowID
	// Round is the state's round, from 1.
	Round uint32
	// Deadline is the end of the flow: no state of it opens after it.
	Deadline time.Time
	// LatestOnly says whether only the flow's latest round opens.
	LatestOnly bool
}

// Seal returns a new requestState and its expiry. When r asks for a flow
// and the sealer answers without one, it returns ErrNoFlow and no state.
func (c *Client) Seal(ctx context.Context, r SealRequest) (string, time.Time, error) {
	b, err := r.Request.proto()
	if err != nil {
		return "", time.Time{}, err
	}
	req := &sealerv1.SealRequest{Principal: r.Principal, Request: b, Payload: r.Payload, OneTime: r.OneTime}
	if r.TTL != 0 {
		req.Ttl = durationpb.New(r.TTL)
	}
	if f := r.Flow; f != nil {
		req.Flow = &sealerv1.FlowRequest{Continues: f.Continues, LatestOnly: f.LatestOnly}
		if f.Asked != nil {
			req.Flow.Asked = &sealerv1.InputKeys{Keys: f.Asked}
		}
	}
	guard := new(tokenGuard)
	resp, err := c.rpc.Seal(ctx, req, grpc.PerRPCCredentials(guard))
	if err != nil {
		return "", time.Time{}, guard.errorOf(err)
	}
	if r.Flow != nil {
		f, err := flowOf(resp.GetFlow())
		if err == nil && r.Flow.LatestOnly && !f.LatestOnly {
			err = errors.New("sealer: the sealer sealed a flow that is not latest-only")
		}
		if err != nil {
			return "", time.Time{}, err
		}
	}
	return resp.GetRequestState(), resp.GetExpiresAt().AsTime(), nil
}

// flowOf reads the flow of a response: ErrNoFlow when there is none, an
// error when it is malformed.
func flowOf(f *sealerv1.Flow) (*Flow, error) {
	switch {
	case f == nil:
		return nil, ErrNoFlow
	case len(f.GetId()) != len(sealer.FlowID{}) || f.GetRound() == 0 || f.GetDeadline() == nil:
		return nil, errors.New("sealer: malformed flow in the sealer's response")
	}
	out := &Flow{Round: f.GetRound(), Deadline: f.GetDeadline().AsTime(), LatestOnly: f.GetLatestOnly()}
	copy(out.ID[:], f.GetId())
	return out, nil
}

// OpenRequest presents a state from a retry. Request.Responded carries the
// keys of the retry's inputResponses.
type OpenRequest struct {
	State string
	// Principal is the retry's, decided as for SealRequest.Principal.
	Principal string
	Request   Binding
	// RecordOutcome says that the caller records the answer it sends for
	// a one-time or latest-only state it consumes (Opened.Recording, then
	// Record), so that a retry of that state, checked as any other,
	// gets that answer (Opened.Outcome) instead of ledger.ErrConsumed
	// (README, "Recorded outcomes"). Such a retry, while the first
	// handler still runs, waits for its answer up to the context's
	// deadline, then fails with ErrInProgress; one whose Request.Answers
	// are not those of the open that consumed the state fails with
	// ErrOutcomeConflict at once. It is ignored for other states, and by a
	// sealer that keeps no outcomes.
	RecordOutcome bool
}

// Opened is what an open returns.
type Opened struct {
	Payload             []byte
	IssuedAt, ExpiresAt time.Time
	// Flow is the state's flow; nil when it has none.
	Flow *Flow
	// State is the state that opened, as given to Open: what a
	// FlowRequest continues (FlowRequest.After).
	State string
	// Recording says that this open consumed the state for an outcome
	// (OpenRequest.RecordOutcome): run the handler, then Record the
	// answer sent, whatever it is. Until then, retries of the state wait.
	Recording bool
	// Outcome, when not nil, is the answer recorded for the state by the
	// open that consumed it (Payload is then empty): answer it as it is,
	// without running the handler again. RecordedAt is when it was
	// recorded.
	Outcome    []byte
	RecordedAt time.Time
}

// Open checks a state against the retry presenting it and returns what was
// sealed, or, with RecordOutcome, the outcome recorded for it when an
// earlier open consumed it. A refused state is an error for which Rejected
// is true.
func (c *Client) Open(ctx context.Context, r OpenRequest) (*Opened, error) {
	b, err := r.Request.proto()
	if err != nil {
		return nil, err
	}
	if a := r.Request.Answers; a != nil && len(a) != len(sealer.Digest{}) {
		return nil, fmt.Errorf("%w: answers of %d bytes, want 32 (client.Answers)", ErrInvalidArgument, len(a))
	}
	req := &sealerv1.OpenRequest{RequestState: r.State, Principal: r.Principal, Request: b, RecordOutcome: r.RecordOutcome,
		Answers: r.Request.Answers}
	if r.Request.Responded != nil {
		req.Responded = &sealerv1.InputKeys{Keys: r.Request.Responded}
	}
	guard := new(tokenGuard)
	resp, err := c.rpc.Open(ctx, req, grpc.PerRPCCredentials(guard))
	if err != nil {
		return nil, guard.errorOf(err)
	}
	o := &Opened{Payload: resp.GetPayload(), IssuedAt: resp.GetIssuedAt().AsTime(), ExpiresAt: resp.GetExpiresAt().AsTime(),
		State: r.State, Recording: resp.GetRecording()}
	if out := resp.GetOutcome(); out != nil {
		// Never nil here, even empty: nil says there is none.
		o.Outcome, o.RecordedAt = append([]byte{}, out.GetData()...), out.GetRecordedAt().AsTime()
	}
	if resp.GetFlow() != nil {
		if o.Flow, err = flowOf(resp.GetFlow()); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Record records outcome, the answer the caller sent for state, which an
// Open with RecordOutcome consumed (Opened.Recording): retries of the state
// then get it (Opened.Outcome). The first Record of a state wins; a later
// one is ledger.ErrConsumed. An outcome over the sealer's limit (64 KiB by
// default) is ErrInvalidArgument, and retries of the state are then
// refused; empty, it records that none will come. An outcome over
// sealer.MaxOutcome, which no sealer keeps and which may not even reach one,
// is recorded as none, and Record returns ErrInvalidArgument after it. A
// failed Record must not change the answer: log it, and answer as planned.
func (c *Client) Record(ctx context.Context, state string, outcome []byte) error {
	var tooLarge error
	if len(outcome) > sealer.MaxOutcome {
		tooLarge = fmt.Errorf("%w: outcome of %d bytes over the %d any sealer keeps: recorded as none", ErrInvalidArgument, len(outcome), sealer.MaxOutcome)
		outcome = nil
	}
	guard := new(tokenGuard)
	_, err := c.rpc.Record(ctx, &sealerv1.RecordRequest{RequestState: state, Outcome: outcome}, grpc.PerRPCCredentials(guard))
	if err != nil {
		return guard.errorOf(err)
	}
	return tooLarge
}

// fromStatus maps a status with an ErrorInfo reason to the error that
// stands for it in reasons.Table, keeping the status and its message.
func fromStatus(err error) error {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if sentinel := sentinelOf(reasons.Parse(info.Reason)); sentinel != nil {
				return &reasonError{sentinel: sentinel, status: st}
			}
		}
	}
	return fmt.Errorf("sealer: %w", err)
}

// sentinelOf returns the error of the first row of reason r, nil for none.
func sentinelOf(r sealerv1.Reason) error {
	for _, row := range reasons.Table {
		if row.Reason == r {
			return row.Err
		}
	}
	return nil
}

// reasonError is a sealer error: errors.Is matches its sentinel, and
// status.FromError still finds the gRPC status.
type reasonError struct {
	sentinel error
	status   *status.Status
}

// Error is the sentinel's text, then what the sealer's message adds to it,
// said once: "sealer: invalid argument: invalid request: empty principal"
// for the message "sealer: invalid request: empty principal".
func (e *reasonError) Error() string {
	s, msg := e.sentinel.Error(), e.status.Message()
	switch {
	case msg == s || strings.HasPrefix(msg, s+": "):
		return msg
	case msg == "":
		return s
	}
	if pkg, _, ok := strings.Cut(s, ": "); ok {
		msg = strings.TrimPrefix(msg, pkg+": ") // "sealer: invalid request: ..."
	}
	return s + ": " + msg
}

func (e *reasonError) Unwrap() error              { return e.sentinel }
func (e *reasonError) GRPCStatus() *status.Status { return e.status }
