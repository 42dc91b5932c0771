package sealer_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

// The flows of these tests end 30 minutes after t0; their states live 5.
var flowDeadline = t0.Add(30 * time.Minute)

func mustInputs(tb testing.TB, keys ...string) sealer.Inputs {
	tb.Helper()
	in, err := sealer.InputsOf(keys)
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// flowClaims returns testClaims with f as their flow.
func flowClaims(tb testing.TB, f sealer.Flow) sealer.Claims {
	c := testClaims(tb)
	c.Flow = &f
	return c
}

// expectOf returns what Open is given to open c as sealed, with the default
// skew and the retry's input keys.
func expectOf(c sealer.Claims, inputs sealer.Inputs) sealer.Expect {
	return sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew, Inputs: inputs}
}

func TestSealOpen_R9_FlowRoundTrip(t *testing.T) {
	ring := testRing(t, 1)
	asked := mustInputs(t, "github_login", "confirm")
	id := sealer.FlowID{1, 2, 3}
	tests := []struct {
		name    string
		flow    sealer.Flow
		oneTime bool
		inputs  sealer.Inputs
	}{
		{"round 1", sealer.Flow{ID: id, Round: 1, Deadline: flowDeadline}, false, sealer.Inputs{}},
		{"latest round only", sealer.Flow{ID: id, Round: 2, Deadline: flowDeadline, LatestOnly: true}, false, sealer.Inputs{}},
		{"input keys bound", sealer.Flow{ID: id, Round: 3, Deadline: flowDeadline, Asked: asked}, false, asked},
		{"one-time, latest round only, input keys bound", sealer.Flow{ID: id, Round: 1, Deadline: flowDeadline, LatestOnly: true, Asked: asked}, true, asked},
		{"largest round", sealer.Flow{ID: id, Round: 1<<32 - 1, Deadline: flowDeadline}, false, sealer.Inputs{}},
		{"expiry at the deadline", sealer.Flow{ID: id, Round: 1, Deadline: t0.Add(5 * time.Minute)}, false, sealer.Inputs{}},
		{"deadline at the end of year 9999", sealer.Flow{ID: id, Round: 1, Deadline: time.UnixMilli(sealer.MaxUnixMilli)}, false, sealer.Inputs{}},
		{"new flow", sealer.NewFlow(flowDeadline), false, sealer.Inputs{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := flowClaims(t, tc.flow)
			c.OneTime = tc.oneTime
			payload := []byte(`{"step":2}`)
			state := seal(t, ring, c, payload)
			if len(state) != base64.RawURLEncoding.EncodedLen(sealer.FlowOverhead+len(payload)) {
				t.Errorf("state of %d characters, want %d", len(state), base64.RawURLEncoding.EncodedLen(sealer.FlowOverhead+len(payload)))
			}
			if h, err := sealer.Inspect(state); err != nil || h.Version != sealer.FlowVersion {
				t.Errorf("Inspect: got %v, %v; want version %d", h, err, sealer.FlowVersion)
			}
			o, err := sealer.Open(ring, "tenant-a", state, expectOf(c, tc.inputs), t0.Add(time.Minute))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			want := tc.flow
			want.Deadline = time.UnixMilli(want.Deadline.UnixMilli()).UTC()
			if o.Flow == nil || *o.Flow != want {
				t.Fatalf("flow: got %+v, want %+v", o.Flow, want)
			}
			if !bytes.Equal(o.Payload, payload) || o.OneTime != tc.oneTime || !o.ExpiresAt.Equal(c.ExpiresAt) {
				t.Fatalf("got payload %q, one-time %v, expiry %v; want %q, %v, %v", o.Payload, o.OneTime, o.ExpiresAt, payload, tc.oneTime, c.ExpiresAt)
			}
		})
	}
}

