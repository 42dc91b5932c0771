package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server"
)

// wire is a reason as the sealer sends it (server.reasonText).
func wire(r sealerv1.Reason) string { return strings.TrimPrefix(r.String(), "REASON_") }

// Every reason the sealer sends comes back as its sentinel, with the gRPC
// status kept and its name from Reason; the eight that refuse a state are
// Rejected.
func TestFromStatus(t *testing.T) {
	rejected := map[sealerv1.Reason]bool{
		sealerv1.Reason_REASON_INVALID_STATE: true, sealerv1.Reason_REASON_EXPIRED: true,
		sealerv1.Reason_REASON_PRINCIPAL_MISMATCH: true, sealerv1.Reason_REASON_REQUEST_MISMATCH: true,
		sealerv1.Reason_REASON_ALREADY_CONSUMED: true, sealerv1.Reason_REASON_INPUT_MISMATCH: true,
		sealerv1.Reason_REASON_FLOW_EXPIRED: true, sealerv1.Reason_REASON_FLOW_EXHAUSTED: true,
		sealerv1.Reason_REASON_OUTCOME_CONFLICT: true,
	}
	values := sealerv1.Reason(0).Descriptor().Values()
	for i := range values.Len() {
		r := sealerv1.Reason(values.Get(i).Number())
		if r == sealerv1.Reason_REASON_UNSPECIFIED {
			continue
		}
		t.Run(wire(r), func(t *testing.T) {
			err := fromStatus(mustStatus(t, codes.InvalidArgument, wire(r), "m"))
			want := sentinelOf(r)
			known := want != nil
			switch {
			case r == sealerv1.Reason_REASON_INTERNAL:
				if known || errors.As(err, new(*reasonError)) {
					t.Errorf("got %v, want no sentinel", err)
				}
			case !known:
				t.Fatal("no sentinel for a reason the sealer sends")
			case !errors.Is(err, want):
				t.Errorf("got %v, want %v", err, want)
			}
			switch s, ok := status.FromError(err); {
			case !ok || s.Code() != codes.InvalidArgument:
				t.Errorf("the gRPC status is lost: got %v", s)
			case known && s.Message() != "m":
				t.Errorf("the status's message: got %q, want m", s.Message())
			}
			if Rejected(err) != rejected[r] {
				t.Errorf("Rejected %v, want %v", Rejected(err), rejected[r])
			}
			if got := Reason(err); known && got != wire(r) || !known && got != "" {
				t.Errorf("Reason %q, want %q", got, wire(r))
			}
		})
	}
	for _, reason := range []string{"", "OK", "UNSPECIFIED", "REASON_EXPIRED", "expired", "SOMETHING_NEW"} {
		if err := fromStatus(mustStatus(t, codes.FailedPrecondition, reason, "m")); errors.As(err, new(*reasonError)) || status.Code(err) != codes.FailedPrecondition {
			t.Errorf("reason %q: got %v, want the status as it is", reason, err)
		}
	}
	if err := fromStatus(status.Error(codes.Unavailable, "connection refused")); Rejected(err) || errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a transport error: got %v, want neither rejected nor a ledger error", err)
	} else if status.Code(err) != codes.Unavailable {
		t.Errorf("a transport error lost its code: %v", status.Code(err))
	}
}

// errors.Is reads the same over the network as in process: each reason
// matches the sentinel the core or the ledger returns for it.
func TestFromStatus_CoreSentinels(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   error
	}{
		{"INVALID_STATE", sealer.ErrInvalid},
		{"EXPIRED", sealer.ErrExpired},
		{"PRINCIPAL_MISMATCH", sealer.ErrPrincipalMismatch},
		{"REQUEST_MISMATCH", sealer.ErrRequestMismatch},
		{"INPUT_MISMATCH", sealer.ErrInputMismatch},
		{"FLOW_EXPIRED", sealer.ErrFlowExpired},
		{"FLOW_EXHAUSTED", sealer.ErrFlowExhausted},
		{"ALREADY_CONSUMED", ledger.ErrConsumed},
		{"OUTCOME_CONFLICT", ledger.ErrConflict},
		{"OUTCOME_CONFLICT", ErrOutcomeConflict},
		{"OUTCOME_CONFLICT", ErrAlreadyConsumed},
		{"IN_PROGRESS", ledger.ErrPending},
		{"IN_PROGRESS", ErrInProgress},
		{"LEDGER_UNAVAILABLE", ledger.ErrUnavailable},
		{"INVALID_ARGUMENT", sealer.ErrArgument},
		{"INVALID_ARGUMENT", ErrInvalidArgument},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			if err := fromStatus(mustStatus(t, codes.FailedPrecondition, tc.reason, "m")); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	if !errors.Is(ErrInvalidArgument, sealer.ErrArgument) {
		t.Error("ErrInvalidArgument does not match sealer.ErrArgument")
	}
}

