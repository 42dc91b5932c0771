//go:build ignore

// This program writes testdata/vectors.json: states sealed by this package
// and the verdict Open must reach on each, plus request digests, so that
// another implementation of FORMAT.md can check itself against this one.
//
//	go run gen_vectors.go
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log"
	"os"
	"strings"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

type keyJSON struct {
	ID  uint32 `json:"id"`
	Key string `json:"key"` // hex
}

type stateVector struct {
	Name      string `json:"name"`
	Tenant    string `json:"tenant"`
	State     string `json:"state"`
	Principal string `json:"principal"`
	Request   string `json:"request"` // hex digest the caller expects
	Now       string `json:"now"`
	Want      string `json:"want"` // ok, invalid, expired, principal_mismatch, request_mismatch
	Payload   string `json:"payload,omitempty"`
	IssuedAt  string `json:"issuedAt,omitempty"`
	ExpiresAt string `json:"expiresAt,omitempty"`
	OneTime   bool   `json:"oneTime,omitempty"`
	ID        string `json:"id,omitempty"`
}

type digestVector struct {
	Method string `json:"method"`
	Params string `json:"params"`
	Digest string `json:"digest,omitempty"` // hex; empty when the request is rejected
}

func main() {
	material := func(v uint32) []byte { return bytes.Repeat([]byte{byte(v) * 0x11}, keys.Size) }
	key := func(v uint32) keys.Key {
		k, err := keys.NewKey(v, material(v), time.Time{})
		check(err)
		return k
	}
	ring, err := keys.NewRing([]keys.Key{key(1), key(2)}, 2)
	check(err)
	retired, err := keys.NewRing([]keys.Key{key(3)}, 3)
	check(err)
	oldRing, err := keys.NewRing([]keys.Key{key(1)}, 1)
	check(err)

	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	req, err := sealer.RequestDigest("tools/call", []byte(`{"name":"get_weather","arguments":{"location":"New York"}}`))
	check(err)
	other, err := sealer.RequestDigest("tools/call", []byte(`{"name":"get_weather","arguments":{"location":"Boston"}}`))
	check(err)
	claims := sealer.Claims{Principal: "alice", Request: req, IssuedAt: t0, ExpiresAt: t0.Add(5 * time.Minute)}
	oneTime := claims
	oneTime.OneTime = true
	seal := func(r *keys.Ring, tenant string, c sealer.Claims, payload string) string {
		s, err := sealer.Seal(r, tenant, c, []byte(payload))
		check(err)
		return s
	}
	good := seal(ring, "tenant-a", claims, `{"step":1}`)
	vec := func(name, state, principal string, d sealer.Digest, now time.Time, want string) stateVector {
		return stateVector{Name: name, Tenant: "tenant-a", State: state, Principal: principal,
			Request: hex.EncodeToString(d[:]), Now: now.Format(time.RFC3339Nano), Want: want}
	}
	ok := func(v stateVector, c sealer.Claims, payload string) stateVector {
		h, err := sealer.Inspect(v.State)
		check(err)
		v.Payload = base64.StdEncoding.EncodeToString([]byte(payload))
		v.IssuedAt, v.ExpiresAt = c.IssuedAt.Format(time.RFC3339Nano), c.ExpiresAt.Format(time.RFC3339Nano)
		v.OneTime, v.ID = c.OneTime, h.ID.String()
		return v
	}
	mutate := func(state string, f func([]byte)) string {
		raw, err := base64.RawURLEncoding.DecodeString(state)
		check(err)
		f(raw)
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	at := t0.Add(time.Minute)
	states := []stateVector{
		ok(vec("valid", good, "alice", req, at, "ok"), claims, `{"step":1}`),
		ok(vec("valid one-time", seal(ring, "tenant-a", oneTime, ""), "alice", req, at, "ok"), oneTime, ""),
		ok(vec("valid older version", seal(oldRing, "tenant-a", claims, "old"), "alice", req, at, "ok"), claims, "old"),
		ok(vec("valid within skew", good, "alice", req, claims.ExpiresAt.Add(sealer.DefaultSkew), "ok"), claims, `{"step":1}`),
		vec("expired", good, "alice", req, claims.ExpiresAt.Add(sealer.DefaultSkew+time.Millisecond), "expired"),
		vec("other principal", good, "mallory", req, at, "principal_mismatch"),
		vec("other request", good, "alice", other, at, "request_mismatch"),
		vec("other tenant", seal(ring, "tenant-b", claims, `{"step":1}`), "alice", req, at, "invalid"),
		vec("retired key version", seal(retired, "tenant-a", claims, `{"step":1}`), "alice", req, at, "invalid"),
		vec("unknown format version", mutate(good, func(b []byte) { b[0] = 2 }), "alice", req, at, "invalid"),
		vec("flipped ciphertext bit", mutate(good, func(b []byte) { b[40] ^= 1 }), "alice", req, at, "invalid"),
		vec("flipped tag bit", mutate(good, func(b []byte) { b[len(b)-1] ^= 0x80 }), "alice", req, at, "invalid"),
		vec("flipped nonce bit", mutate(good, func(b []byte) { b[5] ^= 1 }), "alice", req, at, "invalid"),
		vec("truncated", good[:len(good)-1], "alice", req, at, "invalid"),
		vec("padded", good+"=", "alice", req, at, "invalid"),
		vec("not base64url", "+"+good[1:], "alice", req, at, "invalid"),
		vec("empty", "", "alice", req, at, "invalid"),
	}

	digests := []digestVector{}
	for _, d := range []struct{ method, params string }{
		{"tools/call", `{"name":"get_weather","arguments":{"location":"New York"}}`},
		{"tools/call", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"location":"New York"},"name":"get_weather","inputResponses":{"u":{"action":"accept"}},"requestState":"x"}`},
		{"tools/call", `{"name":"get_weather","arguments":{"b":[1.0,2e0,"\u00e9"],"a":{"y":null,"x":true}}}`},
		{"tools/call", `{"name":"get_weather"}`},
		{"tools/call", `{"name":"get_weather","arguments":{}}`},
		{"prompts/get", `{"name":"greeting","arguments":{"who":"world"}}`},
		{"resources/read", `{"uri":"file:///etc/motd","_meta":{}}`},
		{"tools/list", `{}`},
		{"tools/call", `{"name":"x","name":"y"}`},
		{"tools/call", `{"name":"x","arguments":{"id":9007199254740993}}`},
		{"tools/call", `{"name":"x","arguments":[]}`},
		// Members named like a salient one in another case (CheckParamName).
		{"tools/call", `{"name":"transfer","arguments":{"amount":1},"NAME":"transfer"}`},
		{"tools/call", `{"name":"transfer","arguments":{"amount":1},"Arguments":{"amount":100000}}`},
		{"tools/call", `{"name":"transfer","arguments":{"amount":1},"argumentſ":{"amount":100000}}`},
		{"prompts/get", `{"name":"greeting","Name":"admin"}`},
		{"resources/read", `{"uri":"file:///etc/motd","URI":"file:///etc/shadow"}`},
		{"resources/read", `{"uri":"file:///etc/motd","ur\u0131":"file:///etc/shadow"}`},
		{"resources/read", `{"uri":"file:///etc/motd","Arguments":{},"NAME":"x"}`},
		// Nesting: MaxDepth levels of arguments, then one more.
		{"tools/call", `{"name":"x","arguments":` + nested(sealer.MaxDepth) + `}`},
		{"tools/call", `{"name":"x","arguments":` + nested(sealer.MaxDepth+1) + `}`},
	} {
		v := digestVector{Method: d.method, Params: d.params}
		if got, err := sealer.RequestDigest(d.method, []byte(d.params)); err == nil {
			v.Digest = got.String()
		}
		digests = append(digests, v)
	}

	out, err := json.MarshalIndent(map[string]any{
		"keys":    []keyJSON{{1, hex.EncodeToString(material(1))}, {2, hex.EncodeToString(material(2))}},
		"states":  states,
		"digests": digests,
	}, "", "  ")
	check(err)
	check(os.WriteFile("testdata/vectors.json", append(out, '\n'), 0o644))
}

// nested returns arguments nested levels deep: an object, then arrays.
func nested(levels int) string {
	return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
