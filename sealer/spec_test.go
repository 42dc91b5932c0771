package sealer_test

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

// This file is format versions 1 and 2 written again from FORMAT.md alone,
// without package sealer: a sealer that builds the blobs Seal refuses to build
// (forged headers, bad claims, bad flows), and an opener that can be told to
// make the mistakes the vectors exist to catch (TestVectors_BrokenOpenersFail,
// TestFlowVectors_BrokenOpenersFail). The opener reads version 1 alone, as the
// vectors of vectors.json were written for, or both versions (specOpening.v2),
// as those of flows.json were.

const (
	specMinState     = 147
	specMaxState     = 87_528 // version 1 alone
	specMaxStateV2   = 87_608 // both versions
	specMaxUnixMilli = 253402300799999
	specHeaderLen    = 5
	specNonceLen     = 24
	specClaimsLen    = 1 + 8 + 8 + 16 + 32
	specFlowLen      = 16 + 4 + 8 + 32 // flow_id, round, flow_deadline, inputs
	specMaxPayload   = 65_536
	specBlobOverhead = specHeaderLen + specNonceLen + specClaimsLen + 16 // version 1; version 2 adds specFlowLen
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

// specFlowFields are the fields of FORMAT.md, "Flows", that a version 2
// plaintext carries between request_digest and the payload.
func specFlowFields(flowID []byte, round uint32, deadline uint64, inputs []byte) []byte {
	f := slices.Clone(flowID)
	f = binary.BigEndian.AppendUint32(f, round)
	f = binary.BigEndian.AppendUint64(f, deadline)
	return append(f, inputs...)
}

// specInputs returns the input keys digest of FORMAT.md, "Flows", or false
// when the keys have none, as FORMAT.md says but for the mistakes m.
func specInputs(keys []string, m mistakes) ([]byte, bool) {
	ks := slices.Clone(keys)
	if m.inputsFold {
		for i, k := range ks {
			ks[i] = strings.ToLower(k)
		}
	}
	seen := map[string]bool{}
	kept := ks[:0]
	for _, k := range ks {
		if len(k) == 0 || len(k) > 1024 || !utf8.ValidString(k) {
			return nil, false
		}
		if seen[k] && !m.inputsDedupe {
			return nil, false
		}
		if !seen[k] {
			kept = append(kept, k)
		}
		seen[k] = true
	}
	ks = kept
	if len(ks) > 256 {
		return nil, false
	}
	switch {
	case m.inputsUnsorted:
	case m.inputsUTF16:
		slices.SortFunc(ks, func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		})
	default:
		slices.SortFunc(ks, func(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) })
	}
	pre := []byte("mcp-sealer/v2 inputs\x00")
	if !m.inputsNoCount {
		pre = binary.BigEndian.AppendUint32(pre, uint32(len(ks)))
	}
	for _, k := range ks {
		if !m.inputsNoLengths {
			pre = binary.BigEndian.AppendUint32(pre, uint32(len(k)))
		}
		pre = append(pre, k...)
	}
	sum := sha256.Sum256(pre)
	return sum[:], true
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
	skipLength      bool // steps 1 and 3: no bounds on the state's length, nor the blob's
	countCharacters bool // step 1: the state's length in characters, not UTF-8 bytes
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

	// Version 2 (specOpening.v2).
	v1StateBound       bool // step 1: the bound of version 1 alone, 87,528 characters
	laxBlobLength      bool // step 3: the blob's length not checked against its version
	v1FlowFlags        bool // step 6: bits 1 and 2 accepted in version 1 too
	v2OneTimeOnly      bool // step 6: only bit 0 accepted in version 2 too
	skipRoundZero      bool // step 6: round 0 accepted
	skipDeadlineRange  bool // step 6: flow_deadline past year 9999 accepted
	skipDeadlineOrder  bool // step 6: expires_at after flow_deadline accepted
	skipInputsBit      bool // step 6: bit 2 and the inputs field not checked against each other
	skipFlowDeadline   bool // step 10
	skewOnFlowDeadline bool // step 10: the skew applied to the flow deadline too
	deadlineInclusive  bool // step 10: flow expired at flow_deadline already
	skipMaxRounds      bool // step 11
	maxRoundsInclusive bool // step 11: exhausted at maxRounds already
	skipInputs         bool // step 12
	notGivenIsEmpty    bool // step 12: keys not given taken as the empty set
	inputsFold         bool // step 12: the retry's keys compared case-insensitively (lower-cased)
	inputsDedupe       bool // step 12: a retry key given twice counted once
	inputsUnsorted     bool // input keys digest: keys in the order given
	inputsUTF16        bool // input keys digest: keys sorted by UTF-16 code units
	inputsNoCount      bool // input keys digest: no u32(n)
	inputsNoLengths    bool // input keys digest: no u32(len(key))
	flowFirst          bool // step 10 before step 7
	inputsFirst        bool // step 12 before step 8
}

// specOpening is what an opener is given (FORMAT.md, "Opening").
type specOpening struct {
	ring      map[uint32][]byte // key version -> master key material
	tenant    string
	state     string
	principal string
	request   []byte
	now, skew int64 // milliseconds

	v2        bool      // the opener reads versions 1 and 2, not version 1 alone
	inputKeys *[]string // the keys of the retry's inputResponses; nil: not given
	maxRounds uint32    // the tenant's maxRounds; 0: no limit
}

// specOpened is an open state.
type specOpened struct {
	keyID    uint32
	id       []byte
	flags    byte
	iat, exp uint64
	payload  []byte

	version  byte
	flowID   []byte // version 2
	round    uint32
	deadline uint64
	inputs   []byte
}

