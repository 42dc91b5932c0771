package gosdk_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/client/gosdk"
	"github.com/mcp-sealer/sealer/sealer"
)

// The SDK's params bind as the client's constructors do: the retry, with
// its requestState and inputResponses, binds like the first round.
func TestBindingsFromTheSDK(t *testing.T) {
	first := &mcp.CallToolParamsRaw{Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)}
	retry := &mcp.CallToolParamsRaw{Name: "get_weather", Arguments: json.RawMessage(`{ "location" : "Paris" }`),
		RequestState: "s", InputResponses: mcp.InputResponseMap{"u": &mcp.ElicitResult{Action: "accept"}}}
	for name, pair := range map[string][2]client.Binding{
		"tools/call":     {gosdk.ToolCall(first), gosdk.ToolCall(retry)},
		"prompts/get":    {gosdk.PromptGet(&mcp.GetPromptParams{Name: "p", Arguments: map[string]string{"k": "v"}}), client.PromptGet("p", map[string]string{"k": "v"})},
		"resources/read": {gosdk.ResourceRead(&mcp.ReadResourceParams{URI: "file:///x"}), client.ResourceRead("file:///x")},
	} {
		a, err := pair[0].RequestDigest()
		b, err2 := pair[1].RequestDigest()
		if err != nil || err2 != nil || a != b {
			t.Errorf("%s: digests %v (%v) and %v (%v), want equal", name, a, err, b, err2)
		}
	}
}

func TestInvalidParams(t *testing.T) {
	e := gosdk.InvalidParams(sealer.ErrExpired)
	var rpc *jsonrpc.Error
	if !errors.As(error(e), &rpc) || rpc.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("got %#v, want a JSON-RPC -32602 error", e)
	}
}
