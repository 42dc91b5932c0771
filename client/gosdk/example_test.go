package gosdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/client/gosdk"
)

type payArgs struct {
	Amount int `json:"amount"`
}

// A payment tool asks to confirm (round 1, a one-time state), then pays
// (round 2) and records its answer. The client's retry of round 2, whose
// answer was lost, gets the same answer, and the tool has paid once.
func Example() {
	sc := dial() // a client of a sealer on loopback
	defer sc.Close()
	payments := 0
	pay := func(ctx context.Context, req *mcp.CallToolRequest, args payArgs) (*mcp.CallToolResult, any, error) {
		who := "alice" // the caller's authenticated principal
		if req.Params.RequestState == "" {
			ask := mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: fmt.Sprintf("Pay %d?", args.Amount),
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}}
			state, _, err := sc.Seal(ctx, client.SealRequest{Principal: who, Request: gosdk.ToolCall(req.Params), OneTime: true})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{InputRequests: ask, RequestState: state}, nil, nil
		}
		opened, err := sc.Open(ctx, client.OpenRequest{State: req.Params.RequestState, Principal: who,
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
		payments++
		result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("paid %d, payment %d", args.Amount, payments)}}}
		if err := gosdk.Record(ctx, sc, opened, result, nil); err != nil {
			log.Print(err)
		}
		return result, nil, nil
	}

	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "pay"}, pay)
	ctx := context.Background()
	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	if _, err := s.Connect(ctx, serverEnd, nil); err != nil {
		panic(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "shop", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs, err := c.Connect(ctx, clientEnd, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()

	call := &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"amount": 42}}
	round1, err := cs.CallTool(ctx, call)
	if err != nil {
		panic(err)
	}
	call.RequestState = round1.RequestState
	call.InputResponses = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}
	for range 2 { // the first answer is lost on the way back; the client retries
		r, err := cs.CallTool(ctx, call)
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Content[0].(*mcp.TextContent).Text)
	}
	fmt.Println("payments:", payments)
	// Output:
	// paid 42, payment 1
	// paid 42, payment 1
	// payments: 1
}
