package server

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/sealer"
)

// viaJSON is the reference path: the salient members encoded as JSON text,
// then sealer.RequestDigest (RFC 8785 by github.com/gowebpki/jcs).
func viaJSON(method string, params *structpb.Struct) (sealer.Digest, error) {
	salient := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, name := range sealer.SalientParams(method) {
		if v, ok := params.GetFields()[name]; ok {
			salient.Fields[name] = v
		}
	}
	text, err := protojson.Marshal(salient)
	if err != nil {
		return sealer.Digest{}, err
	}
	return sealer.RequestDigest(method, text)
}

// FuzzBindingDigest holds the Struct encoder to the JSON path: for any params
// a caller can send, both accept or both refuse, with the same digest.
func FuzzBindingDigest(f *testing.F) {
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
		got, err := bindingDigest(&sealerv1.Binding{Method: method, Params: &st})
		if (err != nil) != (wantErr != nil) || got != want {
			t.Fatalf("%s %s: Struct path %v, %v; JSON path %v, %v", method, params, got, err, want, wantErr)
		}
	})
}
