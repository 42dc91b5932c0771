package sealer

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Limits of a flow (FORMAT.md, "Flows").
const (
	// MaxInputKeys is the most input keys one round may ask.
	MaxInputKeys = 256
	// MaxInputKey is the longest input key, in bytes.
	MaxInputKey = 1 << 10

	// Offsets of the flow fields, which follow the claims (FORMAT.md,
	// "Flows"): the flow id at 0, then round, flow_deadline and inputs.
	flowRound    = 16
	flowDeadline = flowRound + 4
	flowAsked    = flowDeadline + 8
	flowLen      = flowAsked + len(Inputs{})

	flagFlow  = 0x02 // format 2 only: latest round only
	flagAsked = 0x04 // format 2 only: the round's input keys are bound

	inputsLabel = "mcp-sealer/v2 inputs\x00"
)

// FlowID names one multi-round request: random, fixed at its first round.
type FlowID [16]byte

// String returns the id in hex.
func (id FlowID) String() string { return hex.EncodeToString(id[:]) }

// Inputs is the digest of the set of input keys of one round: the keys of
// the inputRequests a state asks, or of the inputResponses a retry carries
// (InputsOf). The zero value is no set's digest: it stands for keys not
// bound (in Flow.Asked) or not known (in Expect.Inputs), and matches nothing.
type Inputs [32]byte

// String returns the digest in hex.
func (in Inputs) String() string { return hex.EncodeToString(in[:]) }

// InputsOf returns the digest of a set of input keys, in any order: at most
// MaxInputKeys keys, each 1 to MaxInputKey bytes of valid UTF-8, no key
// twice. Keys are compared as bytes: "Card" and "card" are two keys.
func InputsOf(keys []string) (Inputs, error) {
	if len(keys) > MaxInputKeys {
		return Inputs{}, fmt.Errorf("%w: %d input keys exceed %d", ErrArgument, len(keys), MaxInputKeys)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted) // Go compares strings as bytes
	h := sha256.New()
	h.Write([]byte(inputsLabel))
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(sorted)))
	h.Write(n[:])
	for i, k := range sorted {
		switch {
		case len(k) == 0 || len(k) > MaxInputKey:
			return Inputs{}, fmt.Errorf("%w: input key of %d bytes: want 1 to %d", ErrArgument, len(k), MaxInputKey)
		case !utf8.ValidString(k):
			return Inputs{}, fmt.Errorf("%w: input key is not valid UTF-8", ErrArgument)
		case i > 0 && k == sorted[i-1]:
			return Inputs{}, fmt.Errorf("%w: input key %q given twice", ErrArgument, k)
		}
		binary.BigEndian.PutUint32(n[:], uint32(len(k)))
		h.Write(n[:])
		h.Write([]byte(k))
	}
	var in Inputs
	h.Sum(in[:0])
	return in, nil
}

// Flow is what a state of a multi-round request knows of the whole request
// (FORMAT.md, "Flows"). A state that carries one is sealed in format 2.
type Flow struct {
	// ID names the flow; every round of it carries the same.
	ID FlowID
	// Round counts from 1, one more on every continuation.
	Round uint32
	// Deadline is the end of the flow, fixed at round 1: no state of the
	// flow expires after it, and none opens after it.
	Deadline time.Time
	// LatestOnly asks the opener to let only the flow's latest round open:
	// the ledger keeps the highest round opened, and a state of that round
	// or an earlier one never opens again.
	LatestOnly bool
	// Asked is the digest of the input keys the round asks (InputsOf); the
	// retry must answer exactly those. Zero: not bound.
	Asked Inputs
}

// Expired reports whether the flow is over at now: past its deadline, in
// whole milliseconds, with no skew (FORMAT.md, "Opening", step 10). It
// compares times, not milliseconds since the epoch, so no now overflows it.
func (f Flow) Expired(now time.Time) bool {
	return !now.Before(f.Deadline.Truncate(time.Millisecond).Add(time.Millisecond))
}

