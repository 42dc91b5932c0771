// Package sealer seals and opens MCP requestState values: AEAD blobs that
// carry the principal they were issued to, an expiry, a digest of the
// request that produced them, and an opaque payload.
//
// The package does no I/O and reads no clock: keys come in as [Keys] (a
// ring of package keys implements it), time as a value. The blob is
// specified in FORMAT.md at the root of the repository; the comments here
// point there rather than repeat it.
//
// # Checks on open
//
// [Open] authenticates first, then judges. A state that is not authentic
// under the tenant's key (mangled, truncated, unknown or retired key, unknown
// format version, another tenant) is only ever [ErrInvalid]. Only an
// authentic state is then checked for expiry ([ErrExpired]), principal
// ([ErrPrincipalMismatch]) and request ([ErrRequestMismatch]), in that order.
//
// # Request digests
//
// A state is bound to a [Digest] of the MCP request that produced it, so
// that the retry of that request (with _meta, inputResponses and
// requestState added) opens it and any other request does not. Package
// mcpdigest computes it; this package only carries and compares it, and so
// needs nothing but the standard library and golang.org/x/crypto.
//
// # Recorded outcomes
//
// [SealOutcome] seals the answer an MCP server sent for a consumed one-time
// state, bound to that state's id and the tenant, for the ledger to keep;
// [OpenOutcome] opens it for a retry of the same state, once [Open] passed.
// [Authenticate] names the state to record for, after it may have expired.
//
// # Test vectors
//
// testdata/vectors.json, flows.json and outcomes.json hold vectors for
// other implementations of FORMAT.md, intermediate values included
// (schema: testdata/README.md). go test -run TestVectors -update rewrites
// the first (TestFlowVectors and TestOutcomeVectors the others); without
// -update each test fails if its file is stale.
package sealer