func TestOpen_R9_FlowRefusals(t *testing.T) {
	ring := testRing(t, 1)
	asked := mustInputs(t, "card", "confirm")
	sealAt := func(round uint32, deadline time.Time, asked sealer.Inputs) (sealer.Claims, string) {
		c := flowClaims(t, sealer.Flow{ID: sealer.FlowID{9}, Round: round, Deadline: deadline, Asked: asked})
		if c.ExpiresAt.After(deadline) {
			c.ExpiresAt = deadline
		}
		return c, seal(t, ring, c, []byte("p"))
	}
	// The state of the last round expires at its flow's deadline: its own
	// skew would let it open 2 s longer, the flow's deadline does not.
	last, lastState := sealAt(3, t0.Add(4*time.Minute), sealer.Inputs{})
	end := last.Flow.Deadline
	bound, boundState := sealAt(2, flowDeadline, asked)
	free, freeState := sealAt(2, flowDeadline, sealer.Inputs{})
	other := testDigest(t, `{"location":"Boston"}`)
	farPast := time.Unix(-9223372036854776, 0) // UnixMilli of it wraps to a positive number

	with := func(want sealer.Expect, f func(*sealer.Expect)) sealer.Expect {
		f(&want)
		return want
	}
	tests := []struct {
		name  string
		state string
		want  sealer.Expect
		now   time.Time
		err   error
	}{
		{"R9 opens at the deadline", lastState, expectOf(last, sealer.Inputs{}), end, nil},
		{"R9 opens within the deadline's millisecond", lastState, expectOf(last, sealer.Inputs{}), end.Add(999 * time.Microsecond), nil},
		{"R9 flow expired at deadline + 1 ms, within expiry + skew", lastState, expectOf(last, sealer.Inputs{}), end.Add(time.Millisecond), sealer.ErrFlowExpired},
		{"R9 flow expired after the deadline, no skew for the flow", lastState, with(expectOf(last, sealer.Inputs{}), func(e *sealer.Expect) { e.Skew = time.Hour }), end.Add(time.Minute), sealer.ErrFlowExpired},
		{"R4 expired past expiry + skew comes before flow expired", lastState, expectOf(last, sealer.Inputs{}), end.Add(sealer.DefaultSkew + time.Millisecond), sealer.ErrExpired},
		{"R9 flow not expired for a now whose milliseconds overflow", freeState, with(expectOf(free, sealer.Inputs{}), func(e *sealer.Expect) { e.Skew = 0 }), farPast, nil},
		{"R9 exhausted past MaxRounds", lastState, with(expectOf(last, sealer.Inputs{}), func(e *sealer.Expect) { e.MaxRounds = 2 }), t0, sealer.ErrFlowExhausted},
		{"R9 opens at MaxRounds", lastState, with(expectOf(last, sealer.Inputs{}), func(e *sealer.Expect) { e.MaxRounds = 3 }), t0, nil},
		{"R9 MaxRounds 0 is no limit", lastState, expectOf(last, sealer.Inputs{}), t0, nil},
		{"R9 inputs exact", boundState, expectOf(bound, asked), t0, nil},
		{"R9 inputs in another order", boundState, expectOf(bound, mustInputs(t, "confirm", "card")), t0, nil},
		{"R9 inputs with an extra key", boundState, expectOf(bound, mustInputs(t, "card", "confirm", "note")), t0, sealer.ErrInputMismatch},
		{"R9 inputs with a key missing", boundState, expectOf(bound, mustInputs(t, "card")), t0, sealer.ErrInputMismatch},
		{"R9 inputs with a key in another case", boundState, expectOf(bound, mustInputs(t, "Card", "confirm")), t0, sealer.ErrInputMismatch},
		{"R9 inputs of no inputResponses", boundState, expectOf(bound, mustInputs(t)), t0, sealer.ErrInputMismatch},
		{"R9 zero Expect.Inputs against a bound state", boundState, expectOf(bound, sealer.Inputs{}), t0, sealer.ErrInputMismatch},
		{"R9 unbound state ignores zero Inputs", freeState, expectOf(free, sealer.Inputs{}), t0, nil},
		{"R9 unbound state ignores any Inputs", freeState, expectOf(free, asked), t0, nil},
		{"R3 other principal before flow expired", lastState, with(expectOf(last, sealer.Inputs{}), func(e *sealer.Expect) { e.Principal = "mallory" }), end.Add(time.Millisecond), sealer.ErrPrincipalMismatch},
		{"R5 other request before flow expired", lastState, with(expectOf(last, sealer.Inputs{}), func(e *sealer.Expect) { e.Request = other }), end.Add(time.Millisecond), sealer.ErrRequestMismatch},
		{"R3 other principal before input mismatch", boundState, with(expectOf(bound, sealer.Inputs{}), func(e *sealer.Expect) { e.Principal = "mallory" }), t0, sealer.ErrPrincipalMismatch},
		{"R5 other request before exhausted", lastState, with(expectOf(last, sealer.Inputs{}), func(e *sealer.Expect) { e.Request, e.MaxRounds = other, 1 }), t0, sealer.ErrRequestMismatch},
		{"R9 flow expired before exhausted", lastState, with(expectOf(last, sealer.Inputs{}), func(e *sealer.Expect) { e.MaxRounds = 1 }), end.Add(time.Millisecond), sealer.ErrFlowExpired},
		{"R9 exhausted before input mismatch", boundState, with(expectOf(bound, sealer.Inputs{}), func(e *sealer.Expect) { e.MaxRounds = 1 }), t0, sealer.ErrFlowExhausted},
		{"R2 other tenant", boundState, expectOf(bound, asked), t0, sealer.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenant := "tenant-a"
			if strings.HasPrefix(tc.name, "R2 other tenant") {
				tenant = "tenant-b"
			}
			o, err := sealer.Open(ring, tenant, tc.state, tc.want, tc.now)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if err != nil && o != nil {
				t.Fatalf("got %+v with error %v, want nothing", o, err)
			}
		})
	}
}