// NewFlow returns round 1 of a new flow with a random id, ending at
// deadline, rounded down to the millisecond as a state carries it.
func NewFlow(deadline time.Time) Flow {
	f := Flow{Round: 1, Deadline: deadline.Truncate(time.Millisecond)}
	rand.Read(f.ID[:])
	return f
}

// Next returns the flow of the round after f: the same id and deadline,
// the next round, still latest-only if f was (a flow never drops it), the
// input keys not bound.
func (f Flow) Next() Flow {
	return Flow{ID: f.ID, Round: f.Round + 1, Deadline: f.Deadline, LatestOnly: f.LatestOnly}
}

// Continue authenticates prev, a state the caller opened, as sealed for
// tenant, and checks it as Open does (FORMAT.md, "Opening", steps 1 to 11)
// without its input keys, which the retry answered, and without the ledger.
// It returns the flow of the round after prev's. It refuses a prev that
// carries no flow (ErrArgument), whose deadline is passed at now
// (ErrFlowExpired: the next round would have no time to live), or whose
// next round would exceed want.MaxRounds (ErrFlowExhausted).
func Continue(ring Keys, tenant, prev string, want Expect, now time.Time) (Flow, error) {
	o, err := open(ring, tenant, prev, want, now, false)
	if err != nil {
		return Flow{}, err
	}
	defer clear(o.Payload)
	switch {
	case o.Flow == nil:
		return Flow{}, fmt.Errorf("%w: the continued state carries no flow", ErrArgument)
	case o.Flow.Expired(now.Add(time.Millisecond)): // a round sealed now would expire at once
		return Flow{}, ErrFlowExpired
	case want.MaxRounds > 0 && o.Flow.Round >= want.MaxRounds:
		return Flow{}, ErrFlowExhausted
	case o.Flow.Round == 1<<32-1:
		return Flow{}, ErrFlowExhausted
	}
	return o.Flow.Next(), nil
}

// encode writes the flow fields of FORMAT.md, "Flows", into dst[:flowLen],
// and returns the flags they add.
func (f *Flow) encode(dst []byte) (flags byte) {
	copy(dst[:flowRound], f.ID[:])
	binary.BigEndian.PutUint32(dst[flowRound:flowDeadline], f.Round)
	binary.BigEndian.PutUint64(dst[flowDeadline:flowAsked], uint64(f.Deadline.UnixMilli()))
	copy(dst[flowAsked:flowLen], f.Asked[:])
	if f.LatestOnly {
		flags |= flagFlow
	}
	if f.Asked != (Inputs{}) {
		flags |= flagAsked
	}
	return flags
}

// decodeFlow reads the flow fields of an authentic format 2 plaintext and
// checks them (step 6): false when they are malformed.
func decodeFlow(src []byte, flags byte, expires uint64) (*Flow, bool) {
	f := &Flow{Round: binary.BigEndian.Uint32(src[flowRound:flowDeadline]), LatestOnly: flags&flagFlow != 0}
	copy(f.ID[:], src[:flowRound])
	deadline := binary.BigEndian.Uint64(src[flowDeadline:flowAsked])
	copy(f.Asked[:], src[flowAsked:flowLen])
	asked := f.Asked != (Inputs{})
	if f.Round == 0 || deadline > MaxUnixMilli || expires > deadline || asked != (flags&flagAsked != 0) {
		return nil, false
	}
	f.Deadline = time.UnixMilli(int64(deadline)).UTC()
	return f, true
}

// validate checks a flow Seal is asked to carry.
func (f *Flow) validate(c *Claims) error {
	switch {
	case f.Round == 0:
		return fmt.Errorf("%w: flow round 0 (rounds count from 1)", ErrArgument)
	case !inRange(f.Deadline):
		return fmt.Errorf("%w: flow deadline must lie from the Unix epoch to the end of year 9999", ErrArgument)
	case c.ExpiresAt.UnixMilli() > f.Deadline.UnixMilli():
		return fmt.Errorf("%w: expiry after the flow's deadline", ErrArgument)
	case bytes.Equal(f.ID[:], make([]byte, 16)):
		return fmt.Errorf("%w: zero flow id", ErrArgument)
	}
	return nil
}
