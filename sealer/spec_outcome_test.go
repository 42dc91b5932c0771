package sealer_test

import (
	"bytes"
	"encoding/binary"
	"slices"

	"golang.org/x/crypto/chacha20poly1305"
)

// This file is FORMAT.md, "Recorded outcomes", written again without
// package sealer: a sealer of outcome blobs from parts that need not be
// well formed, and an opener that can be told to make the mistakes the
// vectors of outcomes.json exist to catch (TestOutcomeVectors_BrokenOpenersFail).

const (
	specOutcomeOverhead = specHeaderLen + specNonceLen + 8 + 16 // header, nonce, recorded_at, tag
	specMaxOutcome      = 1 << 20
	specOutcomeOpenStep = 6 // the step at which an outcome opens
)

// specOutcomeAD is header || state_id || tenant.
func specOutcomeAD(header, id []byte, tenant string) []byte {
	return append(append(slices.Clone(header), id...), tenant...)
}

// specOutcomePlaintext is u64(recorded_at) || outcome.
func specOutcomePlaintext(recordedAt uint64, outcome []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, recordedAt), outcome...)
}

// specSealOutcome returns header || nonce || XChaCha20-Poly1305-Seal(key,
// nonce, plaintext, ad).
func specSealOutcome(tenantKey, header, nonce, plaintext, ad []byte) []byte {
	aead, err := chacha20poly1305.NewX(tenantKey)
	if err != nil {
		panic(err)
	}
	blob := append(slices.Clone(header), nonce...)
	return aead.Seal(blob, nonce, plaintext, ad)
}

// outcomeMistakes are the ways an opener of outcomes can depart from
// FORMAT.md. The zero value is a faithful opener.
type outcomeMistakes struct {
	skipLength    bool // step 1
	versionFirst  bool // step 2 before step 1
	skipVersion   bool // step 2
	anyKey        bool // step 3: key_id ignored, every version of the ring tried
	noStateID     bool // step 4: ad without the state id
	noTenant      bool // step 4: ad without the tenant
	skipTimeRange bool // step 5
	signedTime    bool // step 5: recorded_at read as a signed integer
}

// specOpenOutcome opens blob as sealed for tenant and the state id as
// FORMAT.md says, but for the mistakes m. It returns the verdict ("ok" or
// "invalid"), the step that decided it (specOutcomeOpenStep when it opens)
// and, for "ok", the time and the outcome. A panic, which a faithful opener
// never has, is the verdict "panic".
func specOpenOutcome(ring map[uint32][]byte, tenant string, id, blob []byte, m outcomeMistakes) (verdict string, step int, recordedAt uint64, outcome []byte) {
	defer func() {
		if recover() != nil {
			verdict, step, recordedAt, outcome = "panic", 0, 0, nil
		}
	}()
	lengthOK := m.skipLength || len(blob) >= specOutcomeOverhead && len(blob) <= specOutcomeOverhead+specMaxOutcome
	versionOK := m.skipVersion || len(blob) > 0 && blob[0] == 3
	switch {
	case m.versionFirst && !versionOK:
		return "invalid", 2, 0, nil
	case !lengthOK:
		return "invalid", 1, 0, nil
	case !versionOK:
		return "invalid", 2, 0, nil
	}
	header, nonce, ct := blob[:specHeaderLen], blob[specHeaderLen:specHeaderLen+specNonceLen], blob[specHeaderLen+specNonceLen:]
	keyID := binary.BigEndian.Uint32(header[1:])
	candidates := []uint32{keyID}
	if m.anyKey {
		candidates = nil
		for v := range ring {
			candidates = append(candidates, v)
		}
		slices.Sort(candidates)
	}
	if _, ok := ring[keyID]; !ok && !m.anyKey || len(tenant) == 0 || len(tenant) > 255 {
		return "invalid", 3, 0, nil
	}
	ad := slices.Clone(header)
	if !m.noStateID {
		ad = append(ad, id...)
	}
	if !m.noTenant {
		ad = append(ad, tenant...)
	}
	var pt []byte
	for _, v := range candidates {
		aead, err := chacha20poly1305.NewX(specTenantKey(ring[v], v, tenant))
		if err != nil {
			panic(err)
		}
		if p, err := aead.Open(nil, nonce, ct, ad); err == nil {
			pt = p
			break
		}
	}
	if pt == nil {
		return "invalid", 4, 0, nil
	}
	at := binary.BigEndian.Uint64(pt[:8])
	tooLate := at > specMaxUnixMilli
	if m.signedTime {
		tooLate = int64(at) > specMaxUnixMilli
	}
	if tooLate && !m.skipTimeRange {
		return "invalid", 5, 0, nil
	}
	return "ok", specOutcomeOpenStep, at, bytes.Clone(pt[8:])
}
