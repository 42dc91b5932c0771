// Package protostruct computes the request digest (FORMAT.md, "Request
// digest") of MCP params held as a protobuf Struct, the form the sealer's
// API carries them in. It adapts google.protobuf.Struct to
// [mcpdigest.Value]: mcpdigest walks the Struct and writes its RFC 8785 form
// itself, with the limits and the rules of its other paths, so that the
// digest keeps one implementation while mcpdigest links no protobuf.
package protostruct

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// Digest returns the digest of an MCP request of method whose params are
// params: what mcpdigest.Request returns for the same params as JSON text,
// and the same refusals (mcpdigest.Params). A nil params has no members.
func Digest(method string, params *structpb.Struct) (sealer.Digest, error) {
	return mcpdigest.Params(method, (*object)(params))
}

// object is a Struct as an mcpdigest.Value of kind Object.
type object structpb.Struct

var _ mcpdigest.Value = (*object)(nil)

func (o *object) Kind() mcpdigest.Kind      { return mcpdigest.Object }
func (o *object) Bool() bool                { return false }
func (o *object) Number() float64           { return 0 }
func (o *object) String() string            { return "" }
func (o *object) Len() int                  { return len((*structpb.Struct)(o).GetFields()) }
func (o *object) Index(int) mcpdigest.Value { return nil }

func (o *object) AppendMembers(dst []mcpdigest.Member) []mcpdigest.Member {
	for name, v := range (*structpb.Struct)(o).GetFields() {
		dst = append(dst, mcpdigest.Member{Name: name, Value: value{v}})
	}
	return dst
}

// value is a Value of a Struct as an mcpdigest.Value: a struct of one
// pointer, which an interface holds without allocating. A nil Value, or one
// whose kind is unset, is null, as protojson reads it.
type value struct{ v *structpb.Value }

var _ mcpdigest.Value = value{}

func (v value) Kind() mcpdigest.Kind {
	switch v.v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return mcpdigest.Null
	case *structpb.Value_BoolValue:
		return mcpdigest.Bool
	case *structpb.Value_NumberValue:
		return mcpdigest.Number
	case *structpb.Value_StringValue:
		return mcpdigest.String
	case *structpb.Value_ListValue:
		return mcpdigest.Array
	case *structpb.Value_StructValue:
		return mcpdigest.Object
	}
	return mcpdigest.Invalid
}

func (v value) Bool() bool      { return v.v.GetBoolValue() }
func (v value) Number() float64 { return v.v.GetNumberValue() }
func (v value) String() string  { return v.v.GetStringValue() }

func (v value) Len() int {
	switch k := v.v.GetKind().(type) {
	case *structpb.Value_ListValue:
		return len(k.ListValue.GetValues())
	case *structpb.Value_StructValue:
		return len(k.StructValue.GetFields())
	}
	return 0
}

func (v value) Index(i int) mcpdigest.Value {
	return value{v.v.GetListValue().GetValues()[i]}
}

func (v value) AppendMembers(dst []mcpdigest.Member) []mcpdigest.Member {
	return (*object)(v.v.GetStructValue()).AppendMembers(dst)
}
