// Command mcpserver is an MCP server (go-sdk, Streamable HTTP, stateless:
// the 2026-07-28 wire) whose every requestState is sealed and opened by a
// running sealer. It implements the tools and the prompt of the MCP
// conformance suite's input-required-result scenarios, and a few of its own
// that the sealer's tests use:
//
//	get_weather      two rounds; the state is bound to the location argument
//	approve_payment  a one-time state: the retry works once
//
// The principal is the caller's bearer token (hashed), or "anonymous".
//
//	mcpserver -addr 127.0.0.1:3001 -sealer 127.0.0.1:7443
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
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
	flag.Parse()

	sc, err := client.Dial(*sealerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer sc.Close()
	server := newServer(&guard{sealer: sc, ttl: *ttl})
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

// sealTool seals v for the tool call req.
func (g *guard) sealTool(ctx context.Context, req *mcp.CallToolRequest, v any, oneTime bool) (string, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	state, _, err := g.sealer.Seal(ctx, client.SealRequest{Principal: principal(header(req.Extra)),
		Request: gosdk.ToolCall(req.Params), Payload: payload, TTL: g.ttl, OneTime: oneTime})
	return state, err
}

// openTool opens the retry's state into v. It reports false when the retry
// carries no state; a refused state is the JSON-RPC error the MCP client
// must get (-32602).
func (g *guard) openTool(ctx context.Context, req *mcp.CallToolRequest, v any) (bool, error) {
	if req.Params.RequestState == "" {
		return false, nil
	}
	o, err := g.sealer.Open(ctx, client.OpenRequest{State: req.Params.RequestState,
		Principal: principal(header(req.Extra)), Request: gosdk.ToolCall(req.Params)})
	if client.Rejected(err) {
		return false, gosdk.InvalidParams(err)
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(o.Payload, v)
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
