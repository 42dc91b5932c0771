package gosdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/client/gosdk"
	"github.com/mcp-sealer/sealer/ledger"
)

// consumed seals a one-time state for alice and opens it with
// RecordOutcome, as the first retry of a one-time tool does.
func consumed(t *testing.T, sc *client.Client, call client.Binding) *client.Opened {
	t.Helper()
	ctx := context.Background()
	state, _, err := sc.Seal(ctx, client.SealRequest{Principal: "alice", Request: call, TTL: time.Minute, OneTime: true})
	if err != nil {
		t.Fatal(err)
	}
	o, err := sc.Open(ctx, client.OpenRequest{State: state, Principal: "alice", Request: call, RecordOutcome: true})
	if err != nil || !o.Recording {
		t.Fatalf("the first open: got %+v, %v; want Recording", o, err)
	}
	return o
}

// retried opens o's state again, as the client's retry.
func retried(t *testing.T, sc *client.Client, call client.Binding, o *client.Opened) (*client.Opened, error) {
	t.Helper()
	return sc.Open(context.Background(), client.OpenRequest{State: o.State, Principal: "alice", Request: call, RecordOutcome: true})
}

// wire is JSON as the SDK puts it on the wire: a result as the server's
// call sends it, an error as a JSON-RPC error object.
func wire(t *testing.T, result *mcp.CallToolResult, err error) string {
	t.Helper()
	var v any = result
	if err != nil {
		v = err
	}
	data, merr := json.Marshal(v)
	if merr != nil {
		t.Fatal(merr)
	}
	return string(data)
}

