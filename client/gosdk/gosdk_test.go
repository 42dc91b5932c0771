package gosdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

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

// The bindings carry the keys of the params' inputResponses, as the SDK
// decoded them: none (not unknown) for a first round, every key of a retry,
// case kept.
func TestBindingsCarryTheResponsesKeys(t *testing.T) {
	accept := &mcp.ElicitResult{Action: "accept"}
	answers := mcp.InputResponseMap{"seat": accept, "Seat": accept, "meal": accept}
	for _, tc := range []struct {
		name string
		got  client.Binding
		want []string
	}{
		{"tools/call, round 1", gosdk.ToolCall(&mcp.CallToolParamsRaw{Name: "t"}), []string{}},
		{"tools/call, a retry", gosdk.ToolCall(&mcp.CallToolParamsRaw{Name: "t", InputResponses: answers}), []string{"Seat", "meal", "seat"}},
		{"prompts/get, round 1", gosdk.PromptGet(&mcp.GetPromptParams{Name: "p"}), []string{}},
		{"prompts/get, a retry", gosdk.PromptGet(&mcp.GetPromptParams{Name: "p", InputResponses: answers}), []string{"Seat", "meal", "seat"}},
		{"resources/read, round 1", gosdk.ResourceRead(&mcp.ReadResourceParams{URI: "u"}), []string{}},
		{"resources/read, a retry", gosdk.ResourceRead(&mcp.ReadResourceParams{URI: "u", InputResponses: answers}), []string{"Seat", "meal", "seat"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got.Responded == nil || !slices.Equal(tc.got.Responded, tc.want) {
				t.Errorf("got %#v, want %#v", tc.got.Responded, tc.want)
			}
		})
	}
}

func TestInvalidParams(t *testing.T) {
	e := gosdk.InvalidParams(sealer.ErrExpired)
	var rpc *jsonrpc.Error
	if !errors.As(error(e), &rpc) || rpc.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("got %#v, want a JSON-RPC -32602 error", e)
	}
}

// noSealer fails the test on any call to the sealer.
type noSealer struct{ t *testing.T }

func (n noSealer) Invoke(_ context.Context, method string, _, _ any, _ ...grpc.CallOption) error {
	n.t.Errorf("the sealer was called: %s", method)
	return errors.New("no sealer")
}

func (n noSealer) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("no sealer")
}

// Issue 35: the SDK's params whose arguments hold names that differ only in
// case (a tool decoding them with encoding/json reads the last) are refused
// before the sealer is called, as a rejection answered with -32602.
func TestBindingsRefuseCollidingArguments(t *testing.T) {
	sc := client.New(noSealer{t})
	ctx := context.Background()
	for name, bind := range map[string]client.Binding{
		"tools/call":  gosdk.ToolCall(&mcp.CallToolParamsRaw{Name: "buy", Arguments: json.RawMessage(`{"Item":"car","item":"pen"}`)}),
		"nested":      gosdk.ToolCall(&mcp.CallToolParamsRaw{Name: "buy", Arguments: json.RawMessage(`{"cart":[{"sku":"a","SKU":"b"}]}`)}),
		"prompts/get": gosdk.PromptGet(&mcp.GetPromptParams{Name: "p", Arguments: map[string]string{"Item": "car", "item": "pen"}}),
	} {
		_, _, errSeal := sc.Seal(ctx, client.SealRequest{Principal: "alice", Request: bind})
		_, errOpen := sc.Open(ctx, client.OpenRequest{State: "s", Principal: "alice", Request: bind})
		for op, err := range map[string]error{"Seal": errSeal, "Open": errOpen} {
			if !errors.Is(err, client.ErrNamesCollide) || !client.Rejected(err) {
				t.Errorf("%s, %s: got %v, want client.ErrNamesCollide, Rejected", name, op, err)
				continue
			}
			if e := gosdk.InvalidParams(err); e.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(e.Message, "invalid params: ") {
				t.Errorf("%s, %s: answered %d %q, want -32602 invalid params", name, op, e.Code, e.Message)
			}
		}
	}
}
