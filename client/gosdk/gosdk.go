// Package gosdk adapts the sealer's Go client to the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk): bindings made from the SDK's
// request params, which carry the keys of the retry's inputResponses for a
// flow's check, and the JSON-RPC error a rejected state is answered with.
// It is a module of its own, so that the client does not pull the SDK into
// programs that do not use it.
//
// It maps no caller to a principal and has no fallback: who, below, is the
// handler's own decision, from the SDK's authentication
// (req.Extra.TokenInfo, set by auth.RequireBearerToken) or its own.
//
// The SDK hands a tool its arguments as received, and a handler that decodes
// them with encoding/json matches member names regardless of case, the last
// one winning; the digest binds both orders of "Item" and "item" alike. So
// Seal and Open refuse a binding whose arguments hold two names equal under
// case folding, at any depth, before calling the sealer:
// client.ErrNamesCollide, for which client.Rejected is true, so the handler
// below answers it with -32602 and does not act.
//
//	opened, err := sc.Open(ctx, client.OpenRequest{
//		State: req.Params.RequestState, Principal: who, Request: gosdk.ToolCall(req.Params)})
//	if client.Rejected(err) {
//		return nil, gosdk.InvalidParams(err) // JSON-RPC -32602 for the MCP client
//	}
//	...
//	ask := mcp.InputRequestMap{"seat": ...}
//	state, _, err := sc.Seal(ctx, client.SealRequest{Principal: who, Request: gosdk.ToolCall(req.Params),
//		Payload: progress, Flow: client.FlowRequest{LatestOnly: true, Asked: client.InputKeys(ask)}.After(opened)})
//
// # Recorded outcomes
//
// A tool that acts once (a payment, on a one-time state or the last round
// of a latest-only flow) records the answer it returns, so that a client
// whose answer was lost on the way back, and which retries with the same
// requestState, gets that answer again instead of -32602, and the tool
// does not act twice (README, "Recorded outcomes"). Open with
// RecordOutcome; a retry of a consumed state then comes back with its
// Outcome, which Replay returns as it was sent; Record records the answer
// of the open that consumed it (Opened.Recording) and does nothing for
// any other:
//
//	opened, err := sc.Open(ctx, client.OpenRequest{State: req.Params.RequestState, Principal: who,
//		Request: gosdk.ToolCall(req.Params), RecordOutcome: true})
//	switch {
//	case client.Rejected(err):
//		return nil, nil, gosdk.InvalidParams(err)
//	case errors.Is(err, client.ErrInProgress): // the first call still runs
//		return nil, nil, gosdk.InProgress()
//	case err != nil:
//		return nil, nil, err
//	case opened.Outcome != nil: // a retry: the answer already sent, not a second payment
//		result, err := gosdk.Replay(opened)
//		return result, nil, err
//	}
//	result, err := pay(ctx, args)
//	if err := gosdk.Record(ctx, sc, opened, result, err); err != nil {
//		log.Print(err) // the answer goes out all the same
//	}
//	return result, nil, err
//
// The bindings carry the answers digest of the SDK's inputResponses
// (client.Binding.Answers), so a retry answering otherwise than the open
// that consumed its state (seat "1A" where the round booked "12A") is
// refused, client.ErrOutcomeConflict, never given that open's answer:
// InvalidParams answers it as OutcomeConflict (-32602, data.reason
// "outcome_conflict").
//
// Record encodes the answer as the SDK sends it (a handler's error as a
// result with IsError, a *jsonrpc.Error as that error): give a recording
// tool's handler Out any, since the SDK adds a typed Out to the result
// after the handler has returned. Without RecordOutcome (or with a sealer
// that keeps no outcomes) nothing is recorded and a retry is refused as
// before.
package gosdk

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/client"
)

// ToolCall binds to a tools/call request: its name and arguments as the SDK
// received them, and the keys and the answers digest of its inputResponses
// (Binding.Responded and Binding.Answers; none when it has none).
func ToolCall(p *mcp.CallToolParamsRaw) client.Binding {
	return responding(client.ToolCall(p.Name, p.Arguments), p.InputResponses)
}

// PromptGet binds to a prompts/get request: its name and arguments, and the
// keys and the answers digest of its inputResponses.
func PromptGet(p *mcp.GetPromptParams) client.Binding {
	return responding(client.PromptGet(p.Name, p.Arguments), p.InputResponses)
}

// ResourceRead binds to a resources/read request: its uri, and the keys and
// the answers digest of its inputResponses.
func ResourceRead(p *mcp.ReadResourceParams) client.Binding {
	return responding(client.ResourceRead(p.URI), p.InputResponses)
}

// responding returns b with the keys and the answers digest of a retry's
// inputResponses as the SDK decoded them (client.Answers): the values the
// handler acts on. Answers that do not encode (values set by hand that
// encoding/json refuses; never the SDK's) leave a digest of no valid
// length, which Open refuses (client.ErrInvalidArgument) rather than open
// without one.
func responding(b client.Binding, answers mcp.InputResponseMap) client.Binding {
	b.Responded = client.InputKeys(answers)
	d, err := client.Answers(answers)
	if err != nil {
		d = []byte{}
	}
	b.Answers = d
	return b
}

// InvalidParams returns the JSON-RPC error an MCP server answers for an
// error for which client.Rejected is true, a rejected state or colliding
// arguments (client.ErrNamesCollide): code -32602, as a bare
// *jsonrpc.Error, which the Go SDK sends as a JSON-RPC error (a wrapped
// error would become a tool result). For client.ErrOutcomeConflict it is
// OutcomeConflict's.
func InvalidParams(err error) *jsonrpc.Error {
	if errors.Is(err, client.ErrOutcomeConflict) {
		return OutcomeConflict()
	}
	what := "invalid requestState: "
	if errors.Is(err, client.ErrNamesCollide) {
		what = "invalid params: "
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: what + err.Error()}
}
