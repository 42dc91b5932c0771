package sealer_test

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	"slices"
	"strings"

	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

// This file is format version 1 written again from FORMAT.md alone, without
// package sealer: a sealer that builds the blobs Seal refuses to build (forged
// headers, bad claims), and an opener that can be told to make the mistakes
// the vectors exist to catch (TestVectors_BrokenOpenersFail).

const (
	specMinState     = 147
	specMaxState     = 87_528
	specMaxUnixMilli = 253402300799999
	specHeaderLen    = 5
	specNonceLen     = 24
	specClaimsLen    = 1 + 8 + 8 + 16 + 32
	specAlphabet     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)

// specInfo is the HKDF info of FORMAT.md, "Keys".
func specInfo(keyID uint32, tenant string) []byte {
	info := []byte("mcp-sealer/v1 tenant key\x00")
	info = binary.BigEndian.AppendUint32(info, keyID)
	return append(info, tenant...)
}

// specTenantKey derives the tenant key of FORMAT.md, "Keys".
func specTenantKey(material []byte, keyID uint32, tenant string) []byte {
	k, err := hkdf.Key(sha256.New, material, nil, string(specInfo(keyID, tenant)), 32)
	if err != nil {
		panic(err)
	}
	return k
}

func specPrincipalHash(principal string) []byte {
	h := sha256.Sum256(append([]byte("mcp-sealer/v1 principal\x00"), principal...))
	return h[:16]
}

func specHeader(version byte, keyID uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{version}, keyID)
}

func specPlaintext(flags byte, iat, exp uint64, principal string, request, payload []byte) []byte {
	pt := []byte{flags}
	pt = binary.BigEndian.AppendUint64(pt, iat)
	pt = binary.BigEndian.AppendUint64(pt, exp)
	pt = append(pt, specPrincipalHash(principal)...)
	pt = append(pt, request...)
	return append(pt, payload...)
}

// specSeal returns the state of header || nonce || XChaCha20-Poly1305(key,
// nonce, plaintext, ad): FORMAT.md, "Sealing", steps 3 and 4, from parts
// that need not be well formed.
func specSeal(tenantKey, header, nonce, plaintext, ad []byte) string {
	aead, err := chacha20poly1305.NewX(tenantKey)
	if err != nil {
		panic(err)
	}
	blob := append(slices.Clone(header), nonce...)
	return specEncode(aead.Seal(blob, nonce, plaintext, ad))
}

// specEncode is unpadded base64url.
func specEncode(blob []byte) string {
	var b strings.Builder
	var acc uint32
	bits := 0
	for _, c := range blob {
		acc, bits = acc<<8|uint32(c), bits+8
		for bits >= 6 {
			bits -= 6
			b.WriteByte(specAlphabet[acc>>bits&63])
		}
	}
	if bits > 0 {
		b.WriteByte(specAlphabet[acc<<(6-bits)&63])
	}
	return b.String()
}

// mistakes are the ways an opener can depart from FORMAT.md, "Opening". The
// zero value is a faithful opener.
type mistakes struct {
	skipLength      bool // step 1: no bounds on the state's length
	laxCRLF         bool // step 2: CR and LF skipped, as Go's and many decoders do
	laxPadding      bool // step 2: trailing '=' accepted
	laxAlphabet     bool // step 2: '+' and '/' accepted for '-' and '_'
	laxTrailingBits bool // step 2: unused bits of the last character ignored
	skipVersion     bool // step 3
	anyKey          bool // step 4: key_id ignored, every version of the ring tried
	anyTenant       bool // step 4: a key derived for a tenant of any length
	noTag           bool // step 5: decrypted without checking the tag
	skipFlags       bool // step 6: unknown flags accepted
	skipOrder       bool // step 6: expires_at <= issued_at accepted
	skipRange       bool // step 6: times past year 9999 accepted
	skipExpiry      bool // step 7
	ignoreSkew      bool // step 7: no allowance
	negativeSkew    bool // step 7: a negative skew shortens the state's life
	expiryInclusive bool // step 7: expired at expires_at + skew already
	skipPrincipal   bool // step 8
	boundPrincipal  bool // step 8: an expected principal over 1 KiB or empty is invalid
	skipRequest     bool // step 9
	principalFirst  bool // steps 7 and 8 swapped
	requestFirst    bool // steps 8 and 9 swapped
}

// specOpening is what an opener is given (FORMAT.md, "Opening").
type specOpening struct {
	ring      map[uint32][]byte // key version -> master key material
	tenant    string
	state     string
	principal string
	request   []byte
	now, skew int64 // milliseconds
}

// specOpened is an open state.
type specOpened struct {
	keyID    uint32
	id       []byte
	flags    byte
	iat, exp uint64
	payload  []byte
}

