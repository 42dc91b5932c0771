package sealer

import (
	"crypto/subtle"
	"encoding/binary"
	"time"
)

// Open authenticates state as sealed for tenant by a version in the ring,
// then checks it against want at time now, in the order of FORMAT.md,
// "Opening". A state that is not authentic is ErrInvalid; an authentic one
// may be ErrExpired, ErrPrincipalMismatch or ErrRequestMismatch, and one
// that carries a flow ErrFlowExpired, ErrFlowExhausted or ErrInputMismatch.
// On error no plaintext is returned and the decrypted buffer is zeroed.
func Open(ring Keys, tenant, state string, want Expect, now time.Time) (*Opened, error) {
	return open(ring, tenant, state, want, now, true)
}

// Authenticate returns the claims of state if it is an authentic state
// sealed for tenant by a version in the ring, without judging them (no
// expiry, principal, request, flow or input check): for a caller that must
// name the state it opened before, after it may have expired (recording its
// outcome, FORMAT.md, "Recorded outcomes"). Opened.Principal and Request are
// zero (only their hashes are sealed); Payload is nil and the plaintext is
// zeroed. A state that is not authentic, or whose claims are malformed
// (FORMAT.md, "Opening", step 6), is ErrInvalid.
func Authenticate(ring Keys, tenant, state string) (*Opened, error) {
	pt, h, err := unseal(ring, tenant, state)
	if err != nil {
		return nil, err
	}
	defer clear(pt)
	c, _, ok := decodeClaims(pt, h.Version == FlowVersion)
	if !ok {
		return nil, ErrInvalid
	}
	return &Opened{Claims: c, ID: h.ID, KeyVersion: h.KeyVersion}, nil
}

// open is Open; checkInputs false skips step 12, for Continue.
func open(ring Keys, tenant, state string, want Expect, now time.Time, checkInputs bool) (*Opened, error) {
	pt, h, err := unseal(ring, tenant, state)
	if err != nil {
		return nil, err
	}
	o, err := judge(pt, h.Version == FlowVersion, want, now, checkInputs)
	if err != nil {
		clear(pt)
		return nil, err
	}
	o.KeyVersion, o.ID = h.KeyVersion, h.ID
	return o, nil
}

// unseal authenticates state as sealed for tenant by a version in the ring
// (FORMAT.md, "Opening", steps 1 to 5), and returns its plaintext and
// header. On error the decrypted buffer is zeroed.
func unseal(ring Keys, tenant, state string) (pt []byte, h Header, err error) {
	if !wellFormed(state) {
		return nil, h, ErrInvalid
	}
	// One buffer holds the blob and, past its end, the associated data.
	buf := make([]byte, b64.DecodedLen(len(state))+headerLen+len(tenant))
	n, err := b64.Decode(buf, []byte(state))
	if err != nil {
		return nil, h, ErrInvalid
	}
	buf = buf[:n]
	overhead := Overhead
	switch buf[0] {
	case Version:
	case FlowVersion:
		overhead = FlowOverhead
	default:
		return nil, h, ErrInvalid
	}
	if n < overhead || n > overhead+MaxPayload {
		return nil, h, ErrInvalid
	}
	kv := binary.BigEndian.Uint32(buf[1:headerLen])
	aead, ok := ring.Opener(kv, tenant)
	if !ok {
		return nil, h, ErrInvalid
	}
	ad := appendAD(buf[len(buf):], buf[:headerLen], tenant)
	nonce := buf[headerLen : headerLen+nonceLen]
	ct := buf[headerLen+nonceLen:]
	pt, err = aead.Open(ct[:0], nonce, ct, ad)
	if err != nil {
		clear(ct)
		return nil, h, ErrInvalid
	}
	h = Header{Version: buf[0], KeyVersion: kv}
	copy(h.ID[:], nonce)
	return pt, h, nil
}

// judge decodes the claims of an authentic plaintext and checks them in the
// order of FORMAT.md, "Opening".
func judge(pt []byte, flow bool, want Expect, now time.Time, checkInputs bool) (*Opened, error) {
	c, end, ok := decodeClaims(pt, flow)
	if !ok {
		return nil, ErrInvalid
	}
	if c.Expired(now, want.Skew) {
		return nil, ErrExpired
	}
	var ph [principalLen]byte
	hashPrincipal(ph[:], want.Principal)
	if subtle.ConstantTimeCompare(ph[:], pt[principal:request]) != 1 {
		return nil, ErrPrincipalMismatch
	}
	if subtle.ConstantTimeCompare(want.Request[:], pt[request:claimsLen]) != 1 {
		return nil, ErrRequestMismatch
	}
	if f := c.Flow; f != nil {
		switch {
		case f.Expired(now):
			return nil, ErrFlowExpired
		case want.MaxRounds > 0 && f.Round > want.MaxRounds:
			return nil, ErrFlowExhausted
		case checkInputs && pt[0]&flagAsked != 0 && subtle.ConstantTimeCompare(want.Inputs[:], f.Asked[:]) != 1:
			return nil, ErrInputMismatch
		}
	}
	c.Principal, c.Request = want.Principal, want.Request
	return &Opened{Claims: c, Payload: pt[end:]}, nil
}

// decodeClaims reads the claims of an authentic plaintext, and the flow's
// when it carries one, and checks that they are well formed (FORMAT.md,
// "Opening", step 6). It returns where the payload starts, and false for
// malformed claims. The principal and the request are left for the caller
// to compare: a plaintext holds only their hashes.
func decodeClaims(pt []byte, flow bool) (c Claims, end int, ok bool) {
	flags := pt[0]
	allowed, end := byte(flagOneTime), claimsLen
	if flow {
		allowed, end = flagOneTime|flagFlow|flagAsked, claimsLen+flowLen
	}
	if flags&^allowed != 0 {
		return Claims{}, 0, false
	}
	iat := binary.BigEndian.Uint64(pt[issuedAt:expiresAt])
	exp := binary.BigEndian.Uint64(pt[expiresAt:principal])
	if exp <= iat || exp > MaxUnixMilli { // and so iat < MaxUnixMilli too
		return Claims{}, 0, false
	}
	c = Claims{
		IssuedAt:  time.UnixMilli(int64(iat)).UTC(),
		ExpiresAt: time.UnixMilli(int64(exp)).UTC(),
		OneTime:   flags&flagOneTime != 0,
	}
	if flow {
		if c.Flow, ok = decodeFlow(pt[claimsLen:end], flags, exp); !ok {
			return Claims{}, 0, false
		}
	}
	return c, end, true
}
