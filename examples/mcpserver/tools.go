package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/client/gosdk"
)

// progress is what the states of this server carry.
type progress struct {
	Tool  string `json:"tool"`
	Round int    `json:"round,omitempty"`
	Name  string `json:"name,omitempty"`
}

func newServer(g *guard) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sealer-example-mcp-server", Version: "1.0.0"}, nil)
	tool := func(name, desc string, h mcp.ToolHandlerFor[any, any]) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc}, h)
	}
	const p = "test_input_required_result_"
	tool(p+"elicitation", "asks for the caller's name (no state)", elicitation)
	tool(p+"sampling", "asks for an LLM completion (no state)", sampling)
	tool(p+"list_roots", "asks for the client's roots (no state)", listRoots)
	tool(p+"request_state", "asks for a confirmation with a sealed state", g.requestState)
	tool(p+"multiple_inputs", "asks for three inputs at once with a sealed state", g.multipleInputs)
	tool(p+"multi_round", "two rounds, a new sealed state in each", g.multiRound)
	tool(p+"tampered_state", "rejects a state that does not open", g.requestState)
	tool(p+"capabilities", "asks only for what the client can answer", capabilities)
	s.AddPrompt(&mcp.Prompt{Name: p + "prompt", Description: "asks for context with a sealed state"}, g.prompt)

	mcp.AddTool(s, &mcp.Tool{Name: "get_weather", Description: "asks for units; the state is bound to the location"}, g.weather)
	mcp.AddTool(s, &mcp.Tool{Name: "approve_payment", Description: "asks for approval; the state opens once"}, g.approvePayment)
	s.AddTool(&mcp.Tool{Name: "buy", Description: "quotes an item, then sells it once confirmed; decodes its arguments with encoding/json",
		InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
			"item": {Type: "string"}, "price": {Type: "number"}}}}, g.buy)
	return s
}

func elicitation(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if name, _ := accepted(req.Params.InputResponses, "user_name")["name"].(string); name != "" {
		return text("Hello, " + name + "!"), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": elicit("What is your name?", "name")}}, nil, nil
}

func sampling(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if r, ok := req.Params.InputResponses["capital_question"].(*mcp.CreateMessageWithToolsResult); ok && r != nil {
		return text("Sampling response received"), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"capital_question": &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "What is the capital of France?"}}},
		MaxTokens: 100,
	}}}, nil, nil
}

func listRoots(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult); ok && r != nil {
		return text(fmt.Sprintf("Client exposed %d root(s)", len(r.Roots))), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}}, nil, nil
}

// requestState serves request_state and tampered_state: a confirmation with
// a sealed state; a retry whose state does not open is a JSON-RPC error.
func (g *guard) requestState(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var st progress
	opened, err := g.openTool(ctx, req, &st)
	if err != nil {
		return nil, nil, err
	}
	if opened != nil && accepted(req.Params.InputResponses, "confirm") != nil {
		return text("state-ok: requestState opened and confirmation accepted"), nil, nil
	}
	return g.askTool(ctx, req, opened, progress{Tool: req.Params.Name}, mcp.InputRequestMap{"confirm": confirm()}, false)
}

func (g *guard) multipleInputs(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var st progress
	opened, err := g.openTool(ctx, req, &st)
	if err != nil {
		return nil, nil, err
	}
	r := req.Params.InputResponses
	name, _ := accepted(r, "user_name")["name"].(string)
	_, greeted := r["greeting"].(*mcp.CreateMessageWithToolsResult)
	roots, rooted := r["client_roots"].(*mcp.ListRootsResult)
	if opened != nil && name != "" && greeted && rooted {
		return text(fmt.Sprintf("Hello %s, %d root(s) visible", name, len(roots.Roots))), nil, nil
	}
	return g.askTool(ctx, req, opened, progress{Tool: "multiple_inputs"}, mcp.InputRequestMap{
		"user_name": elicit("What is your name?", "name"),
		"greeting": &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Generate a greeting"}}},
			MaxTokens: 50,
		},
		"client_roots": &mcp.ListRootsParams{},
	}, false)
}

// multiRound keeps its progress in the sealed state only: round 1 asks for a
// name, round 2 for a color, then it completes. Both rounds are one flow: a
// retry of round 1 after round 2 was asked does not open.
func (g *guard) multiRound(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var st progress
	opened, err := g.openTool(ctx, req, &st)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case opened == nil:
		return g.askTool(ctx, req, nil, progress{Tool: "multi_round", Round: 1},
			mcp.InputRequestMap{"step1": elicit("Step 1: What is your name?", "name")}, false)
	case st.Round == 1:
		name, _ := accepted(req.Params.InputResponses, "step1")["name"].(string)
		return g.askTool(ctx, req, opened, progress{Tool: "multi_round", Round: 2, Name: name},
			mcp.InputRequestMap{"step2": elicit("Step 2: What is your favorite color?", "color")}, false)
	}
	color, _ := accepted(req.Params.InputResponses, "step2")["color"].(string)
	return text(fmt.Sprintf("Multi-round complete: %s likes %s", st.Name, color)), nil, nil
}