// specOpen opens in as FORMAT.md says, but for the mistakes m. It returns
// the verdict, the step that decided it (when the state opens: 10 for an
// opener of version 1 alone, 13 for one of both versions) and, for "ok",
// the state. A panic, which a faithful opener never has, is the verdict
// "panic".
func specOpen(in specOpening, m mistakes) (verdict string, step int, o *specOpened) {
	defer func() {
		if recover() != nil {
			verdict, step, o = "panic", 0, nil
		}
	}()
	maxState, openStep := specMaxState, 10
	if in.v2 {
		maxState, openStep = specMaxStateV2, 13
	}
	if m.v1StateBound {
		maxState = specMaxState
	}
	length := len(in.state)
	if m.countCharacters {
		length = utf8.RuneCountInString(in.state)
	}
	if !m.skipLength && (length < specMinState || length > maxState) {
		return "invalid", 1, nil
	}
	blob, ok := specDecode(in.state, m)
	if !ok {
		return "invalid", 2, nil
	}
	version := blob[0]
	switch {
	case version == 1, version == 2 && in.v2:
	case m.skipVersion:
		version = 1 // read as version 1
	default:
		return "invalid", 3, nil
	}
	lo := specBlobOverhead
	if version == 2 {
		lo += specFlowLen
	}
	if !m.skipLength && !m.laxBlobLength && (len(blob) < lo || len(blob) > lo+specMaxPayload) {
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
	o = &specOpened{keyID: keyID, id: nonce[:16], flags: pt[0], version: version,
		iat: binary.BigEndian.Uint64(pt[1:9]), exp: binary.BigEndian.Uint64(pt[9:17]), payload: pt[specClaimsLen:]}
	flags := byte(1) // the flags the version defines
	if version == 2 || m.v1FlowFlags {
		flags = 7
	}
	if version == 2 && m.v2OneTimeOnly {
		flags = 1
	}
	if version == 2 {
		flow := pt[specClaimsLen : specClaimsLen+specFlowLen]
		o.flowID, o.round, o.deadline, o.inputs = flow[:16], binary.BigEndian.Uint32(flow[16:20]), binary.BigEndian.Uint64(flow[20:28]), flow[28:]
		o.payload = pt[specClaimsLen+specFlowLen:]
	}
	bound, zero := o.flags&4 != 0, bytes.Equal(o.inputs, make([]byte, 32))
	switch {
	case !m.skipFlags && o.flags&^flags != 0,
		!m.skipOrder && o.exp <= o.iat,
		!m.skipRange && (o.iat > specMaxUnixMilli || o.exp > specMaxUnixMilli):
		return "invalid", 6, nil
	case version != 2:
	case !m.skipRoundZero && o.round == 0,
		!m.skipDeadlineRange && o.deadline > specMaxUnixMilli,
		!m.skipDeadlineOrder && o.exp > o.deadline,
		!m.skipInputsBit && bound == zero:
		return "invalid", 6, nil
	}
	checks := map[int]func() (string, int){
		7: func() (string, int) {
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
		8: func() (string, int) {
			if m.boundPrincipal && (len(in.principal) == 0 || len(in.principal) > 1024) {
				return "invalid", 8
			}
			if !m.skipPrincipal && string(specPrincipalHash(in.principal)) != string(pt[17:33]) {
				return "principal_mismatch", 8
			}
			return "", 0
		},
		9: func() (string, int) {
			if !m.skipRequest && string(in.request) != string(pt[33:65]) {
				return "request_mismatch", 9
			}
			return "", 0
		},
		10: func() (string, int) {
			if version != 2 || m.skipFlowDeadline {
				return "", 0
			}
			deadline := new(big.Int).SetUint64(o.deadline)
			if m.skewOnFlowDeadline && in.skew > 0 {
				deadline.Add(deadline, big.NewInt(in.skew))
			}
			if c := big.NewInt(in.now).Cmp(deadline); c > 0 || c == 0 && m.deadlineInclusive {
				return "flow_expired", 10
			}
			return "", 0
		},
		11: func() (string, int) {
			if version != 2 || m.skipMaxRounds || in.maxRounds == 0 {
				return "", 0
			}
			if o.round > in.maxRounds || o.round == in.maxRounds && m.maxRoundsInclusive {
				return "flow_exhausted", 11
			}
			return "", 0
		},
		12: func() (string, int) {
			if version != 2 || !bound || m.skipInputs {
				return "", 0
			}
			keys := in.inputKeys
			if keys == nil && m.notGivenIsEmpty {
				keys = &[]string{}
			}
			if keys == nil {
				return "input_mismatch", 12
			}
			if d, ok := specInputs(*keys, m); !ok || !bytes.Equal(d, o.inputs) {
				return "input_mismatch", 12
			}
			return "", 0
		},
	}
	order := []int{7, 8, 9, 10, 11, 12}
	swap := func(a, b int) {
		i, j := slices.Index(order, a), slices.Index(order, b)
		order[i], order[j] = order[j], order[i]
	}
	if m.principalFirst {
		swap(7, 8)
	}
	if m.requestFirst {
		swap(8, 9)
	}
	if m.flowFirst {
		order = append([]int{10}, slices.DeleteFunc(order, func(s int) bool { return s == 10 })...)
	}
	if m.inputsFirst {
		order = slices.DeleteFunc(order, func(s int) bool { return s == 12 })
		order = slices.Insert(order, slices.Index(order, 8), 12)
	}
	for _, s := range order {
		if v, step := checks[s](); v != "" {
			return v, step, nil
		}
	}
	return "ok", openStep, o
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
