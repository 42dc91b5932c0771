package gosdk_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/client/gosdk"
)

type bookArgs struct {
	Flight string `json:"flight"`
}

// bookingServer is a real MCP server of the Go SDK with one tool, book,
// which asks for a seat (round 1, a latest-only flow), then books the seat
// answered (round 2) and records its answer, as docs/GO.md writes it. It
// returns a session of a client of it and the count of bookings made.
func bookingServer(t *testing.T) (*mcp.ClientSession, *atomic.Int32) {
	t.Helper()
	sc := dial()
	t.Cleanup(func() { sc.Close() })
	bookings := new(atomic.Int32)
	book := func(ctx context.Context, req *mcp.CallToolRequest, args bookArgs) (*mcp.CallToolResult, any, error) {
		who := "alice"
		var opened *client.Opened
		if req.Params.RequestState != "" {
			var err error
			opened, err = sc.Open(ctx, client.OpenRequest{State: req.Params.RequestState, Principal: who,
				Request: gosdk.ToolCall(req.Params), RecordOutcome: true})
			switch {
			case client.Rejected(err):
				return nil, nil, gosdk.InvalidParams(err)
			case errors.Is(err, client.ErrInProgress):
				return nil, nil, gosdk.InProgress()
			case err != nil:
				return nil, nil, err
			case opened.Outcome != nil:
				result, err := gosdk.Replay(opened)
				return result, nil, err
			}
			answer, _ := req.Params.InputResponses["seat"].(*mcp.ElicitResult)
			if answer == nil || answer.Action != "accept" {
				err := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no seat"}
				if rerr := gosdk.Record(ctx, sc, opened, nil, err); rerr != nil {
					t.Errorf("record: %v", rerr)
				}
				return nil, nil, err
			}
			n := bookings.Add(1)
			result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("booked %s on %s, booking %d", answer.Content["seat"], args.Flight, n)}}}
			if err := gosdk.Record(ctx, sc, opened, result, nil); err != nil {
				t.Errorf("record: %v", err)
			}
			return result, nil, nil
		}
		ask := mcp.InputRequestMap{"seat": &mcp.ElicitParams{Message: "Which seat?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"seat": map[string]any{"type": "string"}}}}}
		state, _, err := sc.Seal(ctx, client.SealRequest{Principal: who, Request: gosdk.ToolCall(req.Params),
			Flow: client.FlowRequest{LatestOnly: true, Asked: client.InputKeys(ask)}.After(opened)})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{InputRequests: ask, RequestState: state}, nil, nil
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "airline", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "book"}, book)
	ctx := context.Background()
	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	if _, err := s.Connect(ctx, serverEnd, nil); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs, err := c.Connect(ctx, clientEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, bookings
}

// TestOutcomeConflict_ARetryWithAnotherSeatIsRefused (issue 50, 5b): round
// 2 of a booking runs with seat 12A and its answer is lost; the client's
// retry of that round with seat 1A gets the JSON-RPC error of
// gosdk.OutcomeConflict (-32602, data.reason outcome_conflict), never
// "booked 12A", and the handler has booked once. The control: a retry with
// seat 12A gets the recorded answer, still one booking.
func TestOutcomeConflict_ARetryWithAnotherSeatIsRefused(t *testing.T) {
	cs, bookings := bookingServer(t)
	ctx := context.Background()
	call := &mcp.CallToolParams{Name: "book", Arguments: map[string]any{"flight": "LH 400"}}
	round1, err := cs.CallTool(ctx, call)
	if err != nil || round1.RequestState == "" {
		t.Fatalf("round 1: got %+v, %v; want input_required with a state", round1, err)
	}
	withSeat := func(seat string) *mcp.CallToolParams {
		return &mcp.CallToolParams{Name: call.Name, Arguments: call.Arguments, RequestState: round1.RequestState,
			InputResponses: mcp.InputResponseMap{"seat": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"seat": seat}}}}
	}
	const booked = "booked 12A on LH 400, booking 1"
	r, err := cs.CallTool(ctx, withSeat("12A"))
	if err != nil || len(r.Content) != 1 || r.Content[0].(*mcp.TextContent).Text != booked {
		t.Fatalf("round 2 with seat 12A: got %+v, %v; want %q", r, err, booked)
	}
	// That answer is lost on the way back; the client retries round 2, now
	// with seat 1A.
	r, err = cs.CallTool(ctx, withSeat("1A"))
	var rpc *jsonrpc.Error
	var data struct{ Reason string }
	switch {
	case err == nil:
		t.Errorf("the retry with seat 1A: got %q, want the conflict error", r.Content[0].(*mcp.TextContent).Text)
	case !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || json.Unmarshal(rpc.Data, &data) != nil || data.Reason != "outcome_conflict":
		t.Errorf("the retry with seat 1A: got %v, want -32602 with data.reason outcome_conflict", err)
	case rpc.Message != gosdk.OutcomeConflict().Message:
		t.Errorf("the retry with seat 1A: message %q, want %q", rpc.Message, gosdk.OutcomeConflict().Message)
	}
	if n := bookings.Load(); n != 1 {
		t.Errorf("bookings after the retry with seat 1A: %d, want 1", n)
	}
	// The control: the retry with the seat the round ran with gets its
	// answer, and books nothing.
	r, err = cs.CallTool(ctx, withSeat("12A"))
	if err != nil || len(r.Content) != 1 || r.Content[0].(*mcp.TextContent).Text != booked {
		t.Errorf("the retry with seat 12A: got %+v, %v; want %q", r, err, booked)
	}
	if n := bookings.Load(); n != 1 {
		t.Errorf("bookings after the retry with seat 12A: %d, want 1", n)
	}
}

