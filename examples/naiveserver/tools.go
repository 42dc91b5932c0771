package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progress is what this server keeps in its requestStates, as plain JSON.
type progress struct {
	Tool     string  `json:"tool"`
	Round    int     `json:"round,omitempty"`
	Name     string  `json:"name,omitempty"`
	Location string  `json:"location,omitempty"`
	Amount   float64 `json:"amount,omitempty"`
	Dates    string  `json:"dates,omitempty"`
	Seat     string  `json:"seat,omitempty"`
}

// state writes the progress as it goes to the client: in clear.
func state(p progress) string {
	b, _ := json.Marshal(p)
	return string(b)
}

// trust reads whatever state came back, unverified; it reports whether the
// retry carried one.
func trust(s string, p *progress) bool {
	if s == "" {
		return false
	}
	json.Unmarshal([]byte(s), p) // a state that does not parse is trusted all the same
	return true
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sealer-naive-mcp-server", Version: "1.0.0"}, nil)
	tool := func(name, desc string, h mcp.ToolHandlerFor[any, any]) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc}, h)
	}
	const p = "test_input_required_result_"
	tool(p+"elicitation", "asks for the caller's name (no state)", elicitation)
	tool(p+"sampling", "asks for an LLM completion (no state)", sampling)
	tool(p+"list_roots", "asks for the client's roots (no state)", listRoots)
	tool(p+"request_state", "asks for a confirmation with a plain state", requestState)
	tool(p+"multiple_inputs", "asks for three inputs at once with a plain state", multipleInputs)
	tool(p+"multi_round", "two rounds, a new plain state in each", multiRound)
	tool(p+"tampered_state", "trusts any state it gets back", requestState)
	tool(p+"capabilities", "asks only for what the client can answer", capabilities)
	s.AddPrompt(&mcp.Prompt{Name: p + "prompt", Description: "asks for context with a plain state"}, prompt)
	mcp.AddTool(s, &mcp.Tool{Name: "get_weather", Description: "asks for units; the state names the location"}, weather)
	mcp.AddTool(s, &mcp.Tool{Name: "approve_payment", Description: "asks for approval; pays the amount in the state"}, approvePayment)
	mcp.AddTool(s, &mcp.Tool{Name: "progress_report", Description: "sends progress notifications, then asks for a confirmation"}, progressReport)
	mcp.AddTool(s, &mcp.Tool{Name: "book_trip", Description: "three rounds: dates, seat, confirmation; the state carries the answers so far"}, bookTrip)
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func elicit(message string, fields ...string) *mcp.ElicitParams {
	props := map[string]*jsonschema.Schema{}
	for _, f := range fields {
		props[f] = &jsonschema.Schema{Type: "string"}
	}
	return &mcp.ElicitParams{Message: message, RequestedSchema: &jsonschema.Schema{Type: "object", Properties: props, Required: fields}}
}

func confirm() *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: "Please confirm", RequestedSchema: &jsonschema.Schema{Type: "object",
		Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}, Required: []string{"ok"}}}
}

func accepted(r mcp.InputResponseMap, key string) map[string]any {
	if e, ok := r[key].(*mcp.ElicitResult); ok && e != nil && e.Action == "accept" {
		return e.Content
	}
	return nil
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

// requestState serves request_state and tampered_state: any state that
// comes back with a confirmation completes the call.
func requestState(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var st progress
	if trust(req.Params.RequestState, &st) && accepted(req.Params.InputResponses, "confirm") != nil {
		return text("state-ok: requestState accepted (unverified) and confirmation accepted"), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": confirm()},
		RequestState: state(progress{Tool: req.Params.Name})}, nil, nil
}

func multipleInputs(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var st progress
	ok := trust(req.Params.RequestState, &st)
	r := req.Params.InputResponses
	name, _ := accepted(r, "user_name")["name"].(string)
	_, greeted := r["greeting"].(*mcp.CreateMessageWithToolsResult)
	roots, rooted := r["client_roots"].(*mcp.ListRootsResult)
	if ok && name != "" && greeted && rooted {
		return text(fmt.Sprintf("Hello %s, %d root(s) visible", name, len(roots.Roots))), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
		"user_name": elicit("What is your name?", "name"),
		"greeting": &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Generate a greeting"}}},
			MaxTokens: 50,
		},
		"client_roots": &mcp.ListRootsParams{},
	}, RequestState: state(progress{Tool: "multiple_inputs"})}, nil, nil
}

