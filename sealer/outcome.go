package sealer

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"
)

// Sizes of a sealed outcome (FORMAT.md, "Recorded outcomes").
const (
	// MaxOutcome is the largest outcome SealOutcome seals: 1 MiB.
	MaxOutcome = 1 << 20

	outcomeVersion  = 3
	recordedAtLen   = 8
	outcomeOverhead = headerLen + nonceLen + recordedAtLen + tagLen
)

// SealOutcome seals outcome, the answer an MCP server sent for the state
// named id, for tenant with the ring's sealing version, recorded at
// recordedAt (whole milliseconds, from the Unix epoch to MaxUnixMilli). The
// blob opens only with OpenOutcome for the same tenant and id. An outcome
// over MaxOutcome bytes, a time out of range or a malformed tenant is
// ErrArgument.
func SealOutcome(ring Keys, tenant string, id StateID, outcome []byte, recordedAt time.Time) ([]byte, error) {
	switch {
	case len(outcome) > MaxOutcome:
		return nil, fmt.Errorf("%w: outcome of %d bytes exceeds %d", ErrArgument, len(outcome), MaxOutcome)
	case !inRange(recordedAt):
		return nil, fmt.Errorf("%w: recording time must lie from the Unix epoch to the end of year 9999", ErrArgument)
	}
	kv, aead, err := ring.Sealer(tenant)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrArgument, err) // as in Seal
	}

	// One buffer holds the blob and, past its end, the associated data.
	n := outcomeOverhead + len(outcome)
	buf := make([]byte, n, n+headerLen+len(id)+len(tenant))
	buf[0] = outcomeVersion
	binary.BigEndian.PutUint32(buf[1:headerLen], kv)
	nonce := buf[headerLen : headerLen+nonceLen]
	rand.Read(nonce)

	pt := buf[headerLen+nonceLen : n-tagLen]
	binary.BigEndian.PutUint64(pt, uint64(recordedAt.UnixMilli()))
	copy(pt[recordedAtLen:], outcome)

	ad := appendOutcomeAD(buf[n:], buf[:headerLen], id, tenant)
	aead.Seal(pt[:0], nonce, pt, ad)
	return buf[:n:n], nil
}

// OpenOutcome opens a blob of SealOutcome as sealed for tenant and the
// state named id by a version in the ring, in the order of FORMAT.md,
// "Recorded outcomes", and returns the outcome and when it was recorded.
// Any failure is ErrInvalid; the decrypted buffer is then zeroed. The blob
// is not modified.
func OpenOutcome(ring Keys, tenant string, id StateID, blob []byte) (outcome []byte, recordedAt time.Time, err error) {
	if len(blob) < outcomeOverhead || len(blob) > outcomeOverhead+MaxOutcome || blob[0] != outcomeVersion {
		return nil, time.Time{}, ErrInvalid
	}
	aead, ok := ring.Opener(binary.BigEndian.Uint32(blob[1:headerLen]), tenant)
	if !ok {
		return nil, time.Time{}, ErrInvalid
	}
	ct := blob[headerLen+nonceLen:]
	// One buffer holds the plaintext and, past its end, the associated data.
	buf := make([]byte, 0, len(ct)-tagLen+headerLen+len(id)+len(tenant))
	ad := appendOutcomeAD(buf[len(ct)-tagLen:len(ct)-tagLen], blob[:headerLen], id, tenant)
	pt, err := aead.Open(buf, blob[headerLen:headerLen+nonceLen], ct, ad)
	if err != nil {
		clear(buf[:len(ct)-tagLen])
		return nil, time.Time{}, ErrInvalid
	}
	at := binary.BigEndian.Uint64(pt[:recordedAtLen])
	if at > MaxUnixMilli {
		clear(pt)
		return nil, time.Time{}, ErrInvalid
	}
	return pt[recordedAtLen:len(pt):len(pt)], time.UnixMilli(int64(at)).UTC(), nil
}

// appendOutcomeAD appends the associated data of a sealed outcome: the
// header, the state id, then the tenant.
func appendOutcomeAD(dst, header []byte, id StateID, tenant string) []byte {
	return append(append(append(dst, header...), id[:]...), tenant...)
}
