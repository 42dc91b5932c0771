package protostruct_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/mcpdigest/protostruct"
	"github.com/mcp-sealer/sealer/sealer"
)

// viaJSON is the reference path: the params encoded as JSON text, then
// mcpdigest.Request. Members other than the salient ones keep their names,
// which Request checks, but not their values, which it ignores: their size
// would count against mcpdigest.MaxParams, which binds the JSON path only.
func viaJSON(method string, params *structpb.Struct) (sealer.Digest, error) {
	salient := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for name := range params.GetFields() {
		salient.Fields[name] = structpb.NewNullValue()
	}
	m, _ := mcpdigest.Salient(method)
	for _, name := range m.Names() {
		if v, ok := params.GetFields()[name]; ok {
			salient.Fields[name] = v
		}
	}
	text, err := protojson.Marshal(salient)
	if err != nil {
		return sealer.Digest{}, err
	}
	return mcpdigest.Request(method, text)
}

// FuzzDigest holds the Struct path (Digest, mcpdigest.Params) to the JSON
// path (mcpdigest.Request): for any params a caller can send, both accept
// or both refuse, with the same digest.
func FuzzDigest(f *testing.F) {
	for _, s := range []string{
		`{"name":"get_weather","arguments":{"location":"New York","days":3}}`,
		`{"name":"x","arguments":{"b":[1,2.5,-0,1e21,1e-7,{"é":null,"\u2028":true}],"a":"\"\\\b\f\n\r\t\u0001\u007f\ud83d\ude42"}}`,
		`{"name":"x","arguments":{"\ud83d\ude42":1,"\uff61":2,"z":3}}`,
		`{"uri":"file:///x","_meta":{"k":1},"requestState":"abc"}`,
		`{"name":"x","arguments":{"id":9007199254740993}}`,
		`{"name":"x","arguments":[1]}`,
		`{"name":"","arguments":{}}`,
		`{"name":7}`,
		`{"name":"x","arguments":null}`,
		`{"name":"transfer","arguments":{"amount":1},"Arguments":{"amount":100000}}`,
		`{"name":"x","NAME":"y","argument\u017f":{}}`,
		`{"uri":"file:///x","URI":"file:///y","Arguments":{}}`,
		`{"name":"x","arguments":` + nested(mcpdigest.MaxDepth) + `}`,
		`{"name":"x","arguments":` + nested(mcpdigest.MaxDepth+1) + `}`,
	} {
		for _, m := range []byte{0, 1, 2, 3} {
			f.Add(m, []byte(s))
		}
	}
	methods := []string{"tools/call", "prompts/get", "resources/read", "tools/list"}
	f.Fuzz(func(t *testing.T, m byte, params []byte) {
		var st structpb.Struct
		if protojson.Unmarshal(params, &st) != nil {
			return
		}
		method := methods[int(m)%len(methods)]
		want, wantErr := viaJSON(method, &st)
		got, err := protostruct.Digest(method, &st)
		if (err != nil) != (wantErr != nil) || got != want {
			t.Fatalf("%s %s: Struct path %v, %v; JSON path %v, %v", method, params, got, err, want, wantErr)
		}
	})
}

// nested returns arguments nested levels deep: an object, then arrays.
func nested(levels int) string {
	return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
}

func structOf(t *testing.T, params string) *structpb.Struct {
	t.Helper()
	var st structpb.Struct
	if err := protojson.Unmarshal([]byte(params), &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func TestDigest_R5_CaseVariantsRefused(t *testing.T) {
	for _, tc := range []struct{ name, method, params string }{
		{"Arguments", "tools/call", `{"name":"transfer","arguments":{"amount":1},"Arguments":{"amount":100000}}`},
		{"NAME", "tools/call", `{"name":"transfer","arguments":{"amount":1},"NAME":"transfer"}`},
		{"long s", "tools/call", `{"name":"transfer","arguments":{"amount":1},"argument\u017f":{"amount":100000}}`},
		{"prompts/get", "prompts/get", `{"name":"greeting","Name":"admin"}`},
		{"URI", "resources/read", `{"uri":"file:///etc/motd","URI":"file:///etc/shadow"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protostruct.Digest(tc.method, structOf(t, tc.params))
			if !errors.Is(err, sealer.ErrArgument) {
				t.Fatalf("got %v, want ErrArgument", err)
			}
		})
	}
}

func TestDigest_Limits(t *testing.T) {
	wide := func(n int) *structpb.Value { // n values: an object, a list, zeros
		list := make([]*structpb.Value, n-2)
		for i := range list {
			list[i] = structpb.NewNumberValue(0)
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewListValue(&structpb.ListValue{Values: list})}})
	}
	members := func(n int) *structpb.Value { // n+1 values: an object, zeros
		fields := make(map[string]*structpb.Value, n)
		for i := range n {
			fields[strconv.FormatInt(int64(i), 36)] = structpb.NewNumberValue(0)
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: fields})
	}
	deep := func(levels int) *structpb.Value { // an object, then lists
		v := structpb.NewListValue(&structpb.ListValue{})
		for range levels - 2 {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": v}})
	}
	for _, tc := range []struct {
		name string
		args *structpb.Value
		ok   bool
	}{
		{"64 levels", deep(mcpdigest.MaxDepth), true},
		{"65 levels", deep(mcpdigest.MaxDepth + 1), false},
		{"100,000 levels", deep(100_000), false},
		{"100,000 values", wide(mcpdigest.MaxValues), true},
		{"100,001 values", wide(mcpdigest.MaxValues + 1), false},
		{"99,999 members", members(mcpdigest.MaxValues - 1), true},
		{"100,000 members", members(mcpdigest.MaxValues), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("x"), "arguments": tc.args}}
			_, err := protostruct.Digest("tools/call", params)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, sealer.ErrArgument) {
				t.Fatalf("got %v, want ok %v", err, tc.ok)
			}
			if tc.name == "100,000 levels" {
				return // beyond what protojson encodes; the walk must stop at 65
			}
			_, errJSON := viaJSON("tools/call", params)
			if (err == nil) != (errJSON == nil) {
				t.Fatalf("Struct path %v, JSON path %v", err, errJSON)
			}
		})
	}
}
