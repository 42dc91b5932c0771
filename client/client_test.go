package client

import (
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

func TestFromStatus(t *testing.T) {
	for reason, want := range reasons {
		st, _ := status.New(codes.InvalidArgument, "m").WithDetails(&errdetails.ErrorInfo{Reason: reason})
		err := fromStatus(st.Err())
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", reason, err, want)
		}
		if s, ok := status.FromError(err); !ok || s.Code() != codes.InvalidArgument {
			t.Errorf("%s: the gRPC status is lost", reason)
		}
		rejected := reason == "INVALID_STATE" || reason == "EXPIRED" || reason == "PRINCIPAL_MISMATCH" ||
			reason == "REQUEST_MISMATCH" || reason == "ALREADY_CONSUMED"
		if Rejected(err) != rejected {
			t.Errorf("%s: Rejected %v, want %v", reason, Rejected(err), rejected)
		}
	}
	if err := fromStatus(status.Error(codes.Unavailable, "connection refused")); Rejected(err) || errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a transport error: got %v, want neither rejected nor a ledger error", err)
	}
	if !errors.Is(fromStatus(mustStatus(t, "EXPIRED")), sealer.ErrExpired) {
		t.Error("EXPIRED does not match sealer.ErrExpired")
	}
}

func mustStatus(t *testing.T, reason string) error {
	st, err := status.New(codes.FailedPrecondition, "m").WithDetails(&errdetails.ErrorInfo{Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestBindings(t *testing.T) {
	b := ToolCall(&mcp.CallToolParamsRaw{Name: "t", Arguments: []byte(`{"a":[1,"x"]}`), RequestState: "ignored"})
	if b.Method != "tools/call" || b.Params["name"] != "t" || b.Params["requestState"] != nil {
		t.Errorf("tool binding: %+v", b)
	}
	if _, err := b.proto(); err != nil {
		t.Error(err)
	}
	p := PromptGet(&mcp.GetPromptParams{Name: "p", Arguments: map[string]string{"k": "v"}})
	if p.Method != "prompts/get" || p.Params["arguments"].(map[string]any)["k"] != "v" {
		t.Errorf("prompt binding: %+v", p)
	}
	r := ResourceRead(&mcp.ReadResourceParams{URI: "file:///x"})
	if r.Method != "resources/read" || r.Params["uri"] != "file:///x" {
		t.Errorf("resource binding: %+v", r)
	}
}
