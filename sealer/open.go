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

// open is Open; checkInputs false skips step 12, for Continue.
func open(ring Keys, tenant, state string, want Expect, now time.Time, checkInputs bool) (*Opened, error) {
	if !wellFormed(state) {
		return nil, ErrInvalid
	}
	// One buffer holds the blob and, past its end, the associated data.
	buf := make([]byte, b64.DecodedLen(len(state))+headerLen+len(tenant))
	n, err := b64.Decode(buf, []byte(state))
	if err != nil {
		return nil, ErrInvalid
	}
	buf = buf[:n]
	overhead := Overhead
	switch buf[0] {
	case Version:
	case FlowVersion:
		overhead = FlowOverhead
	default:
		return nil, ErrInvalid
	}
	if n < overhead || n > overhead+MaxPayload {
		return nil, ErrInvalid
	}
	kv := binary.BigEndian.Uint32(buf[1:headerLen])
	aead, ok := ring.Opener(kv, tenant)
	if !ok {
		return nil, ErrInvalid
	}
	ad := appendAD(buf[len(buf):], buf[:headerLen], tenant)
	nonce := buf[headerLen : headerLen+nonceLen]
	ct := buf[headerLen+nonceLen:]
	pt, err := aead.Open(ct[:0], nonce, ct, ad)
	if err != nil {
		clear(ct)
		return nil, ErrInvalid
	}
	o, err := judge(pt, buf[0] == FlowVersion, want, now, checkInputs)
	if err != nil {
		clear(pt)
		return nil, err
	}
	o.KeyVersion = kv
	copy(o.ID[:], nonce)
	return o, nil
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