// What a handler returns is recorded as the SDK sends it (mcp.AddTool's
// handlers), by the convention every adapter shares, and a retry gets it
// back from Replay, sent alike.
func TestRecordThenReplay(t *testing.T) {
	sc := dial()
	defer sc.Close()
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	ask := mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Sure?", RequestedSchema: map[string]any{"type": "object"}}}
	declined := &jsonrpc.Error{Code: -32001, Message: "card declined", Data: json.RawMessage(`{"retry":false}`)}
	for _, tc := range []struct {
		name     string
		result   *mcp.CallToolResult
		err      error
		recorded string // the outcome's bytes
		sent     string // what the SDK sends on replay
	}{
		{"a result", &mcp.CallToolResult{Content: text("Paid 42.00")}, nil,
			`{"result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`, `{"content":[{"type":"text","text":"Paid 42.00"}]}`},
		{"structured", &mcp.CallToolResult{Content: text("{}"), StructuredContent: map[string]any{"id": "p1"}}, nil,
			`{"result":{"content":[{"type":"text","text":"{}"}],"structuredContent":{"id":"p1"}}}`, `{"content":[{"type":"text","text":"{}"}],"structuredContent":{"id":"p1"}}`},
		{"no result", nil, nil, `{"result":{"content":[]}}`, `{"content":[]}`},
		{"an error: a result with isError", nil, errors.New("insufficient funds"),
			`{"result":{"content":[{"type":"text","text":"insufficient funds"}],"isError":true}}`, `{"content":[{"type":"text","text":"insufficient funds"}],"isError":true}`},
		{"a wrapped JSON-RPC error: isError too, as the SDK does", nil, fmt.Errorf("paying: %w", declined),
			`{"result":{"content":[{"type":"text","text":"paying: card declined"}],"isError":true}}`, `{"content":[{"type":"text","text":"paying: card declined"}],"isError":true}`},
		{"a JSON-RPC error", nil, declined,
			`{"error":{"code":-32001,"message":"card declined","data":{"retry":false}}}`, `{"code":-32001,"message":"card declined","data":{"retry":false}}`},
		{"input_required, with the next state", &mcp.CallToolResult{InputRequests: ask, RequestState: "next"}, nil,
			`{"result":{"content":null,"requestState":"next","inputRequests":{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object"}}}}}}`,
			`{"content":null,"requestState":"next","inputRequests":{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object"}}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := client.ToolCall("pay", json.RawMessage(`{"amount":42}`))
			o := consumed(t, sc, call)
			if err := gosdk.Record(context.Background(), sc, o, tc.result, tc.err); err != nil {
				t.Fatal(err)
			}
			again, err := retried(t, sc, call, o)
			if err != nil {
				t.Fatal(err)
			}
			if string(again.Outcome) != tc.recorded {
				t.Errorf("recorded %s, want %s", again.Outcome, tc.recorded)
			}
			result, err := gosdk.Replay(again)
			if _, ok := err.(*jsonrpc.Error); err != nil && !ok {
				t.Errorf("Replay's error is a %T, want a bare *jsonrpc.Error (the SDK sends it as is)", err)
			}
			if (result == nil) == (err == nil) {
				t.Fatalf("Replay: got %v and %v, want one of them", result, err)
			}
			if got := wire(t, result, err); got != tc.sent {
				t.Errorf("replayed %s, want %s", got, tc.sent)
			}
		})
	}
}

// Record does nothing for an open that is not recording: not asked, a
// replay, or no open at all (a first round).
func TestRecord_OnlyWhenRecording(t *testing.T) {
	sc := client.New(noSealer{t})
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	for name, o := range map[string]*client.Opened{
		"no open":   nil,
		"not asked": {State: "s", Payload: []byte("p")},
		"a replay":  {State: "s", Outcome: []byte(`{"result":{"content":[]}}`)},
	} {
		if err := gosdk.Record(context.Background(), sc, o, result, nil); err != nil {
			t.Errorf("%s: got %v, want nil", name, err)
		}
	}
}

// A request canceled while its handler ran (the client hung up) still has
// its answer recorded: the client's retry waits for it.
func TestRecord_AfterTheRequestEnded(t *testing.T) {
	sc := dial()
	defer sc.Close()
	call := client.ToolCall("pay", json.RawMessage(`{"amount":1}`))
	o := consumed(t, sc, call)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := gosdk.Record(ctx, sc, o, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil); err != nil {
		t.Fatal(err)
	}
	again, err := retried(t, sc, call, o)
	if err != nil || again.Outcome == nil {
		t.Fatalf("the retry: got %+v, %v; want the outcome", again, err)
	}
}

// An answer over the sealer's limit (64 KiB) is not kept: Record says so,
// for the handler to log, and the retry is refused at once, as before.
func TestRecord_OverTheLimit(t *testing.T) {
	sc := dial()
	defer sc.Close()
	call := client.ToolCall("pay", json.RawMessage(`{"amount":2}`))
	o := consumed(t, sc, call)
	big := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 70<<10)}}}
	err := gosdk.Record(context.Background(), sc, o, big, nil)
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "gosdk: ") {
		t.Errorf("Record: got %v, want a gosdk error wrapping client.ErrInvalidArgument", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = sc.Open(ctx, client.OpenRequest{State: o.State, Principal: "alice", Request: call, RecordOutcome: true})
	if !errors.Is(err, ledger.ErrConsumed) || !client.Rejected(err) {
		t.Errorf("the retry: got %v, want ledger.ErrConsumed, Rejected", err)
	}
}

// An answer that does not encode records none (the retry is refused at
// once, instead of waiting for an outcome), and Record says why.
func TestRecord_AnswerThatDoesNotEncode(t *testing.T) {
	sc := dial()
	defer sc.Close()
	call := client.ToolCall("pay", json.RawMessage(`{"amount":3}`))
	o := consumed(t, sc, call)
	bad := &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: func() {}}
	if err := gosdk.Record(context.Background(), sc, o, bad, nil); err == nil || !strings.Contains(err.Error(), "none recorded") {
		t.Errorf("Record: got %v, want an error saying none was recorded", err)
	}
	if _, err := retried(t, sc, call, o); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("the retry: got %v, want ledger.ErrConsumed", err)
	}
}

// Bytes that are not an outcome of the convention are a JSON-RPC internal
// error, never a result: the handler does not act on them either.
func TestReplay_Unreadable(t *testing.T) {
	for _, data := range []string{``, `x`, `{}`, `null`, `{"result":{"content":[]},"error":{"code":1,"message":"m"}}`, `{"result":{"content":[{"type":"nope"}]}}`} {
		result, err := gosdk.Replay(&client.Opened{Outcome: []byte(data)})
		var je *jsonrpc.Error
		if result != nil || !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
			t.Errorf("%q: got %v, %v; want only a -32603 error", data, result, err)
		}
	}
}

// A retry that comes while the first call still runs gets a retryable
// error a client can tell: -32603 with data.reason "in_progress".
func TestInProgress(t *testing.T) {
	var data struct{ Reason string }
	e := gosdk.InProgress()
	if err := json.Unmarshal(e.Data, &data); err != nil || e.Code != jsonrpc.CodeInternalError || data.Reason != "in_progress" {
		t.Errorf("got %d %q %s, want -32603 with data.reason in_progress", e.Code, e.Message, e.Data)
	}
}

// A round whose next state the sealer could not seal (a failure that may
// pass) records none: the retry is refused at once and the client starts
// over, rather than getting that failure again.
func TestRecord_TheSealersFailureRecordsNone(t *testing.T) {
	sc := dial()
	defer sc.Close()
	call := client.ToolCall("pay", json.RawMessage(`{"amount":4}`))
	o := consumed(t, sc, call)
	// What Seal returns when the sealer is unreachable: a status, wrapped.
	unreachable, err := client.Dial("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer unreachable.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _, sealErr := unreachable.Seal(ctx, client.SealRequest{Principal: "alice", Request: call, TTL: time.Minute})
	if sealErr == nil {
		t.Fatal("a Seal to a closed port succeeded")
	}
	if err := gosdk.Record(context.Background(), sc, o, nil, fmt.Errorf("sealing round 2: %w", sealErr)); err != nil {
		t.Fatalf("Record: %v", err)
	}
	if _, err := retried(t, sc, call, o); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("the retry: got %v, want ledger.ErrConsumed (none recorded)", err)
	}
}
