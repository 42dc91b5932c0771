package sealer_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

func exampleRing() *keys.Ring {
	k, err := keys.NewKey(1, bytes.Repeat([]byte{7}, keys.Size), time.Time{})
	if err != nil {
		panic(err)
	}
	ring, err := keys.NewRing([]keys.Key{k}, 1)
	if err != nil {
		panic(err)
	}
	return ring
}

func ExampleSeal() {
	ring := exampleRing()
	// The request that needs more input, as the MCP server received it.
	d, err := mcpdigest.Request("tools/call", []byte(`{"name":"get_weather","arguments":{"location":"New York"}}`))
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	payload := []byte(`{"step":1}`)
	state, err := sealer.Seal(ring, "weather-team", sealer.Claims{
		Principal: "alice", Request: d, IssuedAt: now, ExpiresAt: now.Add(5 * time.Minute),
	}, payload)
	if err != nil {
		panic(err)
	}
	h, _ := sealer.Inspect(state)
	fmt.Println("key version:", h.KeyVersion)
	fmt.Println("overhead in characters:", len(state)-base64.RawURLEncoding.EncodedLen(len(payload)))
	// Output:
	// key version: 1
	// overhead in characters: 146
}

func ExampleOpen() {
	ring := exampleRing()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	first, _ := mcpdigest.Request("tools/call", []byte(`{"name":"get_weather","arguments":{"location":"New York"}}`))
	state, _ := sealer.Seal(ring, "weather-team", sealer.Claims{
		Principal: "alice", Request: first, IssuedAt: now, ExpiresAt: now.Add(5 * time.Minute),
	}, []byte(`{"step":1}`))

	// The retry carries _meta, inputResponses and the requestState: same digest.
	retry, _ := mcpdigest.Request("tools/call", []byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},
		"name":"get_weather","arguments":{"location":"New York"},
		"inputResponses":{"unit":{"action":"accept","content":{"unit":"C"}}},"requestState":"`+state+`"}`))
	o, err := sealer.Open(ring, "weather-team", state, sealer.Expect{Principal: "alice", Request: retry}, now.Add(time.Minute))
	fmt.Printf("%s %v\n", o.Payload, err)

	_, err = sealer.Open(ring, "weather-team", state, sealer.Expect{Principal: "mallory", Request: retry}, now.Add(time.Minute))
	fmt.Println(errors.Is(err, sealer.ErrPrincipalMismatch))
	_, err = sealer.Open(ring, "weather-team", state, sealer.Expect{Principal: "alice", Request: retry}, now.Add(time.Hour))
	fmt.Println(err)
	_, err = sealer.Open(ring, "other-team", state, sealer.Expect{Principal: "alice", Request: retry}, now.Add(time.Minute))
	fmt.Println(err)
	// Output:
	// {"step":1} <nil>
	// true
	// sealer: state expired
	// sealer: invalid state
}

func ExampleSealOutcome() {
	ring := exampleRing()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	d, _ := mcpdigest.Request("tools/call", []byte(`{"name":"book","arguments":{"seat":"12A"}}`))
	state, _ := sealer.Seal(ring, "travel-team", sealer.Claims{
		Principal: "alice", Request: d, IssuedAt: now, ExpiresAt: now.Add(5 * time.Minute), OneTime: true,
	}, nil)

	// The retry opened the one-time state; the handler answered, perhaps
	// after the state expired. The answer is sealed to the state it served.
	o, _ := sealer.Authenticate(ring, "travel-team", state)
	answer := []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"booked"}]}}`)
	blob, err := sealer.SealOutcome(ring, "travel-team", o.ID, answer, now.Add(6*time.Minute))
	if err != nil {
		panic(err)
	}

	// A second retry of the same state passed every check of Open: it gets
	// the recorded answer, and nothing opens it for another state.
	outcome, at, err := sealer.OpenOutcome(ring, "travel-team", o.ID, blob)
	fmt.Printf("%s at %s, %v\n", outcome, at.Format(time.TimeOnly), err)
	_, _, err = sealer.OpenOutcome(ring, "travel-team", sealer.StateID{}, blob)
	fmt.Println(err)
	// Output:
	// {"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"booked"}]}} at 12:06:00, <nil>
	// sealer: invalid state
}

func ExampleAuthenticate() {
	ring := exampleRing()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	d, _ := mcpdigest.Request("tools/call", []byte(`{"name":"book","arguments":{"seat":"12A"}}`))
	state, _ := sealer.Seal(ring, "travel-team", sealer.Claims{
		Principal: "alice", Request: d, IssuedAt: now, ExpiresAt: now.Add(5 * time.Minute), OneTime: true,
	}, []byte("secret"))
	h, _ := sealer.Inspect(state)

	// An hour later the state has expired, but it is still authentic.
	_, err := sealer.Open(ring, "travel-team", state, sealer.Expect{Principal: "alice", Request: d}, now.Add(time.Hour))
	fmt.Println(err)
	o, err := sealer.Authenticate(ring, "travel-team", state)
	fmt.Println(err, o.ID == h.ID, o.OneTime, o.ExpiresAt.Format(time.TimeOnly), o.Payload == nil)
	_, err = sealer.Authenticate(ring, "other-team", state)
	fmt.Println(err)
	// Output:
	// sealer: state expired
	// <nil> true true 12:05:00 true
	// sealer: invalid state
}