func TestContinue_R9_NextRound(t *testing.T) {
	ring := testRing(t, 1)
	c := flowClaims(t, sealer.Flow{ID: sealer.FlowID{7}, Round: 1, Deadline: flowDeadline, LatestOnly: true, Asked: mustInputs(t, "github_login")})
	state := seal(t, ring, c, []byte("round 1"))
	for round := uint32(2); round <= 4; round++ {
		now := c.IssuedAt.Add(time.Minute)
		f, err := sealer.Continue(ring, "tenant-a", state, expectOf(c, sealer.Inputs{}), now)
		if err != nil {
			t.Fatalf("round %d: Continue: %v", round, err)
		}
		want := sealer.Flow{ID: c.Flow.ID, Round: round, Deadline: time.UnixMilli(flowDeadline.UnixMilli()).UTC(), LatestOnly: true}
		if f != want {
			t.Fatalf("round %d: got %+v, want %+v (same id and deadline, latest round only, keys not bound)", round, f, want)
		}
		c.IssuedAt, c.ExpiresAt, c.Flow = now, now.Add(5*time.Minute), &f
		state = seal(t, ring, c, []byte(fmt.Sprintf("round %d", round)))
		o, err := sealer.Open(ring, "tenant-a", state, expectOf(c, sealer.Inputs{}), now)
		if err != nil || *o.Flow != want {
			t.Fatalf("round %d: Open: got %v, %v; want flow %+v", round, o, err, want)
		}
	}
}

func TestContinue_R9_Refusals(t *testing.T) {
	ring := testRing(t, 1)
	sealFlow := func(round uint32, deadline time.Time) (sealer.Claims, string) {
		c := flowClaims(t, sealer.Flow{ID: sealer.FlowID{5}, Round: round, Deadline: deadline, Asked: mustInputs(t, "card")})
		if c.ExpiresAt.After(deadline) {
			c.ExpiresAt = deadline
		}
		return c, seal(t, ring, c, nil)
	}
	c, state := sealFlow(2, flowDeadline)
	last, lastState := sealFlow(1, t0.Add(3*time.Minute))
	largest, largestState := sealFlow(1<<32-1, flowDeadline)
	v1 := testClaims(t)
	v1State := seal(t, ring, v1, nil)
	with := func(f func(*sealer.Expect)) sealer.Expect {
		want := expectOf(c, sealer.Inputs{})
		f(&want)
		return want
	}
	tests := []struct {
		name   string
		tenant string
		prev   string
		want   sealer.Expect
		now    time.Time
		err    error
	}{
		{"R9 continues a bound round without its inputs", "tenant-a", state, expectOf(c, sealer.Inputs{}), t0, nil},
		{"R9 continues until the millisecond before the deadline", "tenant-a", lastState, expectOf(last, sealer.Inputs{}), last.Flow.Deadline.Add(-time.Microsecond), nil},
		{"R9 continues at a now whose milliseconds overflow", "tenant-a", state, expectOf(c, sealer.Inputs{}), time.Unix(-9223372036854776, 0), nil},
		{"R9 version 1 state", "tenant-a", v1State, expectOf(v1, sealer.Inputs{}), t0, sealer.ErrArgument},
		{"R9 deadline reached", "tenant-a", lastState, expectOf(last, sealer.Inputs{}), last.Flow.Deadline, sealer.ErrFlowExpired},
		{"R9 deadline passed", "tenant-a", lastState, expectOf(last, sealer.Inputs{}), last.Flow.Deadline.Add(time.Millisecond), sealer.ErrFlowExpired},
		{"R9 next round past MaxRounds", "tenant-a", state, with(func(e *sealer.Expect) { e.MaxRounds = 2 }), t0, sealer.ErrFlowExhausted},
		{"R9 round already past MaxRounds", "tenant-a", state, with(func(e *sealer.Expect) { e.MaxRounds = 1 }), t0, sealer.ErrFlowExhausted},
		{"R9 next round within MaxRounds", "tenant-a", state, with(func(e *sealer.Expect) { e.MaxRounds = 3 }), t0, nil},
		{"R9 no round after 4,294,967,295", "tenant-a", largestState, expectOf(largest, sealer.Inputs{}), t0, sealer.ErrFlowExhausted},
		{"R4 expired", "tenant-a", state, expectOf(c, sealer.Inputs{}), c.ExpiresAt.Add(sealer.DefaultSkew + time.Millisecond), sealer.ErrExpired},
		{"R3 other principal", "tenant-a", state, with(func(e *sealer.Expect) { e.Principal = "mallory" }), t0, sealer.ErrPrincipalMismatch},
		{"R5 other request", "tenant-a", state, with(func(e *sealer.Expect) { e.Request = testDigest(t, `{"location":"Boston"}`) }), t0, sealer.ErrRequestMismatch},
		{"R2 other tenant", "tenant-b", state, expectOf(c, sealer.Inputs{}), t0, sealer.ErrInvalid},
		{"R2 forged", "tenant-a", mangle(state, 60), expectOf(c, sealer.Inputs{}), t0, sealer.ErrInvalid},
		{"R1 not a state", "tenant-a", "x", expectOf(c, sealer.Inputs{}), t0, sealer.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := sealer.Continue(ring, tc.tenant, tc.prev, tc.want, tc.now)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %+v, %v; want %v", f, err, tc.err)
			}
			if err != nil && f != (sealer.Flow{}) {
				t.Fatalf("got %+v with error %v, want nothing", f, err)
			}
		})
	}
}

