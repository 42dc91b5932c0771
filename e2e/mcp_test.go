package e2e

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// startMCP runs the example MCP server against the sealer s and returns its
// endpoint.
func startMCP(t *testing.T, s *proc, flags ...string) string {
	t.Helper()
	cmd := exec.Command(mcpBinary, append([]string{"-addr", "127.0.0.1:0", "-sealer", s.GRPC}, flags...)...)
	return startUntil(t, cmd, regexp.MustCompile(`listening on (http://\S+/mcp)`))[1]
}

// bearer adds a bearer token to every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects a go-sdk client to url with a bearer token (or none)
// and answers elicitations from answers, keyed by the requested field.
func mcpSession(t *testing.T, url, token string, auto bool, answers map[string]string) *mcp.ClientSession {
	t.Helper()
	return mcpSessionOver(t, url, &http.Client{Transport: bearer{token}, Timeout: 10 * time.Second}, auto, answers)
}

// mcpSessionOver is mcpSession over a given HTTP client (its credentials:
// a header, a client certificate).
func mcpSessionOver(t *testing.T, url string, client *http.Client, auto bool, answers map[string]string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			content := map[string]any{}
			if s, ok := req.Params.RequestedSchema.(map[string]any); ok {
				for field := range s["properties"].(map[string]any) {
					content[field] = answers[field]
				}
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
	}
	if !auto {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "sealer-e2e", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func resultText(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, " ")
}

// firstRound calls a tool without handling input and returns the state it
// issued.
func firstRound(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if r.RequestState == "" || len(r.InputRequests) == 0 {
		t.Fatalf("%s: got %+v, want an input_required result with a state", name, r)
	}
	return r.RequestState
}

// retry presents state with an accepted elicitation answer.
func retry(cs *mcp.ClientSession, name string, args map[string]any, state, key string, content map[string]any) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{key: &mcp.ElicitResult{Action: "accept", Content: content}}})
}

func wantInvalidParams(t *testing.T, r *mcp.CallToolResult, err error) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("got %+v, %v; want the JSON-RPC error -32602", r, err)
	}
}

func TestMCP_R10_MultiRoundCompletesThroughTheSealer(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	url := startMCP(t, s)
	cs := mcpSession(t, url, "", true, map[string]string{"name": "Alice", "color": "blue", "units": "celsius"})
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_input_required_result_multi_round", Arguments: map[string]any{}})
	if err != nil || resultText(t, r) != "Multi-round complete: Alice likes blue" {
		t.Fatalf("multi_round: got %q, %v", resultText(t, r), err)
	}
	r, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_weather", Arguments: map[string]any{"location": "Paris"}})
	if err != nil || resultText(t, r) != "Weather in Paris: 21 degrees CELSIUS" {
		t.Fatalf("get_weather: got %q, %v", resultText(t, r), err)
	}
	waitFor(t, "the sealer to log its calls (the states are sealed by it)", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"OK"`)
	})
}

func TestMCP_R3_StateReplayedUnderAnotherTokenIsRejected(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	url := startMCP(t, s)
	alice, mallory := mcpSession(t, url, "alice-token", false, nil), mcpSession(t, url, "mallory-token", false, nil)
	args := map[string]any{"location": "Paris"}
	state := firstRound(t, alice, "get_weather", args)
	r, err := retry(mallory, "get_weather", args, state, "units", map[string]any{"units": "celsius"})
	wantInvalidParams(t, r, err)
	r, err = retry(mcpSession(t, url, "", false, nil), "get_weather", args, state, "units", map[string]any{"units": "celsius"})
	wantInvalidParams(t, r, err)
	r, err = retry(alice, "get_weather", args, state, "units", map[string]any{"units": "celsius"})
	if err != nil || !strings.Contains(resultText(t, r), "Paris") {
		t.Fatalf("alice's own retry: got %+v, %v", r, err)
	}
}

func TestMCP_R5_StateOnAnotherToolOrArgumentsIsRejected(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	url := startMCP(t, s)
	cs := mcpSession(t, url, "alice-token", false, nil)
	state := firstRound(t, cs, "get_weather", map[string]any{"location": "Paris"})
	r, err := retry(cs, "get_weather", map[string]any{"location": "Boston"}, state, "units", map[string]any{"units": "celsius"})
	wantInvalidParams(t, r, err)
	r, err = retry(cs, "approve_payment", map[string]any{"amount": 1000}, state, "approve", map[string]any{"ok": true})
	wantInvalidParams(t, r, err)
	r, err = retry(cs, "get_weather", map[string]any{"location": "Paris"}, state, "units", map[string]any{"units": "celsius"})
	if err != nil || !strings.Contains(resultText(t, r), "Paris") {
		t.Fatalf("the original request: got %+v, %v", r, err)
	}
}

func TestMCP_R6_OneTimeToolStateWorksOnce(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	// Without recorded outcomes, which would answer the second retry with
	// the first one's answer (outcomes_go_test.go).
	url := startMCP(t, s, "-record-outcomes=false")
	cs := mcpSession(t, url, "alice-token", false, nil)
	args := map[string]any{"amount": 42}
	state := firstRound(t, cs, "approve_payment", args)
	r, err := retry(cs, "approve_payment", args, state, "approve", map[string]any{"ok": true})
	if err != nil || resultText(t, r) != "Paid 42.00" {
		t.Fatalf("first retry: got %+v, %v", r, err)
	}
	r, err = retry(cs, "approve_payment", args, state, "approve", map[string]any{"ok": true})
	wantInvalidParams(t, r, err)
}

func TestMCP_R4_ExpiredStateIsRejected(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir(), "--skew", "0s")
	url := startMCP(t, s, "-state-ttl", "1s")
	cs := mcpSession(t, url, "alice-token", false, nil)
	args := map[string]any{"location": "Paris"}
	state := firstRound(t, cs, "get_weather", args)
	time.Sleep(1100 * time.Millisecond)
	r, err := retry(cs, "get_weather", args, state, "units", map[string]any{"units": "celsius"})
	wantInvalidParams(t, r, err)
	// The log is read from the sealer's stderr as it comes: wait for it.
	waitFor(t, "the sealer to judge the state expired", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"EXPIRED"`)
	})
}
