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

// judge decodes the claims of an authentic plaintext and checks them.
func judge(pt []byte, flow bool, want Expect, now time.Time, checkInputs bool) (*Opened, error) {
	flags := pt[0]
	allowed, end := byte(flagOneTime), claimsLen
	if flow {
		allowed, end = flagOneTime|flagFlow|flagAsked, claimsLen+flowLen
	}
	if flags&^allowed != 0 {
		return nil, ErrInvalid
	}
	iat := binary.BigEndian.Uint64(pt[1:9])
	exp := binary.BigEndian.Uint64(pt[9:17])
	if exp <= iat || exp > MaxUnixMilli { // and so iat < MaxUnixMilli too
		return nil, ErrInvalid
	}
	var f *Flow
	if flow {
		var ok bool
		if f, ok = decodeFlow(pt[claimsLen:end], flags, exp); !ok {
			return nil, ErrInvalid
		}
	}
	if (Claims{ExpiresAt: time.UnixMilli(int64(exp))}).Expired(now, want.Skew) {
		return nil, ErrExpired
	}
	var ph [principalLen]byte
	hashPrincipal(ph[:], want.Principal)
	if subtle.ConstantTimeCompare(ph[:], pt[17:17+principalLen]) != 1 {
		return nil, ErrPrincipalMismatch
	}
	if subtle.ConstantTimeCompare(want.Request[:], pt[17+principalLen:claimsLen]) != 1 {
		return nil, ErrRequestMismatch
	}
	if f != nil {
		switch {
		case !now.Before(f.Deadline.Add(time.Millisecond)): // now_ms > deadline, without now.UnixMilli(), which wraps
			return nil, ErrFlowExpired
		case want.MaxRounds > 0 && f.Round > want.MaxRounds:
			return nil, ErrFlowExhausted
		case checkInputs && flags&flagAsked != 0 && subtle.ConstantTimeCompare(want.Inputs[:], f.Asked[:]) != 1:
			return nil, ErrInputMismatch
		}
	}
	return &Opened{
		Claims: Claims{
			Principal: want.Principal,
			Request:   want.Request,
			IssuedAt:  time.UnixMilli(int64(iat)).UTC(),
			ExpiresAt: time.UnixMilli(int64(exp)).UTC(),
			OneTime:   flags&flagOneTime != 0,
			Flow:      f,
		},
		Payload: pt[end:],
	}, nil
}