// TestContinue_R9_LatestOnlySticky shows that a flow never drops latest
// round only: Next keeps it, and the continued state carries it.
func TestContinue_R9_LatestOnlySticky(t *testing.T) {
	for _, latest := range []bool{false, true} {
		f := sealer.Flow{ID: sealer.FlowID{3}, Round: 1, Deadline: flowDeadline, LatestOnly: latest, Asked: mustInputs(t, "x")}
		next := f.Next()
		if next.LatestOnly != latest || next.Round != 2 || next.ID != f.ID || !next.Deadline.Equal(f.Deadline) || next.Asked != (sealer.Inputs{}) {
			t.Errorf("latest only %v: Next got %+v, want round 2 of the same flow, latest only %v, keys not bound", latest, next, latest)
		}
	}
}

func TestNewFlow(t *testing.T) {
	a, b := sealer.NewFlow(flowDeadline), sealer.NewFlow(flowDeadline)
	if a.Round != 1 || !a.Deadline.Equal(flowDeadline) || a.LatestOnly || a.Asked != (sealer.Inputs{}) {
		t.Errorf("got %+v, want round 1 ending at %v", a, flowDeadline)
	}
	if a.ID == b.ID || a.ID == (sealer.FlowID{}) {
		t.Errorf("ids %v and %v: want two random ids", a.ID, b.ID)
	}
}

