package server

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// TestBindingDigest_Errors holds the error of each way a binding is refused
// to its sentinel and to the reason the caller sees: the binding's own shape
// is errBadRequest, the digest's refusals (mcpdigest) sealer.ErrArgument or
// sealer.ErrMethod, all of them INVALID_ARGUMENT.
func TestBindingDigest_Errors(t *testing.T) {
	call := func(args *structpb.Value) *sealerv1.Binding {
		return &sealerv1.Binding{Method: "tools/call", Params: &structpb.Struct{Fields: map[string]*structpb.Value{
			"name": structpb.NewStringValue("x"), "arguments": args}}}
	}
	object := func(name string, v *structpb.Value) *structpb.Value {
		return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{name: v}})
	}
	deep := structpb.NewListValue(&structpb.ListValue{})
	for range mcpdigest.MaxDepth - 1 {
		deep = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{deep}})
	}
	for _, tc := range []struct {
		name    string
		binding *sealerv1.Binding
		want    error // nil: accepted
	}{
		{"no request", nil, errBadRequest},
		{"digest and method", &sealerv1.Binding{Digest: make([]byte, 32), Method: "tools/call"}, errBadRequest},
		{"digest and params", &sealerv1.Binding{Digest: make([]byte, 32), Params: &structpb.Struct{}}, errBadRequest},
		{"digest", &sealerv1.Binding{Digest: bytes.Repeat([]byte{7}, 32)}, nil},
		{"short digest", &sealerv1.Binding{Digest: make([]byte, 31)}, sealer.ErrArgument},
		{"tools/call", call(object("location", structpb.NewStringValue("New York"))), nil},
		{"tools/list", &sealerv1.Binding{Method: "tools/list"}, sealer.ErrMethod},
		{"no params", &sealerv1.Binding{Method: "tools/call"}, sealer.ErrArgument},
		{"case variant", &sealerv1.Binding{Method: "resources/read", Params: &structpb.Struct{Fields: map[string]*structpb.Value{
			"uri": structpb.NewStringValue("file:///a"), "URI": structpb.NewStringValue("file:///b")}}}, sealer.ErrArgument},
		{"arguments a list", call(structpb.NewListValue(&structpb.ListValue{})), sealer.ErrArgument},
		{"65 levels", call(object("a", deep)), sealer.ErrArgument},
		{"number beyond 2^53", call(object("a", structpb.NewNumberValue(1<<60))), sealer.ErrArgument},
		{"NaN", call(object("a", structpb.NewNumberValue(math.NaN()))), sealer.ErrArgument},
		{"infinity", call(object("a", structpb.NewNumberValue(math.Inf(-1)))), sealer.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bindingDigest(tc.binding)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				return
			}
			st, got := statusOf(err)
			if code := status.Code(st); code != codes.InvalidArgument || got != reasonInvalidArgument {
				t.Fatalf("got %v and reason %s, want %v and %s", code, got, codes.InvalidArgument, reasonInvalidArgument)
			}
		})
	}
}

// BenchmarkBindingDigest_ToolCall is the digest of an ordinary tools/call,
// computed on every Seal and Open that sends params.
func BenchmarkBindingDigest_ToolCall(b *testing.B) {
	params := &structpb.Struct{}
	if err := params.UnmarshalJSON([]byte(`{"name":"get_weather","arguments":{"location":"New York"}}`)); err != nil {
		b.Fatal(err)
	}
	bind := &sealerv1.Binding{Method: "tools/call", Params: params}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bindingDigest(bind); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBindingDigest_8000Keys is the sort of member names at its worst:
// 8,000 names of 250 bytes that differ only in their last bytes.
func BenchmarkBindingDigest_8000Keys(b *testing.B) {
	args := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	prefix := strings.Repeat("k", 242)
	for i := range 8000 {
		args.Fields[fmt.Sprintf("%s%08d", prefix, i)] = structpb.NewNumberValue(float64(i))
	}
	bind := &sealerv1.Binding{Method: "tools/call", Params: &structpb.Struct{Fields: map[string]*structpb.Value{
		"name": structpb.NewStringValue("x"), "arguments": structpb.NewStructValue(args)}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bindingDigest(bind); err != nil {
			b.Fatal(err)
		}
	}
}
