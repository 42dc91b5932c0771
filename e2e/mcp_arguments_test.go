package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/mcpdigest"
)

// Issue 35, against the example Go MCP server, whose tool buy decodes its
// arguments with encoding/json (names matched regardless of case, the last
// member winning): {"Item":"car","item":"pen"} quotes a pen, and the same
// members swapped, which the digest binds alike, would sell the car. The
// client's bindings refuse such arguments before the sealer: the first round
// gets -32602 and no state, and a retry presenting a state sealed for those
// arguments gets -32602 and sells nothing. Prompt arguments likewise. An
// honest purchase goes through, so the tool does act when it should.
func TestMCP_R5_ArgumentsReadTwoWaysAreRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	url := startMCP(t, s)
	cs := mcpSession(t, url, "", false, nil)
	ctx := context.Background()
	call := func(args, state string, confirm bool) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: "buy", Arguments: json.RawMessage(args), RequestState: state}
		if confirm {
			p.InputResponses = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}}
		}
		return cs.CallTool(ctx, p)
	}
	// refused wants -32602, and says what the tool did otherwise.
	refused := func(t *testing.T, r *mcp.CallToolResult, err error) {
		t.Helper()
		if r != nil {
			quote := ""
			if e, ok := r.InputRequests["confirm"].(*mcp.ElicitParams); ok {
				quote = e.Message
			}
			t.Fatalf("the tool answered %q, quoting %q; want the JSON-RPC error -32602", resultText(t, r), quote)
		}
		wantInvalidParams(t, r, err)
	}

	t.Run("an honest purchase", func(t *testing.T) {
		r, err := call(`{"item":"pen","price":1}`, "", false)
		if err != nil || r.RequestState == "" || !strings.Contains(r.InputRequests["confirm"].(*mcp.ElicitParams).Message, "Buy pen for 1.00?") {
			t.Fatalf("round 1: got %+v, %v; want a quote for the pen", r, err)
		}
		r, err = call(`{"item":"pen","price":1}`, r.RequestState, true)
		if err != nil || resultText(t, r) != "SOLD pen for 1.00" {
			t.Fatalf("the retry: got %+v, %v; want the pen sold", r, err)
		}
	})

	t.Run("the first round", func(t *testing.T) {
		r, err := call(`{"Item":"car","item":"pen","price":1}`, "", false)
		refused(t, r, err)
	})

	t.Run("a retry with the members swapped", func(t *testing.T) {
		// The state the server sealed for the quote before the rule: bound to
		// the arguments' digest, which is that of both orders.
		sc, err := client.Dial(s.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		d, err := mcpdigest.Request("tools/call", []byte(`{"name":"buy","arguments":{"Item":"car","item":"pen","price":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		state, _, err := sc.Seal(ctx, client.SealRequest{Principal: "anonymous", Request: client.Binding{Digest: d[:]},
			Payload: []byte(`{"tool":"buy"}`), TTL: time.Minute, OneTime: true,
			Flow: &client.FlowRequest{LatestOnly: true, Asked: []string{"confirm"}}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := call(`{"item":"pen","Item":"car","price":1}`, state, true)
		refused(t, r, err)
	})

	t.Run("prompt arguments", func(t *testing.T) {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_input_required_result_prompt",
			Arguments: map[string]string{"Topic": "a", "topic": "b"}})
		wantInvalidParams(t, nil, err)
	})
}
