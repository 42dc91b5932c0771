package sealer

import (
	"encoding/hex"
	"time"
)

// Digest identifies the request a state is bound to; see RequestDigest.
type Digest [32]byte

// String returns the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// StateID identifies one sealed state; the one-time ledger records it.
type StateID [16]byte

// String returns the id in hex.
func (id StateID) String() string { return hex.EncodeToString(id[:]) }

// Claims are what a state asserts about itself.
type Claims struct {
	// Principal is the authenticated user the state is issued to: 1 byte to
	// MaxPrincipal bytes. Only a hash of it is sealed.
	Principal string
	// Request is the digest of the originating request.
	Request Digest
	// IssuedAt and ExpiresAt bound the state's life, to the millisecond.
	IssuedAt  time.Time
	ExpiresAt time.Time
	// OneTime marks a state the caller must consume at most once (R6).
	OneTime bool
}

// Expired reports whether a state with these claims is past its acceptance
// window at now: later than ExpiresAt + skew, to the millisecond (FORMAT.md,
// "Opening", step 7).
func (c Claims) Expired(now time.Time, skew time.Duration) bool {
	return now.UnixMilli() > c.ExpiresAt.UnixMilli()+skew.Milliseconds()
}

// Expect is what the caller of Open knows about the retry it is serving.
type Expect struct {
	// Principal is the authenticated principal of the retry.
	Principal string
	// Request is the digest of the retry (RequestDigest of its params).
	Request Digest
	// Skew is the allowance for clock differences between the replica that
	// sealed and the one that opens: a state opens until ExpiresAt + Skew.
	// DefaultSkew is the recommended value; zero allows none.
	Skew time.Duration
}

// Opened is an authentic state that passed every check of Open.
type Opened struct {
	Claims
	// ID is the state's id, the key of the one-time ledger.
	ID StateID
	// KeyVersion is the master key version that sealed the state.
	KeyVersion uint32
	// Payload is the caller's payload, as sealed.
	Payload []byte
}
