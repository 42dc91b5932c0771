// Package gosdk adapts the sealer's Go client to the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk): bindings made from the SDK's
// request params, and the JSON-RPC error a rejected state is answered with.
// It is a module of its own, so that the client does not pull the SDK into
// programs that do not use it.
//
//	opened, err := sc.Open(ctx, client.OpenRequest{
//		State: req.Params.RequestState, Principal: who, Request: gosdk.ToolCall(req.Params)})
//	if client.Rejected(err) {
//		return nil, gosdk.InvalidParams(err) // JSON-RPC -32602 for the MCP client
//	}
package gosdk

import (
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/client"
)

// ToolCall binds to a tools/call request: its name and arguments as the SDK
// received them.
func ToolCall(p *mcp.CallToolParamsRaw) client.Binding {
	return client.ToolCall(p.Name, p.Arguments)
}

// PromptGet binds to a prompts/get request: its name and arguments.
func PromptGet(p *mcp.GetPromptParams) client.Binding {
	return client.PromptGet(p.Name, p.Arguments)
}

// ResourceRead binds to a resources/read request: its uri.
func ResourceRead(p *mcp.ReadResourceParams) client.Binding {
	return client.ResourceRead(p.URI)
}

// InvalidParams returns the JSON-RPC error an MCP server answers for a
// rejected state: code -32602, as a bare *jsonrpc.Error, which the Go SDK
// sends as a JSON-RPC error (a wrapped error would become a tool result).
func InvalidParams(err error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: " + err.Error()}
}
