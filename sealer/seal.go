package sealer

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"
)

// Keys is what Seal and Open need of a key ring: the AEAD of a key version,
// keyed for a tenant. Package keys builds rings that implement it
// (keys.Ring) from a key file or from Vault; this package needs nothing
// more of them.
type Keys interface {
	// Sealer returns the version that seals and its AEAD for tenant.
	Sealer(tenant string) (version uint32, aead cipher.AEAD, err error)
	// Opener returns the AEAD of version for tenant, or false when the
	// ring does not hold that version or the tenant name is malformed.
	Opener(version uint32, tenant string) (aead cipher.AEAD, ok bool)
}

// Seal returns a state string that carries c and payload, sealed for tenant
// with the ring's sealing version. The payload is at most MaxPayload bytes;
// the principal 1 to MaxPrincipal bytes; ExpiresAt must be after IssuedAt,
// both from the Unix epoch to MaxUnixMilli, compared in whole milliseconds.
// A state with a Flow (format 2) expires no later than the flow's deadline.
func Seal(ring Keys, tenant string, c Claims, payload []byte) (string, error) {
	if err := c.validate(); err != nil {
		return "", err
	}
	if len(payload) > MaxPayload {
		return "", fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrArgument, len(payload), MaxPayload)
	}
	kv, aead, err := ring.Sealer(tenant)
	if err != nil {
		// Both wrapped: the caller branches on ErrArgument, and may ask
		// which of the key ring's errors it was (keys.ErrBadTenant).
		return "", fmt.Errorf("%w: %w", ErrArgument, err)
	}
	version, overhead := byte(Version), Overhead
	if c.Flow != nil {
		version, overhead = FlowVersion, FlowOverhead
	}

	// One buffer holds the blob and, past its end, the associated data.
	buf := make([]byte, overhead+len(payload), overhead+len(payload)+headerLen+len(tenant))
	buf[0] = version
	binary.BigEndian.PutUint32(buf[1:headerLen], kv)
	nonce := buf[headerLen : headerLen+nonceLen]
	rand.Read(nonce)

	pt := buf[headerLen+nonceLen : len(buf)-tagLen]
	n := c.encode(pt)
	copy(pt[n:], payload)

	ad := appendAD(buf[len(buf):], buf[:headerLen], tenant)
	aead.Seal(pt[:0], nonce, pt, ad)
	return encode(buf), nil
}

func (c *Claims) validate() error {
	switch {
	case len(c.Principal) == 0:
		return fmt.Errorf("%w: empty principal", ErrArgument)
	case len(c.Principal) > MaxPrincipal:
		return fmt.Errorf("%w: principal of %d bytes exceeds %d", ErrArgument, len(c.Principal), MaxPrincipal)
	case !inRange(c.IssuedAt) || !inRange(c.ExpiresAt):
		return fmt.Errorf("%w: times must lie from the Unix epoch to the end of year 9999", ErrArgument)
	case c.ExpiresAt.UnixMilli() <= c.IssuedAt.UnixMilli():
		return fmt.Errorf("%w: expiry not after issue time", ErrArgument)
	case c.Flow != nil:
		return c.Flow.validate(c)
	}
	return nil
}

// inRange reports whether t lies from the Unix epoch to the end of the
// millisecond MaxUnixMilli, the times a state carries.
func inRange(t time.Time) bool {
	return !t.Before(time.UnixMilli(0)) && t.Before(time.UnixMilli(MaxUnixMilli+1))
}

// encode writes the claims of FORMAT.md, "Claims" (and "Flows" when c has a
// flow) at the start of dst, and returns how many bytes it wrote.
func (c *Claims) encode(dst []byte) int {
	dst[0] = 0
	if c.OneTime {
		dst[0] |= flagOneTime
	}
	binary.BigEndian.PutUint64(dst[issuedAt:expiresAt], uint64(c.IssuedAt.UnixMilli()))
	binary.BigEndian.PutUint64(dst[expiresAt:principal], uint64(c.ExpiresAt.UnixMilli()))
	hashPrincipal(dst[principal:request], c.Principal)
	copy(dst[request:claimsLen], c.Request[:])
	if c.Flow == nil {
		return claimsLen
	}
	dst[0] |= c.Flow.encode(dst[claimsLen:])
	return claimsLen + flowLen
}
