package server

import (
	"bytes"
	"fmt"
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// restJSON is the gateway's JSON codec: protojson, as runtime.JSONPb, but a
// request body is read once and parsed once. (JSONPb scans each body with
// encoding/json into a copy before protojson parses it again: a sixth of the
// sealer's CPU under REST load, by pprof.) Unknown fields are refused; the
// body must hold one JSON value and nothing after it.
type restJSON struct {
	runtime.JSONPb
}

func newRESTJSON() *restJSON {
	return &restJSON{runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// Marshal implements runtime.Marshaler.
func (j *restJSON) Marshal(v any) ([]byte, error) {
	if m, ok := v.(proto.Message); ok {
		return j.MarshalOptions.Marshal(m)
	}
	return j.JSONPb.Marshal(v) // an error body's details: as the gateway does
}

// NewDecoder implements runtime.Marshaler. The body is bounded before it
// gets here (http.MaxBytesHandler).
func (j *restJSON) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		m, ok := v.(proto.Message)
		if !ok {
			return fmt.Errorf("sealer: cannot decode a request into %T", v)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return io.EOF // an empty body is an empty request, as with JSONPb
		}
		return j.UnmarshalOptions.Unmarshal(data, m)
	})
}
