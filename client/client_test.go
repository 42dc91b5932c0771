package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

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
	} else if status.Code(err) != codes.Unavailable {
		t.Errorf("a transport error lost its code: %v", status.Code(err))
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
	want, err := sealer.RequestDigest("tools/call", []byte(`{"arguments":{"deep":{"a":true,"b":null},"days":[1,2.5,"x"],"location":"Paris"},"name":"get_weather"}`))
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
// arguments, ToolCall's binding and sealer.RequestDigest over the same params
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
		theirs, errTheirs := sealer.RequestDigest("tools/call", []byte(params))
		switch {
		case (errMine == nil) != (errTheirs == nil):
			t.Fatalf("client error %v, sealer error %v", errMine, errTheirs)
		case errMine == nil && string(mine.GetDigest()) != string(theirs[:]):
			t.Fatalf("client digest %x, sealer digest %x", mine.GetDigest(), theirs)
		}
	})
}

// BenchmarkToolCallDigest_8000Keys is the client's digest (encoding/json, then
// github.com/gowebpki/jcs) of 8,000 argument names of 250 bytes that differ
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
	want, _ := sealer.RequestDigest("resources/read", []byte(`{"uri":"u"}`))
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
		{"64 levels", nested(sealer.MaxDepth), true},
		{"65 levels", nested(sealer.MaxDepth + 1), false},
		{"100,000 values", wide(sealer.MaxValues), true},
		{"100,001 values", wide(sealer.MaxValues + 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ToolCall("x", []byte(tc.args)).proto()
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want ok %v", err, tc.ok)
			}
			_, errSealer := sealer.RequestDigest("tools/call", []byte(`{"name":"x","arguments":`+tc.args+`}`))
			if (err == nil) != (errSealer == nil) {
				t.Fatalf("client %v, sealer %v", err, errSealer)
			}
		})
	}
}
