package sealer

import (
	"encoding/hex"
	"fmt"
	"time"
)

// Digest identifies the request a state is bound to: the MCP request digest
// of FORMAT.md, which package mcpdigest computes, or a caller's own.
type Digest [32]byte

// String returns the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// DigestOf returns b as a Digest, for callers that bind states to requests of
// their own with a digest they compute. b must be 32 bytes.
func DigestOf(b []byte) (Digest, error) {
	var d Digest
	if len(b) != len(d) {
		return d, fmt.Errorf("%w: digest of %d bytes, want %d", ErrArgument, len(b), len(d))
	}
	copy(d[:], b)
	return d, nil
}

// StateID identifies one sealed state; the one-time ledger records it.
type StateID [16]byte

// String returns the id in hex.
func (id StateID) String() string { return hex.EncodeToString(id[:]) }

// MaxUnixMilli is the latest time a state carries, in milliseconds since the
// Unix epoch: 9999-12-31T23:59:59.999Z, the last millisecond that RFC 3339
// and google.protobuf.Timestamp can express. Seal refuses claims past it, and
// Open finds a state that carries a time past it invalid (FORMAT.md,
// "Plaintext and claims").
const MaxUnixMilli = 253402300799999

// Claims are what a state asserts about itself.
type Claims struct {
	// Principal is the authenticated user the state is issued to: 1 byte to
	// MaxPrincipal bytes. Only a hash of it is sealed.
	Principal string
	// Request is the digest of the originating request.
	Request Digest
	// IssuedAt and ExpiresAt bound the state's life, to the millisecond:
	// from the Unix epoch to MaxUnixMilli, ExpiresAt after IssuedAt.
	IssuedAt  time.Time
	ExpiresAt time.Time
	// OneTime marks a state the caller must consume at most once (R6).
	OneTime bool
	// Flow, when set, makes the state one round of a multi-round request
	// (FORMAT.md, "Flows"); such a state is sealed in format 2.
	Flow *Flow
}

// Expired reports whether a state with these claims is past its acceptance
// window at now: later than ExpiresAt + skew, both in whole milliseconds
// (FORMAT.md, "Opening", step 7). A negative skew counts as zero. It compares
// times, not sums of integers, so no now and no skew overflow it.
func (c Claims) Expired(now time.Time, skew time.Duration) bool {
	last := c.ExpiresAt.Truncate(time.Millisecond).Add(max(skew, 0).Truncate(time.Millisecond))
	return !now.Before(last.Add(time.Millisecond)) // time.Time.Add saturates
}

// Expect is what the caller of Open knows about the retry it is serving.
type Expect struct {
	// Principal is the authenticated principal of the retry. Open does not
	// check its length: one that Seal refuses (empty, over MaxPrincipal)
	// matches no state, ErrPrincipalMismatch.
	Principal string
	// Request is the digest of the retry (mcpdigest.Request of its params).
	Request Digest
	// Skew is the allowance for clock differences between the replica that
	// sealed and the one that opens: a state opens until ExpiresAt + Skew.
	// DefaultSkew is the recommended value; zero allows none, and so does
	// a negative skew: it never shortens a state's life.
	Skew time.Duration
	// Inputs is the digest of the keys of the retry's inputResponses
	// (InputsOf; an absent inputResponses is the empty set). A state whose
	// round asked input keys opens only when they are exactly these; the
	// zero value, keys not known, matches none (ErrInputMismatch).
	Inputs Inputs
	// MaxRounds, when not 0, refuses a state of a flow's later round
	// (ErrFlowExhausted); Continue refuses to go past it.
	MaxRounds uint32
}

// Opened is an authentic state that passed every check of Open, or, from
// Authenticate, one that authenticated with well-formed claims.
type Opened struct {
	Claims
	// ID is the state's id, the key of the one-time ledger.
	ID StateID
	// KeyVersion is the master key version that sealed the state.
	KeyVersion uint32
	// Payload is the caller's payload, as sealed.
	Payload []byte
}
