// Command mcpserver is an MCP server (go-sdk, Streamable HTTP, stateless:
// the 2026-07-28 wire) whose every requestState is sealed and opened by a
// running sealer. It implements the tools and the prompt of the MCP
// conformance suite's input-required-result scenarios, and a few of its own
// that the sealer's tests use:
//
//	get_weather      two rounds; the state is bound to the location argument
//	approve_payment  a one-time state: the retry pays once, and its answer is
//	                 recorded, so a retry whose answer was lost gets it again
//	buy              a one-time state; decodes its arguments with encoding/json
//
// Every state is a round of a flow (client.FlowRequest): latest-only, and
// bound to the keys of the inputRequests it answers, so a client can neither
// stretch, rewind or fork a request nor answer what it was not asked.
//
// The principal is the caller's bearer token (hashed), or "anonymous".
// Each payment approve_payment makes is a line of the log ("payment 1:
// paid 42.00"), so that a test counts them; -record-outcomes=false turns
// the recording off (a retry is then refused, as before).
//
//	mcpserver -addr 127.0.0.1:3001 -sealer 127.0.0.1:7443
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/client/gosdk"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "listen address (the MCP endpoint is /mcp)")
	sealerAddr := flag.String("sealer", "127.0.0.1:7443", "the sealer's gRPC address")
	ttl := flag.Duration("state-ttl", 5*time.Minute, "life of the requestStates this server issues")
	record := flag.Bool("record-outcomes", true, "record the answers of approve_payment, so that a retry of its state gets the same answer")
	flag.Parse()

	sc, err := client.Dial(*sealerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer sc.Close()
	server := newServer(&guard{sealer: sc, ttl: *ttl, recordOutcomes: *record})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "mcpserver listening on http://%s/mcp, sealer at %s\n", l.Addr(), *sealerAddr)
	log.Fatal((&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(l))
}

// guard seals and opens this server's requestStates through the sealer.
type guard struct {
	sealer *client.Client
	ttl    time.Duration
	// recordOutcomes makes the tools that act once record their answers
	// (openOnce).
	recordOutcomes bool
	// payments counts the payments made, for the log.
	payments atomic.Int64
}

// principal is who the request comes from: its bearer token, hashed, or
// the explicit anonymous principal.
func principal(h http.Header) string {
	if token, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok && token != "" {
		sum := sha256.Sum256([]byte(token))
		return "bearer:" + hex.EncodeToString(sum[:16])
	}
	return "anonymous"
}

func header(extra *mcp.RequestExtra) http.Header {
	if extra == nil {
		return nil
	}
	return extra.Header
}

// flow is how this server seals its rounds: a flow whose latest round alone
// opens, each round bound to the keys of the inputRequests it asks.
func flow(ask mcp.InputRequestMap, opened *client.Opened) *client.FlowRequest {
	return client.FlowRequest{LatestOnly: true, Asked: client.InputKeys(ask)}.After(opened)
}

// askTool answers the tool call req with ask and a state carrying v: the
// round after opened's, or the first round of a flow when opened is nil. A
// flow that cannot go on (its deadline or its rounds used) is the JSON-RPC
// error the MCP client must get (-32602).
func (g *guard) askTool(ctx context.Context, req *mcp.CallToolRequest, opened *client.Opened, v any, ask mcp.InputRequestMap, oneTime bool) (*mcp.CallToolResult, any, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	state, _, err := g.sealer.Seal(ctx, client.SealRequest{Principal: principal(header(req.Extra)),
		Request: gosdk.ToolCall(req.Params), Payload: payload, TTL: g.ttl, OneTime: oneTime, Flow: flow(ask, opened)})
	if client.Rejected(err) {
		return nil, nil, gosdk.InvalidParams(err)
	}
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{InputRequests: ask, RequestState: state}, nil, nil
}

// openTool opens the retry's state into v; it returns nil when the retry
// carries no state. A refused state (forged, another caller's, a round
// answered before, inputResponses that do not answer exactly what its round
// asked) is the JSON-RPC error the MCP client must get (-32602).
func (g *guard) openTool(ctx context.Context, req *mcp.CallToolRequest, v any) (*client.Opened, error) {
	return g.open(ctx, req, v, false)
}

// openOnce is openTool for a tool that acts once: unless -record-outcomes
// is off, the open that consumes the state records the tool's answer
// (record), and a retry of that state comes back with it (Opened.Outcome:
// answer gosdk.Replay, and do not act). A retry while the first still runs
// is the JSON-RPC error that says so (gosdk.InProgress).
func (g *guard) openOnce(ctx context.Context, req *mcp.CallToolRequest, v any) (*client.Opened, error) {
	return g.open(ctx, req, v, g.recordOutcomes)
}

func (g *guard) open(ctx context.Context, req *mcp.CallToolRequest, v any, record bool) (*client.Opened, error) {
	if req.Params.RequestState == "" {
		return nil, nil
	}
	o, err := g.sealer.Open(ctx, client.OpenRequest{State: req.Params.RequestState,
		Principal: principal(header(req.Extra)), Request: gosdk.ToolCall(req.Params), RecordOutcome: record})
	switch {
	case client.Rejected(err):
		return nil, gosdk.InvalidParams(err)
	case errors.Is(err, client.ErrInProgress):
		return nil, gosdk.InProgress()
	case err != nil:
		return nil, err
	case o.Outcome != nil:
		return o, nil // no payload: the answer is recorded
	}
	return o, json.Unmarshal(o.Payload, v)
}

// record records the answer to a state that openOnce opened. A failure is
// logged, and the answer goes out as it is.
func (g *guard) record(ctx context.Context, opened *client.Opened, result *mcp.CallToolResult, err error) {
	if err := gosdk.Record(ctx, g.sealer, opened, result, err); err != nil {
		log.Print(err)
	}
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

// accepted returns the content of an accepted elicitation response.
func accepted(r mcp.InputResponseMap, key string) map[string]any {
	if e, ok := r[key].(*mcp.ElicitResult); ok && e != nil && e.Action == "accept" {
		return e.Content
	}
	return nil
}