func TestSeal_R9_FlowLimits(t *testing.T) {
	ring := testRing(t, 1)
	ok := sealer.Flow{ID: sealer.FlowID{1}, Round: 1, Deadline: flowDeadline}
	tests := []struct {
		name   string
		mutate func(*sealer.Claims, *sealer.Flow)
		err    error
	}{
		{"valid", func(*sealer.Claims, *sealer.Flow) {}, nil},
		{"expiry at the deadline", func(c *sealer.Claims, f *sealer.Flow) { c.ExpiresAt = f.Deadline }, nil},
		{"expiry within the deadline's millisecond", func(c *sealer.Claims, f *sealer.Flow) { c.ExpiresAt = f.Deadline.Add(500 * time.Microsecond) }, nil},
		{"expiry after the deadline", func(c *sealer.Claims, f *sealer.Flow) { f.Deadline = c.ExpiresAt.Add(-time.Millisecond) }, sealer.ErrArgument},
		{"deadline before issue", func(c *sealer.Claims, f *sealer.Flow) { f.Deadline = c.IssuedAt.Add(-time.Minute) }, sealer.ErrArgument},
		{"round 0", func(_ *sealer.Claims, f *sealer.Flow) { f.Round = 0 }, sealer.ErrArgument},
		{"deadline past year 9999", func(_ *sealer.Claims, f *sealer.Flow) { f.Deadline = time.UnixMilli(sealer.MaxUnixMilli + 1) }, sealer.ErrArgument},
		{"deadline before the epoch", func(_ *sealer.Claims, f *sealer.Flow) { f.Deadline = time.UnixMilli(-1) }, sealer.ErrArgument},
		{"zero deadline", func(_ *sealer.Claims, f *sealer.Flow) { f.Deadline = time.Time{} }, sealer.ErrArgument},
		{"zero flow id", func(_ *sealer.Claims, f *sealer.Flow) { f.ID = sealer.FlowID{} }, sealer.ErrArgument},
		{"payload one byte over", func(*sealer.Claims, *sealer.Flow) {}, sealer.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, f := testClaims(t), ok
			tc.mutate(&c, &f)
			c.Flow = &f
			payload := make([]byte, sealer.MaxPayload)
			if tc.name == "payload one byte over" {
				payload = append(payload, 0)
			}
			state, err := sealer.Seal(ring, "tenant-a", c, payload)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if len(state) > sealer.MaxState {
				t.Fatalf("state of %d characters exceeds MaxState %d", len(state), sealer.MaxState)
			}
			if _, err := sealer.Open(ring, "tenant-a", state, expectOf(c, sealer.Inputs{}), t0); err != nil {
				t.Fatalf("Open: %v", err)
			}
		})
	}
}

// TestSeal_FormatOneUnchanged shows that a state without a flow is sealed by
// today's format 1 path, byte for byte as before version 2 (the fixed
// vectors of vectors.json say so too, TestVectors_Seal), and opens whatever
// Expect says of flows.
func TestSeal_FormatOneUnchanged(t *testing.T) {
	ring := testRing(t, 1)
	c := testClaims(t)
	payload := []byte(`{"step":1}`)
	state := seal(t, ring, c, payload)
	blob, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		t.Fatal(err)
	}
	if blob[0] != sealer.Version || len(blob) != sealer.Overhead+len(payload) {
		t.Fatalf("blob of version %d and %d bytes, want version 1 and %d bytes", blob[0], len(blob), sealer.Overhead+len(payload))
	}
	for _, want := range []sealer.Expect{
		expectOf(c, sealer.Inputs{}),
		expectOf(c, mustInputs(t, "card")),
		{Principal: c.Principal, Request: c.Request, MaxRounds: 1, Inputs: mustInputs(t)},
	} {
		o, err := sealer.Open(ring, "tenant-a", state, want, t0)
		if err != nil || o.Flow != nil || !bytes.Equal(o.Payload, payload) {
			t.Fatalf("Open with %+v: got %+v, %v; want the payload and no flow", want, o, err)
		}
	}
}

func TestOpen_R2_FlowBitFlipsAreInvalid(t *testing.T) {
	ring := testRing(t, 1)
	asked := mustInputs(t, "card")
	c := flowClaims(t, sealer.Flow{ID: sealer.FlowID{4}, Round: 2, Deadline: flowDeadline, LatestOnly: true, Asked: asked})
	b := []byte(seal(t, ring, c, []byte("a payload")))
	for i := range b {
		for bit := range 8 {
			b[i] ^= 1 << bit
			if o, err := sealer.Open(ring, "tenant-a", string(b), expectOf(c, asked), t0); !errors.Is(err, sealer.ErrInvalid) || o != nil {
				t.Fatalf("char %d bit %d: got %v, want ErrInvalid", i, bit, err)
			}
			b[i] ^= 1 << bit
		}
	}
}

