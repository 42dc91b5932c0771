package sealer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// FuzzOpen checks that Open never panics, returns nothing with an error,
// finds every string but the states that were sealed invalid (R1, R2), and
// agrees with the opener of both versions written from FORMAT.md alone
// (spec_test.go). The sealed states are the committed seal vectors of both
// formats (vectors.json, flows.json), so that every fuzzing process knows the
// same ones; the opening vectors of both seed the corpus, so the fuzzer
// mutates version 2 states as well as version 1.
func FuzzOpen(f *testing.F) {
	v := loadVectors(f)
	flows := loadFlowVectors(f)
	ring := vectorRing(f, v) // flows.json has the same keys
	sealed := map[string]bool{}
	for _, s := range v.Seal {
		sealed[s.State] = true
	}
	for _, s := range flows.Seal {
		sealed[s.State] = true
	}
	for _, s := range v.Open {
		f.Add(s.State)
	}
	for _, s := range flows.Open {
		f.Add(s.State)
		if s.Want != "invalid" {
			sealed[s.State] = true // authentic, sealed outside the seal vectors (the version 1 state)
		}
	}
	req, err := mcpdigest.Request("tools/call", []byte(`{"name":"get_weather","arguments":{"location":"New York"}}`))
	if err != nil {
		f.Fatal(err)
	}
	want := sealer.Expect{Principal: "alice", Request: req, Skew: sealer.DefaultSkew}
	now := t0.Add(time.Minute)
	spec := specOpening{ring: specRing(f, v), tenant: "tenant-a", principal: want.Principal, request: req[:],
		now: now.UnixMilli(), skew: want.Skew.Milliseconds(), v2: true} // the retry's input keys not given, as in want
	names := map[error]string{nil: "ok"}
	for name, err := range verdicts {
		names[err] = name
	}
	f.Fuzz(func(t *testing.T, state string) {
		o, err := sealer.Open(ring, "tenant-a", state, want, now)
		spec.state = state
		if got, step, _ := specOpen(spec, mistakes{}); got != names[err] {
			t.Fatalf("Open says %v, FORMAT.md (spec_test.go) %s at step %d", err, got, step)
		}
		switch {
		case err != nil && o != nil:
			t.Fatalf("got %+v with error %v", o, err)
		case sealed[state]:
			return // authentic: other claims than want's may give any verdict
		case err == nil:
			t.Fatalf("opened a state that was never sealed: %q", state)
		case !errors.Is(err, sealer.ErrInvalid):
			t.Fatalf("got %v, want ErrInvalid for a state that was never sealed", err)
		}
	})
}

// FuzzRequestDigest checks that mcpdigest.Request never panics, accepts only
// JSON, gives one digest however the accepted params are spaced, and agrees
// with the digester written from FORMAT.md alone (spec_digest_test.go).
func FuzzRequestDigest(f *testing.F) {
	for _, s := range []string{
		`{"name":"get_weather","arguments":{"location":"New York","days":1,"units":{"t":"C","w":"kmh"}}}`,
		`{"name":"x","arguments":{"a":[1,2.5,-0,1e3,{"b":null}],"c":"\u00e9\ud83d\ude42"},"_meta":{}}`,
		`{"uri":"file:///x","requestState":"abc"}`,
		`{"name":"x","arguments":{"a":9007199254740993}}`,
		`{"name":"x","name":"x"}`,
		`[]`,
	} {
		for _, m := range []byte{0, 1, 2} {
			f.Add(m, []byte(s))
		}
	}
	methods := []string{"tools/call", "prompts/get", "resources/read"}
	f.Fuzz(func(t *testing.T, m byte, params []byte) {
		method := methods[int(m)%len(methods)]
		d, err := mcpdigest.Request(method, params)
		if _, _, want, specErr := specDigest(method, params, digestMistakes{}); (err == nil) != (specErr == nil) || err == nil && !bytes.Equal(d[:], want) {
			t.Fatalf("mcpdigest.Request %v, %v; FORMAT.md (spec_digest_test.go) %x, %v", d, err, want, specErr)
		}
		if err != nil {
			if !errors.Is(err, sealer.ErrArgument) {
				t.Fatalf("got %v, want ErrArgument", err)
			}
			return
		}
		if !json.Valid(params) {
			t.Fatalf("accepted invalid JSON %q", params)
		}
		var spaced bytes.Buffer
		if err := json.Indent(&spaced, params, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		d2, err := mcpdigest.Request(method, spaced.Bytes())
		if err != nil || d2 != d {
			t.Fatalf("indented params: got %v, %v; want %v", d2, err, d)
		}
	})
}

// FuzzOpenOutcome checks that OpenOutcome never panics, returns nothing
// with an error, opens only a blob that SealOutcome made for that tenant and
// state id (the seal vectors of outcomes.json), finds everything else
// invalid, and agrees with the opener written from FORMAT.md alone
// (spec_outcome_test.go). The opening vectors seed the corpus.
func FuzzOpenOutcome(f *testing.F) {
	v := loadOutcomeVectors(f)
	keys := vectorFile{Keys: v.Keys, Sealing: v.Sealing}
	ring, material := vectorRing(f, keys), specRing(f, keys)
	sealed := outcomeSealed(f, v)
	for _, s := range v.Open {
		f.Add(s.Tenant, mustHex(f, s.StateID), mustHex(f, s.Blob))
	}
	f.Fuzz(func(t *testing.T, tenant string, id, blob []byte) {
		var sid sealer.StateID
		copy(sid[:], id)
		outcome, at, err := sealer.OpenOutcome(ring, tenant, sid, blob)
		if got, step, _, _ := specOpenOutcome(material, tenant, sid[:], blob, outcomeMistakes{}); got != map[bool]string{true: "ok", false: "invalid"}[err == nil] {
			t.Fatalf("OpenOutcome says %v, FORMAT.md (spec_outcome_test.go) %s at step %d", err, got, step)
		}
		switch {
		case err != nil && (outcome != nil || !at.IsZero()):
			t.Fatalf("got %x, %v with error %v", outcome, at, err)
		case err != nil && !errors.Is(err, sealer.ErrInvalid):
			t.Fatalf("got %v, want ErrInvalid", err)
		case err == nil && !sealed[[3]string{tenant, string(sid[:]), string(blob)}]:
			t.Fatalf("opened a blob SealOutcome never made for tenant %q and state %s: %x", tenant, sid, blob)
		}
	})
}
