package gosdk

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-sealer/sealer/client"
)

// outcome is the answer to a tool call as every adapter records it (README,
// "Recorded outcomes"): the JSON-RPC response without jsonrpc and id, one
// of its members set.
type outcome struct {
	Result *mcp.CallToolResult `json:"result,omitempty"`
	Error  *jsonrpc.Error      `json:"error,omitempty"`
}

// recordTimeout bounds a Record call, which does not end with the request:
// a client that hung up still retries, and its retry waits for what is
// recorded here.
const recordTimeout = 5 * time.Second

// Replay returns the answer recorded for the state o opened (o.Outcome,
// set when an Open with RecordOutcome presented a state that an earlier
// open consumed): the tool result, or the JSON-RPC error, for the handler
// to return as it is, without acting. An outcome that is not one a Record
// wrote is a JSON-RPC internal error (-32603), never a reason to act.
func Replay(o *client.Opened) (*mcp.CallToolResult, error) {
	var out outcome
	err := json.Unmarshal(o.Outcome, &out)
	switch {
	case err == nil && out.Error != nil && out.Result == nil:
		return nil, out.Error
	case err == nil && out.Result != nil && out.Error == nil:
		if out.Result.InputRequests != nil && len(out.Result.Content) == 0 {
			out.Result.Content = nil // as handlers leave it: "content":null, as recorded
		}
		return out.Result, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the answer recorded for this request cannot be read"}
}

// Record records result and err, what a tool handler returns for the state
// it opened as o, when o is Recording (it does nothing otherwise): retries
// of that state then get it (Replay). It encodes them as mcp.AddTool's
// handlers send them: a *jsonrpc.Error as that error, any other error as a
// result with IsError and the error's text, a nil result as an empty one.
// The SDK adds a typed handler's Out to its result after the handler
// returns, unseen here: a tool that records gives its handler Out any, or
// sets StructuredContent itself.
//
// It returns what failed, for the handler to log: never a reason to change
// the answer, which goes out as it is (retries of the state are then
// refused, or wait out the sealer's --outcome-wait). An answer that does not
// encode records none, so that retries are refused at once; so does an err
// that is the sealer's failure to seal the next round (unavailable, out of
// time or capacity: a failure that may pass), so that the client starts the
// request over rather than getting that failure again. It calls the sealer
// within 5 seconds, whether or not the request is canceled.
func Record(ctx context.Context, sc *client.Client, o *client.Opened, result *mcp.CallToolResult, err error) error {
	if o == nil || !o.Recording {
		return nil
	}
	data, encErr := encode(result, err)
	if sealerFailed(err) {
		data, encErr = nil, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := sc.Record(ctx, o.State, data); err != nil {
		return fmt.Errorf("gosdk: recording the answer: %w", err)
	}
	if encErr != nil {
		return fmt.Errorf("gosdk: the answer does not encode, none recorded: %v", encErr)
	}
	return nil
}

// sealerFailed reports whether err is a failure of the sealer that may
// pass (its ledger or keys unavailable, its limits, its deadline, the
// network): none of the handler's answers. A handler's own gRPC error
// Unavailable or DeadlineExceeded counts too: its retry is then refused,
// never answered with that failure.
func sealerFailed(err error) bool {
	switch client.Reason(err) {
	case "LEDGER_UNAVAILABLE", "KEYS_UNAVAILABLE", "RESOURCE_EXHAUSTED":
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// encode returns the outcome of a tool handler's return values, as the
// SDK sends them (mcp.AddTool's wrapper, then the server's call).
func encode(result *mcp.CallToolResult, err error) ([]byte, error) {
	var out outcome
	if wire, ok := err.(*jsonrpc.Error); ok { // as the SDK tells them: no errors.As
		out.Error = wire
	} else {
		out.Result = new(mcp.CallToolResult)
		switch {
		case err != nil:
			out.Result.SetError(err)
		case result != nil:
			*out.Result = *result
		}
		if out.Result.Content == nil && out.Result.InputRequests == nil {
			out.Result.Content = []mcp.Content{} // "content":[], not null
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// InProgress returns the JSON-RPC error an MCP server answers to a retry
// that came while the open that consumed its state was still running its
// handler (client.ErrInProgress): -32603, with data {"reason":"in_progress"}
// so that a client can tell it from a failure and retry later. As
// InvalidParams, it is a bare *jsonrpc.Error, which the SDK sends as is.
func InProgress() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request is still in progress: retry later",
		Data: json.RawMessage(`{"reason":"in_progress"}`)}
}

// OutcomeConflict returns the JSON-RPC error an MCP server answers to a
// retry whose state an earlier open consumed with other inputResponses
// (client.ErrOutcomeConflict: seat "1A" where the round ran with "12A"):
// -32602, as for any refused state, with the message "invalid
// requestState: answered before for other inputResponses" and data
// {"reason":"outcome_conflict"}, so that a client can tell it from other
// refusals. The answer recorded for the state is never sent for it, and
// the handler does not run: the client starts the request over.
// InvalidParams answers it for client.ErrOutcomeConflict.
func OutcomeConflict() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: answered before for other inputResponses",
		Data: json.RawMessage(`{"reason":"outcome_conflict"}`)}
}