func capabilities(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	if len(req.Params.InputResponses) > 0 {
		return text("Capability-aware input requests fulfilled"), nil, nil
	}
	caps := req.ClientCapabilities()
	reqs := mcp.InputRequestMap{}
	if caps != nil && caps.Elicitation != nil {
		reqs["user_name"] = elicit("What is your name?", "name")
	}
	if caps != nil && caps.Sampling != nil {
		reqs["greeting"] = &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Generate a short greeting"}}},
			MaxTokens: 50,
		}
	}
	if caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged) {
		reqs["client_roots"] = &mcp.ListRootsParams{}
	}
	if len(reqs) == 0 {
		return text("No declared client capability supports an in-band input request"), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: reqs}, nil, nil
}

func (g *guard) prompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	who := principal(header(req.Extra))
	bind := gosdk.PromptGet(req.Params)
	var opened *client.Opened
	if req.Params.RequestState != "" {
		var err error
		opened, err = g.sealer.Open(ctx, client.OpenRequest{State: req.Params.RequestState, Principal: who, Request: bind})
		if client.Rejected(err) {
			return nil, gosdk.InvalidParams(err)
		}
		if err != nil {
			return nil, err
		}
		if c := accepted(req.Params.InputResponses, "user_context"); c != nil {
			ctxText, _ := c["context"].(string)
			return &mcp.GetPromptResult{Description: "A prompt with elicited context", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Context: " + ctxText}},
			}}, nil
		}
	}
	ask := mcp.InputRequestMap{"user_context": elicit("Please provide context for the prompt", "context")}
	state, _, err := g.sealer.Seal(ctx, client.SealRequest{Principal: who, Request: bind, TTL: g.ttl, Flow: flow(ask, opened)})
	if client.Rejected(err) {
		return nil, gosdk.InvalidParams(err)
	}
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{InputRequests: ask, RequestState: state}, nil
}

type weatherArgs struct {
	Location string `json:"location" jsonschema:"the city"`
}

func (g *guard) weather(ctx context.Context, req *mcp.CallToolRequest, args weatherArgs) (*mcp.CallToolResult, any, error) {
	var st progress
	opened, err := g.openTool(ctx, req, &st)
	if err != nil {
		return nil, nil, err
	}
	if units, _ := accepted(req.Params.InputResponses, "units")["units"].(string); opened != nil && units != "" {
		return text(fmt.Sprintf("Weather in %s: 21 degrees %s", args.Location, strings.ToUpper(units))), nil, nil
	}
	return g.askTool(ctx, req, opened, progress{Tool: "get_weather"}, mcp.InputRequestMap{"units": elicit("Celsius or Fahrenheit?", "units")}, false)
}

type paymentArgs struct {
	Amount float64 `json:"amount" jsonschema:"the amount to pay"`
}

// approvePayment asks to approve the payment (a one-time state), then pays
// once: its answer to the approval is recorded, so the client's retry of
// that state, whose answer was lost, gets the same answer and no second
// payment.
func (g *guard) approvePayment(ctx context.Context, req *mcp.CallToolRequest, args paymentArgs) (*mcp.CallToolResult, any, error) {
	var st progress
	opened, err := g.openOnce(ctx, req, &st)
	switch {
	case err != nil:
		return nil, nil, err
	case opened != nil && opened.Outcome != nil:
		result, err := gosdk.Replay(opened)
		return result, nil, err
	}
	result, err := g.pay(ctx, req, opened, args)
	g.record(ctx, opened, result, err)
	return result, nil, err
}

// pay pays once approved, and asks for the approval otherwise.
func (g *guard) pay(ctx context.Context, req *mcp.CallToolRequest, opened *client.Opened, args paymentArgs) (*mcp.CallToolResult, error) {
	if opened != nil && accepted(req.Params.InputResponses, "approve") != nil {
		log.Printf("payment %d: paid %.2f", g.payments.Add(1), args.Amount)
		return text(fmt.Sprintf("Paid %.2f", args.Amount)), nil
	}
	r, _, err := g.askTool(ctx, req, opened, progress{Tool: "approve_payment"}, mcp.InputRequestMap{"approve": confirm()}, true)
	return r, err
}

// buyArgs are decoded with encoding/json, as go-sdk's toolschemas example
// decodes a raw tool's arguments: it matches names regardless of case, the
// last member winning, so {"Item":"car","item":"pen"} reads pen and the
// same members swapped read car, under one digest. The bindings refuse such
// arguments (client.ErrNamesCollide), so the quote and the sale read alike.
type buyArgs struct {
	Item  string  `json:"item"`
	Price float64 `json:"price"`
}

// buy quotes an item and asks to confirm the purchase (a one-time state),
// then sells it.
func (g *guard) buy(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var st progress
	opened, err := g.openTool(ctx, req, &st)
	if err != nil {
		return nil, err
	}
	var args buyArgs
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid arguments"}
	}
	if opened != nil && accepted(req.Params.InputResponses, "confirm") != nil {
		return text(fmt.Sprintf("SOLD %s for %.2f", args.Item, args.Price)), nil
	}
	ask := &mcp.ElicitParams{Message: fmt.Sprintf("Buy %s for %.2f?", args.Item, args.Price), RequestedSchema: confirm().RequestedSchema}
	r, _, err := g.askTool(ctx, req, opened, progress{Tool: "buy"}, mcp.InputRequestMap{"confirm": ask}, true)
	return r, err
}