// The bindings carry the answers digest of the SDK's inputResponses
// (client.Answers): the same for the same answers however decoded, another
// for another seat, and the digest of none for a first round.
func TestBindingsCarryTheAnswers(t *testing.T) {
	seat := func(s string) mcp.InputResponseMap {
		return mcp.InputResponseMap{"seat": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"seat": s}}}
	}
	none, err := client.Answers(mcp.InputResponseMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	a12 := gosdk.ToolCall(&mcp.CallToolParamsRaw{Name: "book", InputResponses: seat("12A")}).Answers
	for name, got := range map[string][]byte{
		"round 1":                 gosdk.ToolCall(&mcp.CallToolParamsRaw{Name: "book"}).Answers,
		"prompts/get, round 1":    gosdk.PromptGet(&mcp.GetPromptParams{Name: "p"}).Answers,
		"resources/read, round 1": gosdk.ResourceRead(&mcp.ReadResourceParams{URI: "u"}).Answers,
	} {
		if string(got) != string(none) {
			t.Errorf("%s: got %x, want the digest of no answers %x", name, got, none)
		}
	}
	// The digest of the vector "seat 12A" of sealer/testdata/outcomes.json,
	// whose text the SDK's ElicitResult encodes to.
	if got := hex.EncodeToString(a12); got != "78b1d6a4e4d9dce37020ec6d0e19f8118642bbf7e489f9e601e7c300a13c5628" {
		t.Fatalf("seat 12A: got %s, want the vector's digest", got)
	}
	if b := gosdk.PromptGet(&mcp.GetPromptParams{Name: "p", InputResponses: seat("12A")}).Answers; string(b) != string(a12) {
		t.Errorf("prompts/get with seat 12A: got %x, want %x", b, a12)
	}
	if b := gosdk.ToolCall(&mcp.CallToolParamsRaw{Name: "book", InputResponses: seat("1A")}).Answers; string(b) == string(a12) {
		t.Error("seat 1A has the digest of seat 12A")
	}
}

// InvalidParams answers ErrOutcomeConflict, which client.Rejected is true
// for, as OutcomeConflict: a handler that answers every rejection with
// InvalidParams tells the conflict apart without a case of its own.
func TestInvalidParams_OutcomeConflict(t *testing.T) {
	if !client.Rejected(client.ErrOutcomeConflict) {
		t.Fatal("client.Rejected is false for client.ErrOutcomeConflict")
	}
	got, want := gosdk.InvalidParams(fmt.Errorf("sealer: %w", client.ErrOutcomeConflict)), gosdk.OutcomeConflict()
	if got.Code != jsonrpc.CodeInvalidParams || got.Message != want.Message || string(got.Data) != `{"reason":"outcome_conflict"}` {
		t.Errorf("got %d %q %s, want %d %q %s", got.Code, got.Message, got.Data, want.Code, want.Message, want.Data)
	}
	if e := gosdk.InvalidParams(client.ErrAlreadyConsumed); e.Data != nil {
		t.Errorf("ErrAlreadyConsumed: got data %s, want none", e.Data)
	}
}