func TestInputsOf_R9(t *testing.T) {
	// The digest as FORMAT.md, "Flows", writes it, for the keys b and a.
	pre := []byte("mcp-sealer/v2 inputs\x00")
	pre = binary.BigEndian.AppendUint32(pre, 2)
	pre = append(binary.BigEndian.AppendUint32(pre, 1), 'a')
	pre = append(binary.BigEndian.AppendUint32(pre, 1), 'b')
	if got, want := mustInputs(t, "b", "a"), sealer.Inputs(sha256.Sum256(pre)); got != want {
		t.Fatalf("InputsOf(b, a): got %v, want %v", got, want)
	}
	if got, want := mustInputs(t), sealer.Inputs(sha256.Sum256(binary.BigEndian.AppendUint32([]byte("mcp-sealer/v2 inputs\x00"), 0))); got != want {
		t.Fatalf("InputsOf(): got %v, want %v", got, want)
	}

	keys := []string{"github_login", "confirm", "card", "Card", "é", "😀", "｡"}
	first := mustInputs(t, keys...)
	for i := range 20 {
		shuffled := slices.Clone(keys)
		for j := range shuffled {
			k := (i*7 + j*3) % len(shuffled)
			shuffled[j], shuffled[k] = shuffled[k], shuffled[j]
		}
		if got := mustInputs(t, shuffled...); got != first {
			t.Fatalf("InputsOf(%q): got %v, want %v (order-independent)", shuffled, got, first)
		}
	}

	distinct := map[sealer.Inputs]string{}
	for _, set := range [][]string{nil, {"card"}, {"Card"}, {"card", "Card"}, {"a", "bc"}, {"ab", "c"}, {"é"}, {"e\u0301"}, {"card", "confirm"}} {
		in := mustInputs(t, set...)
		if in == (sealer.Inputs{}) {
			t.Fatalf("InputsOf(%q) is zero", set)
		}
		if prev, ok := distinct[in]; ok {
			t.Fatalf("InputsOf(%q) = InputsOf(%s)", set, prev)
		}
		distinct[in] = fmt.Sprintf("%q", set)
	}
	if mustInputs(t) != mustInputs(t, []string{}...) {
		t.Fatal("nil and empty keys differ")
	}

	many := func(n int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = fmt.Sprint(i)
		}
		return ks
	}
	for _, tc := range []struct {
		name string
		keys []string
		err  error
	}{
		{"256 keys", many(sealer.MaxInputKeys), nil},
		{"a key of 1,024 bytes", []string{strings.Repeat("k", sealer.MaxInputKey)}, nil},
		{"257 keys", many(sealer.MaxInputKeys + 1), sealer.ErrArgument},
		{"a key twice", []string{"card", "confirm", "card"}, sealer.ErrArgument},
		{"an empty key", []string{"card", ""}, sealer.ErrArgument},
		{"a key of 1,025 bytes", []string{strings.Repeat("k", sealer.MaxInputKey+1)}, sealer.ErrArgument},
		{"invalid UTF-8", []string{"card", "\xff"}, sealer.ErrArgument},
		{"a surrogate in UTF-8", []string{"\xed\xa0\x80"}, sealer.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := sealer.InputsOf(tc.keys)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, %v; want %v", in, err, tc.err)
			}
			if err != nil && in != (sealer.Inputs{}) {
				t.Fatalf("got %v with error %v, want the zero Inputs", in, err)
			}
		})
	}
}

// TestOpen_R9_FlowOfAnotherRing shows a flow state opens only under the
// ring and tenant that sealed it, like any state (R2, R10: every replica
// with the ring opens it).
func TestOpen_R9_FlowOfAnotherRing(t *testing.T) {
	c := flowClaims(t, sealer.NewFlow(flowDeadline))
	state := seal(t, testRing(t, 1, 2), c, nil)
	k, _ := keys.NewKey(2, bytes.Repeat([]byte{0xee}, keys.Size), t0)
	otherMaterial, err := keys.NewRing([]keys.Key{k}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		ring *keys.Ring
		err  error
	}{
		"R10 another replica's ring":     {testRing(t, 1, 2), nil},
		"R2 ring without the version":    {testRing(t, 1), sealer.ErrInvalid},
		"R2 same version other material": {otherMaterial, sealer.ErrInvalid},
	} {
		if _, err := sealer.Open(tc.ring, "tenant-a", state, expectOf(c, sealer.Inputs{}), t0); !errors.Is(err, tc.err) {
			t.Errorf("%s: got %v, want %v", name, err, tc.err)
		}
	}
}

// A flow is over once now is past its deadline in whole milliseconds: the
// rule Open, Continue and the service's ledger check share.
func TestFlow_Expired(t *testing.T) {
	d := time.UnixMilli(1_800_000_000_000)
	f := sealer.Flow{Deadline: d}
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{d.Add(-time.Millisecond), false},
		{d, false},
		{d.Add(time.Millisecond - 1), false},
		{d.Add(time.Millisecond), true},
		{time.Unix(1<<62, 0), true}, // beyond what milliseconds since the epoch hold in an int64
	} {
		if got := f.Expired(tc.now); got != tc.want {
			t.Errorf("deadline %v, now %v: got %v, want %v", d, tc.now, got, tc.want)
		}
	}
}