// The error says what the sealer said, once: its sentinel's text, then what
// the message adds.
func TestReasonError_Message(t *testing.T) {
	for _, tc := range []struct {
		name, reason, msg, want string
	}{
		{"the sentinel's text", "EXPIRED", "sealer: state expired", "sealer: state expired"},
		{"the ledger's text", "ALREADY_CONSUMED", "ledger: state already consumed", "ledger: state already consumed"},
		{"no message", "KEYS_UNAVAILABLE", "", "sealer: no keys loaded yet"},
		{"the sentinel's text and more", "INVALID_ARGUMENT", "sealer: invalid argument: empty principal", "sealer: invalid argument: empty principal"},
		{"another text of the sealer", "INVALID_ARGUMENT", "sealer: invalid request: ttl 1h0m0s outside [1s, 10m0s]", "sealer: invalid argument: invalid request: ttl 1h0m0s outside [1s, 10m0s]"},
		{"a text of the gateway", "INVALID_ARGUMENT", `proto: unknown field "x"`, `sealer: invalid argument: proto: unknown field "x"`},
		{"why unauthenticated", "UNAUTHENTICATED", "sealer: unauthenticated: unknown bearer token", "sealer: unauthenticated: unknown bearer token"},
		{"which limit", "RESOURCE_EXHAUSTED", "sealer: tenant limit exceeded: more than the tenant's concurrent calls", "sealer: tenant limit exceeded: more than the tenant's concurrent calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromStatus(mustStatus(t, codes.InvalidArgument, tc.reason, tc.msg)).Error(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// startSealer runs a real sealer in process, with edit applied to its
// defaults, and returns a client of it.
func startSealer(t *testing.T, edit func(*server.Config)) *Client {
	t.Helper()
	cfg := server.Defaults()
	cfg.DataDir, cfg.GRPCAddr, cfg.HTTPAddr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ShutdownDelay = 0 // no load balancer to wait for
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	sc, err := Dial(s.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

// Against a real sealer: the reasons it sends come back as the sentinels,
// with its messages.
func TestClient_ErrorsFromTheSealer(t *testing.T) {
	sc := startSealer(t, nil)
	ctx := context.Background()

	call := ToolCall("get_weather", []byte(`{"location":"Paris"}`))
	state, _, err := sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, Payload: []byte("p"), TTL: time.Minute, OneTime: true})
	if err != nil {
		t.Fatal(err)
	}
	_, _, errSealEmpty := sc.Seal(ctx, SealRequest{Request: call, TTL: time.Minute})
	_, errOpenEmpty := sc.Open(ctx, OpenRequest{State: state, Request: call})
	forged := []byte(state)
	if i := len(forged) / 2; forged[i] == 'A' {
		forged[i] = 'B'
	} else {
		forged[i] = 'A'
	}
	_, errForged := sc.Open(ctx, OpenRequest{State: string(forged), Principal: "alice", Request: call})
	_, errMallory := sc.Open(ctx, OpenRequest{State: state, Principal: "mallory", Request: call})
	_, errOther := sc.Open(ctx, OpenRequest{State: state, Principal: "alice", Request: ToolCall("get_weather", []byte(`{"location":"Oslo"}`))})
	if _, err := sc.Open(ctx, OpenRequest{State: state, Principal: "alice", Request: call}); err != nil {
		t.Fatal(err)
	}
	_, errAgain := sc.Open(ctx, OpenRequest{State: state, Principal: "alice", Request: call})
	for _, tc := range []struct {
		name string
		err  error
		want error
		text string
	}{
		{"seal without a principal", errSealEmpty, sealer.ErrArgument, "sealer: invalid argument: empty principal"},
		{"open without a principal", errOpenEmpty, ErrInvalidArgument, "sealer: invalid argument: invalid request: empty principal"},
		{"forged", errForged, sealer.ErrInvalid, "sealer: invalid state"},
		{"another principal", errMallory, sealer.ErrPrincipalMismatch, "sealer: state issued to another principal"},
		{"another request", errOther, sealer.ErrRequestMismatch, "sealer: state issued for another request"},
		{"opened twice", errAgain, ledger.ErrConsumed, "ledger: state already consumed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) || tc.err.Error() != tc.text {
				t.Errorf("got %v, want %v saying %q", tc.err, tc.want, tc.text)
			}
		})
	}
}

func mustStatus(t *testing.T, code codes.Code, reason, msg string) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "sealer.mcp"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestBindings(t *testing.T) {
	b := ToolCall("t", []byte(`{"a":[1,"x"]}`))
	if b.Method != "tools/call" || b.Params["name"] != "t" || b.Params["requestState"] != nil {
		t.Errorf("tool binding: %+v", b)
	}
	if _, err := b.proto(); err != nil {
		t.Error(err)
	}
	p := PromptGet("p", map[string]string{"k": "v"})
	if p.Method != "prompts/get" || p.Params["arguments"].(map[string]any)["k"] != "v" {
		t.Errorf("prompt binding: %+v", p)
	}
	r := ResourceRead("file:///x")
	if r.Method != "resources/read" || r.Params["uri"] != "file:///x" {
		t.Errorf("resource binding: %+v", r)
	}
}

// The client sends a digest; it must be the one the sealer computes from the
// same params (R5), or a state sealed by a Go server would not open for a
// TypeScript one and the reverse.
func TestBindingDigestIsTheSealers(t *testing.T) {
	b := ToolCall("get_weather", []byte(`{"location":"Paris","days":[1,2.5,"x"],"deep":{"b":null,"a":true}}`))
	got, err := b.proto()
	if err != nil {
		t.Fatal(err)
	}
	want, err := mcpdigest.Request("tools/call", []byte(`{"arguments":{"deep":{"a":true,"b":null},"days":[1,2.5,"x"],"location":"Paris"},"name":"get_weather"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.GetDigest()) != string(want[:]) || got.GetParams() != nil || got.GetMethod() != "" {
		t.Errorf("binding %x, want only the digest %x", got.GetDigest(), want)
	}
	other, _ := ToolCall("get_weather", []byte(`{"location":"Oslo"}`)).proto()
	if string(other.GetDigest()) == string(got.GetDigest()) {
		t.Error("other arguments, same digest")
	}
	for _, bad := range []Binding{
		{Method: "tools/list", Params: map[string]any{"name": "x"}},
		{Method: "tools/call", Params: map[string]any{"arguments": map[string]any{}}},
		{Method: "tools/call", Params: map[string]any{"name": "x", "arguments": map[string]any{"n": 1e300}}},
		ToolCall("x", []byte(`{"a":1,"a":2}`)),
		ToolCall("x", []byte(`[1]`)),
		ToolCall("x", []byte(`{"a":`)),
		ToolCall("x", []byte("{\"a\":\"\xff\"}")),
	} {
		if _, err := bad.proto(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: got %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// FuzzToolCallDigest holds the client's digest to the sealer's: for any
// arguments, ToolCall's binding and mcpdigest.Request over the same params
// text both refuse, or agree on the digest (R5).
func FuzzToolCallDigest(f *testing.F) {
	for _, args := range []string{`{"location":"Paris"}`, `{"a":[1,2.5e3,"\u00e9",null,true],"b":{}}`, `{"a":1,"a":2}`, `[1]`, `null`, `{"n":9007199254740993}`, `{"s":"<\u2028>"}`} {
		f.Add(args)
	}
	f.Fuzz(func(t *testing.T, args string) {
		if len(args) > 4096 {
			t.Skip()
		}
		mine, errMine := ToolCall("t", []byte(args)).proto()
		params := `{"name":"t","arguments":` + args + `}`
		switch {
		case args == "": // no arguments at all
			params = `{"name":"t"}`
		case !json.Valid([]byte(args)):
			// Not one JSON value: the client must refuse it, whatever the
			// spliced params text would be.
			if errMine == nil {
				t.Fatalf("client accepted arguments that are not JSON: %q", args)
			}
			return
		}
		theirs, errTheirs := mcpdigest.Request("tools/call", []byte(params))
		switch {
		case (errMine == nil) != (errTheirs == nil):
			t.Fatalf("client error %v, sealer error %v", errMine, errTheirs)
		case errMine == nil && string(mine.GetDigest()) != string(theirs[:]):
			t.Fatalf("client digest %x, sealer digest %x", mine.GetDigest(), theirs)
		}
	})
}

// BenchmarkToolCallDigest_8000Keys is the client's digest (mcpdigest.Decoded)
// of 8,000 argument names of 250 bytes that differ
// only in their last bytes, out of order.
func BenchmarkToolCallDigest_8000Keys(b *testing.B) {
	var args strings.Builder
	args.WriteByte('{')
	prefix := strings.Repeat("k", 242)
	for i := range 8000 {
		if i > 0 {
			args.WriteByte(',')
		}
		fmt.Fprintf(&args, `"%s%08d":%d`, prefix, i*7919%8000, i) // 7919 is prime: a permutation
	}
	args.WriteByte('}')
	bind := ToolCall("x", []byte(args.String()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bind.RequestDigest(); err != nil {
			b.Fatal(err)
		}
	}
}

// A binding made by hand with a member named like a salient one in another
// case is refused before it reaches the network, as the sealer refuses it.
func TestBindingDigest_R5_CaseVariantsRefused(t *testing.T) {
	for _, b := range []Binding{
		{Method: "tools/call", Params: map[string]any{"name": "transfer", "arguments": map[string]any{"amount": 1}, "Arguments": map[string]any{"amount": 100000}}},
		{Method: "tools/call", Params: map[string]any{"name": "transfer", "arguments": map[string]any{"amount": 1}, "NAME": "transfer"}},
		{Method: "tools/call", Params: map[string]any{"name": "transfer", "argumentſ": map[string]any{"amount": 100000}}},
		{Method: "prompts/get", Params: map[string]any{"name": "greeting", "Name": "admin"}},
		{Method: "resources/read", Params: map[string]any{"uri": "file:///etc/motd", "URI": "file:///etc/shadow"}},
	} {
		_, err := b.proto()
		if !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, sealer.ErrArgument) {
			t.Errorf("%v: got %v, want ErrInvalidArgument and sealer.ErrArgument", b.Params, err)
		}
	}
	// Other members are ignored, as before.
	got, err := Binding{Method: "resources/read", Params: map[string]any{"uri": "u", "Arguments": 1, "NAME": "x"}}.RequestDigest()
	want, _ := mcpdigest.Request("resources/read", []byte(`{"uri":"u"}`))
	if err != nil || got != want {
		t.Errorf("resources/read with Arguments and NAME: got %v, %v; want %v", got, err, want)
	}
}

func TestBindingDigest_Limits(t *testing.T) {
	nested := func(levels int) string { // an object, then arrays
		return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
	}
	wide := func(n int) string { // n values: an object, an array, zeros
		return `{"a":[` + strings.TrimSuffix(strings.Repeat("0,", n-2), ",") + `]}`
	}
	for _, tc := range []struct {
		name, args string
		ok         bool
	}{
		{"64 levels", nested(mcpdigest.MaxDepth), true},
		{"65 levels", nested(mcpdigest.MaxDepth + 1), false},
		{"100,000 values", wide(mcpdigest.MaxValues), true},
		{"100,001 values", wide(mcpdigest.MaxValues + 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ToolCall("x", []byte(tc.args)).proto()
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want ok %v", err, tc.ok)
			}
			_, errSealer := mcpdigest.Request("tools/call", []byte(`{"name":"x","arguments":`+tc.args+`}`))
			if (err == nil) != (errSealer == nil) {
				t.Fatalf("client %v, sealer %v", err, errSealer)
			}
		})
	}
}

// countingSealer counts the calls that reach it and seals nothing.
type countingSealer struct {
	sealerv1.UnimplementedSealerServer
	calls atomic.Int32
}

func (c *countingSealer) Seal(context.Context, *sealerv1.SealRequest) (*sealerv1.SealResponse, error) {
	c.calls.Add(1)
	return &sealerv1.SealResponse{RequestState: "S", ExpiresAt: timestamppb.Now()}, nil
}

func (c *countingSealer) Open(context.Context, *sealerv1.OpenRequest) (*sealerv1.OpenResponse, error) {
	c.calls.Add(1)
	return &sealerv1.OpenResponse{IssuedAt: timestamppb.Now(), ExpiresAt: timestamppb.Now()}, nil
}

// dialFake serves impl on loopback for the test and returns a client of
// it; both stop at cleanup.
func dialFake(t *testing.T, impl sealerv1.SealerServer) *Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	sealerv1.RegisterSealerServer(gs, impl)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	sc, err := Dial(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

// Issue 35: bindings whose arguments hold member names that differ only in
// case, at any depth, are refused by Seal and Open before the sealer is
// called, as the MCP client's error (Rejected, -32602); the same names in
// sibling objects, or with other separators, reach it.
func TestClient_ArgumentNamesCollide(t *testing.T) {
	fake := &countingSealer{}
	sc := dialFake(t, fake)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		bind    Binding
		refused bool
	}{
		{"tools/call", ToolCall("buy", []byte(`{"Item":"car","item":"pen"}`)), true},
		{"tools/call, deep", ToolCall("buy", []byte(`{"o":[{"x":{"sku":1,"SKU":2}}]}`)), true},
		{"tools/call, long s", ToolCall("buy", []byte(`{"size":1,"ſize":2}`)), true},
		{"prompts/get", PromptGet("p", map[string]string{"Item": "car", "item": "pen"}), true},
		{"by hand, a map", Binding{Method: "tools/call", Params: map[string]any{"name": "buy", "arguments": map[string]any{"a": map[string]any{"K": 1, "k": 2}}}}, true},
		{"tools/call, siblings", ToolCall("buy", []byte(`{"a":{"x":1},"b":{"X":1}}`)), false},
		{"tools/call, separators", ToolCall("buy", []byte(`{"item_id":1,"itemId":2}`)), false},
		{"prompts/get, one of each", PromptGet("p", map[string]string{"item": "pen"}), false},
		{"a digest of the caller's own", Binding{Digest: make([]byte, 32)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fake.calls.Load()
			_, _, errSeal := sc.Seal(ctx, SealRequest{Principal: "alice", Request: tc.bind})
			_, errOpen := sc.Open(ctx, OpenRequest{State: "S", Principal: "alice", Request: tc.bind})
			calls := fake.calls.Load() - before
			for op, err := range map[string]error{"Seal": errSeal, "Open": errOpen} {
				if tc.refused && (!errors.Is(err, ErrNamesCollide) || !Rejected(err) || !errors.Is(err, sealer.ErrArgument)) {
					t.Errorf("%s: got %v, want ErrNamesCollide, Rejected, wrapping sealer.ErrArgument", op, err)
				}
				if !tc.refused && err != nil {
					t.Errorf("%s: got %v, want no error", op, err)
				}
			}
			if want := map[bool]int32{true: 0, false: 2}[tc.refused]; calls != want {
				t.Errorf("the sealer was called %d times, want %d", calls, want)
			}
		})
	}
	// The digest itself is unchanged: both orders bind alike.
	a, errA := ToolCall("buy", []byte(`{"Item":"car","item":"pen"}`)).RequestDigest()
	b, errB := ToolCall("buy", []byte(`{"item":"pen","Item":"car"}`)).RequestDigest()
	if errA != nil || errB != nil || a != b {
		t.Errorf("digests %v (%v) and %v (%v), want equal", a, errA, b, errB)
	}
}