// specOpen opens in as FORMAT.md says, but for the mistakes m. It returns
// the verdict, the step that decided it (10 when the state opens) and, for
// "ok", the state. A panic, which a faithful opener never has, is the
// verdict "panic".
func specOpen(in specOpening, m mistakes) (verdict string, step int, o *specOpened) {
	defer func() {
		if recover() != nil {
			verdict, step, o = "panic", 0, nil
		}
	}()
	if !m.skipLength && (len(in.state) < specMinState || len(in.state) > specMaxState) {
		return "invalid", 1, nil
	}
	blob, ok := specDecode(in.state, m)
	if !ok {
		return "invalid", 2, nil
	}
	if blob[0] != 1 && !m.skipVersion {
		return "invalid", 3, nil
	}
	keyID := binary.BigEndian.Uint32(blob[1:specHeaderLen])
	var tries []uint32
	if _, ok := in.ring[keyID]; ok {
		tries = []uint32{keyID}
	}
	if m.anyKey {
		for id := range in.ring {
			tries = append(tries, id)
		}
		slices.Sort(tries)
	}
	if (len(in.tenant) < 1 || len(in.tenant) > 255) && !m.anyTenant {
		tries = nil
	}
	if len(tries) == 0 {
		return "invalid", 4, nil
	}
	header, nonce, ct := blob[:specHeaderLen], blob[specHeaderLen:specHeaderLen+specNonceLen], blob[specHeaderLen+specNonceLen:]
	ad := append(slices.Clone(header), in.tenant...)
	var pt []byte
	for _, id := range tries {
		key := specTenantKey(in.ring[id], id, in.tenant)
		if m.noTag {
			pt = specDecryptOnly(key, nonce, ct)
			break
		}
		aead, _ := chacha20poly1305.NewX(key)
		if p, err := aead.Open(nil, nonce, ct, ad); err == nil {
			pt = p
			break
		}
	}
	if pt == nil {
		return "invalid", 5, nil
	}
	o = &specOpened{keyID: keyID, id: nonce[:16], flags: pt[0],
		iat: binary.BigEndian.Uint64(pt[1:9]), exp: binary.BigEndian.Uint64(pt[9:17]), payload: pt[specClaimsLen:]}
	switch {
	case !m.skipFlags && o.flags&^1 != 0,
		!m.skipOrder && o.exp <= o.iat,
		!m.skipRange && (o.iat > specMaxUnixMilli || o.exp > specMaxUnixMilli):
		return "invalid", 6, nil
	}
	checks := []func() (string, int){
		func() (string, int) { // 7
			skew := in.skew
			if skew < 0 && !m.negativeSkew || m.ignoreSkew {
				skew = 0
			}
			deadline := new(big.Int).Add(new(big.Int).SetUint64(o.exp), big.NewInt(skew))
			c := big.NewInt(in.now).Cmp(deadline)
			if !m.skipExpiry && (c > 0 || c == 0 && m.expiryInclusive) {
				return "expired", 7
			}
			return "", 0
		},
		func() (string, int) { // 8
			if m.boundPrincipal && (len(in.principal) == 0 || len(in.principal) > 1024) {
				return "invalid", 8
			}
			if !m.skipPrincipal && string(specPrincipalHash(in.principal)) != string(pt[17:33]) {
				return "principal_mismatch", 8
			}
			return "", 0
		},
		func() (string, int) { // 9
			if !m.skipRequest && string(in.request) != string(pt[33:65]) {
				return "request_mismatch", 9
			}
			return "", 0
		},
	}
	if m.principalFirst {
		checks[0], checks[1] = checks[1], checks[0]
	}
	if m.requestFirst {
		checks[1], checks[2] = checks[2], checks[1]
	}
	for _, check := range checks {
		if v, s := check(); v != "" {
			return v, s, nil
		}
	}
	return "ok", 10, o
}

// specDecode decodes unpadded base64url strictly, or as laxly as m says.
func specDecode(s string, m mistakes) ([]byte, bool) {
	if m.laxCRLF {
		s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	}
	if m.laxPadding {
		s = strings.TrimRight(s, "=")
	}
	if len(s)%4 == 1 {
		return nil, false
	}
	var out []byte
	var acc uint32
	bits := 0
	for i := range len(s) {
		v := strings.IndexByte(specAlphabet, s[i])
		if m.laxAlphabet && s[i] == '+' {
			v = 62
		} else if m.laxAlphabet && s[i] == '/' {
			v = 63
		}
		if v < 0 {
			return nil, false
		}
		acc, bits = acc<<6|uint32(v), bits+6
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
			acc &= 1<<bits - 1
		}
	}
	if acc != 0 && !m.laxTrailingBits {
		return nil, false
	}
	return out, true
}

// specDecryptOnly is XChaCha20-Poly1305 decryption without the tag check:
// the XChaCha20 key stream from block 1 (block 0 keys Poly1305).
func specDecryptOnly(key, nonce, ct []byte) []byte {
	c, err := chacha20.NewUnauthenticatedCipher(key, nonce)
	if err != nil {
		panic(err)
	}
	c.SetCounter(1)
	pt := make([]byte, len(ct)-chacha20poly1305.Overhead)
	c.XORKeyStream(pt, ct[:len(pt)])
	return pt
}