// multiRound keeps its progress in the state only: round 1 asks for a name,
// round 2 for a color, then it completes.
func multiRound(_ context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var st progress
	switch ok := trust(req.Params.RequestState, &st); {
	case !ok:
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"step1": elicit("Step 1: What is your name?", "name")},
			RequestState: state(progress{Tool: "multi_round", Round: 1})}, nil, nil
	case st.Round == 1:
		name, _ := accepted(req.Params.InputResponses, "step1")["name"].(string)
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"step2": elicit("Step 2: What is your favorite color?", "color")},
			RequestState: state(progress{Tool: "multi_round", Round: 2, Name: name})}, nil, nil
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

func prompt(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	var st progress
	if trust(req.Params.RequestState, &st) {
		if c := accepted(req.Params.InputResponses, "user_context"); c != nil {
			ctxText, _ := c["context"].(string)
			return &mcp.GetPromptResult{Description: "A prompt with elicited context", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Context: " + ctxText}},
			}}, nil
		}
	}
	return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": elicit("Please provide context for the prompt", "context")},
		RequestState: state(progress{Tool: "prompt"})}, nil
}

type weatherArgs struct {
	Location string `json:"location" jsonschema:"the city"`
}

// weather answers for the location in the state, not the one asked.
func weather(_ context.Context, req *mcp.CallToolRequest, args weatherArgs) (*mcp.CallToolResult, any, error) {
	var st progress
	if units, _ := accepted(req.Params.InputResponses, "units")["units"].(string); trust(req.Params.RequestState, &st) && units != "" {
		return text(fmt.Sprintf("Weather in %s: 21 degrees %s", st.Location, strings.ToUpper(units))), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"units": elicit("Celsius or Fahrenheit?", "units")},
		RequestState: state(progress{Tool: "get_weather", Location: args.Location})}, nil, nil
}

type paymentArgs struct {
	Amount float64 `json:"amount" jsonschema:"the amount to pay"`
}

// approvePayment pays the amount in the state, as often as it comes back.
func approvePayment(_ context.Context, req *mcp.CallToolRequest, args paymentArgs) (*mcp.CallToolResult, any, error) {
	var st progress
	if trust(req.Params.RequestState, &st) && accepted(req.Params.InputResponses, "approve") != nil {
		return text(fmt.Sprintf("Paid %.2f", st.Amount)), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"approve": confirm()},
		RequestState: state(progress{Tool: "approve_payment", Amount: args.Amount})}, nil, nil
}

// progressReport sends three progress notifications (when the call has a
// progress token), then asks for a confirmation with a state.
func progressReport(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
	var st progress
	if trust(req.Params.RequestState, &st) && accepted(req.Params.InputResponses, "confirm") != nil {
		return text("report confirmed"), nil, nil
	}
	if token := req.Params.GetProgressToken(); token != nil {
		for i := 1; i <= 3; i++ {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
				Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d of 3", i)})
		}
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": confirm()},
		RequestState: state(progress{Tool: "progress_report"})}, nil, nil
}

type tripArgs struct {
	City string `json:"city" jsonschema:"where to"`
}

// bookTrip asks three times, its progress in the state only: round 1 for
// the dates, round 2 for a seat, round 3 for a confirmation; then it books
// what the state says. Any state that comes back is trusted: an old one
// asks its round again, a copy books again.
func bookTrip(_ context.Context, req *mcp.CallToolRequest, args tripArgs) (*mcp.CallToolResult, any, error) {
	var st progress
	trust(req.Params.RequestState, &st)
	r := req.Params.InputResponses
	next := func(ask string, p progress, field ...string) (*mcp.CallToolResult, any, error) {
		p.Tool = "book_trip"
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{ask: elicit("Your "+ask+"?", field...)}, RequestState: state(p)}, nil, nil
	}
	switch st.Round {
	case 0:
		return next("dates", progress{Round: 1}, "dates")
	case 1:
		dates, _ := accepted(r, "dates")["dates"].(string)
		return next("seat", progress{Round: 2, Dates: dates}, "seat")
	case 2:
		seat, _ := accepted(r, "seat")["seat"].(string)
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": confirm()},
			RequestState: state(progress{Tool: "book_trip", Round: 3, Dates: st.Dates, Seat: seat})}, nil, nil
	}
	if accepted(r, "confirm") == nil {
		return text("not booked"), nil, nil
	}
	return text(fmt.Sprintf("Booked %s, %s, seat %s", args.City, st.Dates, st.Seat)), nil, nil
}
