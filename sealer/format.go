package sealer

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Versions, sizes and limits of the format (FORMAT.md).
const (
	// Version is the format version of a state without a flow.
	Version = 1
	// FlowVersion is the format version of a state that carries a flow.
	FlowVersion = 2
	// MaxPayload is the largest payload a state carries: 64 KiB.
	MaxPayload = 64 << 10
	// DefaultMaxState is the longest state a sealer seals by default:
	// 65,536 characters, the cap SEP-2778 proposes for requestState.
	DefaultMaxState = 1 << 16
	// MaxPrincipal is the longest principal, in bytes: 1 KiB.
	MaxPrincipal = 1 << 10
	// DefaultSkew is the recommended clock skew to allow past a state's
	// expiry (Expect.Skew).
	DefaultSkew = 2 * time.Second

	headerLen    = 1 + 4 // version, key version
	nonceLen     = chacha20poly1305.NonceSizeX
	tagLen       = chacha20poly1305.Overhead
	principalLen = 16

	// Offsets of the claims in the plaintext (FORMAT.md, "Plaintext and
	// claims"): flags at 0, then issued_at, expires_at, the principal
	// hash and the request digest.
	issuedAt  = 1
	expiresAt = issuedAt + 8
	principal = expiresAt + 8
	request   = principal + principalLen
	claimsLen = request + len(Digest{})
	// Overhead is the number of bytes a state adds to its payload before
	// base64 encoding.
	Overhead = headerLen + nonceLen + claimsLen + tagLen
	// FlowOverhead is the same for a state that carries a flow (format 2).
	FlowOverhead = Overhead + flowLen

	flagOneTime    = 0x01
	principalLabel = "mcp-sealer/v1 principal\x00"
)

// MaxState is the longest state string Open reads; longer input is rejected
// before decoding. A constant, so that no importer can move the bound.
// Both are base64.RawURLEncoding.EncodedLen of their byte counts (4
// characters for every 3 bytes, no padding), written as constant
// expressions; TestMaxState checks them against it.
const MaxState = (FlowOverhead+MaxPayload)/3*4 + ((FlowOverhead+MaxPayload)%3*8+5)/6

const minState = Overhead/3*4 + (Overhead%3*8+5)/6

// DefaultMaxPayload is the largest payload a sealer seals by default: the
// largest whose state, with a flow, is at most DefaultMaxState characters
// (49,152 bytes encoded, less FlowOverhead). A sealer may be set to seal up
// to MaxPayload, whose states are longer (FORMAT.md, "Limits").
const DefaultMaxPayload = DefaultMaxState/4*3 - FlowOverhead

// b64 is the state alphabet: unpadded base64url, strict about trailing bits
// so that every state has exactly one spelling (R8).
var b64 = base64.RawURLEncoding.Strict()

// Header is the public part of a state, readable without a key.
type Header struct {
	// Version is the format version.
	Version byte
	// KeyVersion is the master key version that sealed the state.
	KeyVersion uint32
	// ID is the state id (FORMAT.md: the first 16 bytes of the nonce).
	ID StateID
}

// Inspect returns the public header of a state without authenticating it.
// Nothing in it may be trusted before Open succeeds; it serves logs and
// operators.
func Inspect(state string) (Header, error) {
	if !wellFormed(state) {
		return Header{}, ErrInvalid
	}
	var raw [headerLen + nonceLen + 2]byte // decode whole 4-char groups only
	n := b64.EncodedLen(headerLen+nonceLen) / 4 * 4
	if _, err := base64.RawURLEncoding.Decode(raw[:], []byte(state[:n+4])); err != nil {
		return Header{}, ErrInvalid
	}
	h := Header{Version: raw[0], KeyVersion: binary.BigEndian.Uint32(raw[1:headerLen])}
	copy(h.ID[:], raw[headerLen:])
	if h.Version != Version && h.Version != FlowVersion {
		return h, ErrInvalid
	}
	return h, nil
}

// String describes the header for logs.
func (h Header) String() string {
	return fmt.Sprintf("state v%d key %d id %s", h.Version, h.KeyVersion, h.ID)
}

// wellFormed checks what must hold before a state is decoded: its length, and
// the absence of CR and LF, which the base64 decoder would otherwise skip,
// giving one blob many spellings.
func wellFormed(state string) bool {
	return len(state) >= minState && len(state) <= MaxState && strings.IndexByte(state, '\n') < 0 && strings.IndexByte(state, '\r') < 0
}

// encode returns blob in the state alphabet, with one allocation: the
// string's. It encodes a chunk at a time on the stack, each a whole number
// of 3-byte groups but the last, which gives the bytes of one encoding of
// the whole blob.
func encode(blob []byte) string {
	var sb strings.Builder
	sb.Grow(b64.EncodedLen(len(blob)))
	var chunk [1024]byte // 768 bytes of blob
	for len(blob) > 0 {
		n := min(len(blob), len(chunk)/4*3)
		b64.Encode(chunk[:], blob[:n])
		sb.Write(chunk[:b64.EncodedLen(n)])
		blob = blob[n:]
	}
	return sb.String()
}

func hashPrincipal(dst []byte, principal string) {
	h := sha256.New()
	h.Write([]byte(principalLabel))
	h.Write([]byte(principal))
	var sum [sha256.Size]byte
	copy(dst, h.Sum(sum[:0]))
}

// appendAD appends the associated data of FORMAT.md: the header, then the
// tenant.
func appendAD(dst []byte, header []byte, tenant string) []byte {
	return append(append(dst, header...), tenant...)
}
