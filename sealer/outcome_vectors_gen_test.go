package sealer_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/sealer"
)

// This file writes testdata/outcomes.json (TestOutcomeVectors), the vectors
// of FORMAT.md, "Recorded outcomes", as vectors_gen_test.go writes
// vectors.json: the blobs are sealed by sealer.SealOutcome, or crafted with
// spec_outcome_test.go where SealOutcome refuses to go, each with a nonce
// drawn from a random source seeded by the vector's name, at fixed times.
// Every verdict is written here by hand and checked against the opener of
// spec_outcome_test.go before it is written.

// The state ids of the vectors: A seals most outcomes, B another state's.
var (
	vStateA = mustHexString("000102030405060708090a0b0c0d0e0f")
	vStateB = mustHexString("101112131415161718191a1b1c1d1e1f")
)

// vRecorded is when most outcomes were recorded: 90 s after the states of
// vectors.json were issued.
const vRecorded = vt0 + 90_000

type outcomeGen struct {
	*vectorGen
	seals  []outcomeSealVector
	sealed map[string]outcomeSealVector
	opens  []outcomeOpenVector
}

func buildOutcomeVectors(t *testing.T) []byte {
	g := &outcomeGen{vectorGen: newVectorGen(t), sealed: map[string]outcomeSealVector{}}
	g.buildSeals()
	g.buildOpens()

	doc := outcomeFile{
		Comment: "Test vectors of FORMAT.md, recorded outcomes. Schema: sealer/testdata/README.md. " +
			"Written by go test ./sealer/ -run TestOutcomeVectors -update; do not edit.",
		Sealing: 2,
		Seal:    g.seals,
		Open:    g.opens,
		Answers: buildAnswers(t),
	}
	for _, id := range []uint32{1, 2} {
		doc.Keys = append(doc.Keys, vectorKey{id, hex.EncodeToString(g.material[id])})
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// seal adds a seal vector, sealed by sealer.SealOutcome under the ring of
// the given versions (sealing with the last), after checking that
// FORMAT.md gives the same blob.
func (g *outcomeGen) seal(name, tenant string, versions []uint32, id []byte, outcome []byte, recordedAt int64) {
	ring := g.keyRing(versions...)
	g.seedRandom(name)
	blob, err := sealer.SealOutcome(ring, tenant, sealer.StateID(id), outcome, time.UnixMilli(recordedAt))
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	keyID := binary.BigEndian.Uint32(blob[1:5])
	header, nonce := blob[:5], blob[5:29]
	key := specTenantKey(g.material[keyID], keyID, tenant)
	ad := specOutcomeAD(header, id, tenant)
	pt := specOutcomePlaintext(uint64(recordedAt), outcome)
	if !bytes.Equal(specSealOutcome(key, header, nonce, pt, ad), blob) {
		g.t.Fatalf("%s: FORMAT.md and sealer.SealOutcome disagree", name)
	}
	v := outcomeSealVector{
		Name: name, Tenant: tenant, KeyID: keyID, StateID: hex.EncodeToString(id), RecordedAt: recordedAt,
		Outcome: hex.EncodeToString(outcome), Nonce: hex.EncodeToString(nonce),
		HKDFInfo: hex.EncodeToString(specInfo(keyID, tenant)), TenantKey: hex.EncodeToString(key),
		Header: hex.EncodeToString(header), AD: hex.EncodeToString(ad), Plaintext: hex.EncodeToString(pt),
		Blob: hex.EncodeToString(blob),
	}
	g.seals = append(g.seals, v)
	g.sealed[name] = v
}

func (g *outcomeGen) buildSeals() {
	answer := []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Sunny, 21 °C"}]}}`)
	g.seal("valid", "tenant-a", []uint32{1, 2}, vStateA, answer, vRecorded)
	g.seal("empty outcome (shortest blob)", "tenant-a", []uint32{1, 2}, vStateA, nil, vRecorded)
	g.seal("older key version", "tenant-a", []uint32{1}, vStateA, answer, vRecorded)
	g.seal("another tenant", "tenant-b", []uint32{1, 2}, vStateA, answer, vRecorded)
	g.seal("another state id", "tenant-a", []uint32{1, 2}, vStateB, answer, vRecorded)
	g.seal("implicit tenant", "default", []uint32{1, 2}, vStateA, answer, vRecorded)
	g.seal("longest tenant, not ASCII", strings.Repeat("ü", 127)+"t", []uint32{1, 2}, vStateA, answer, vRecorded)
	g.seal("recorded at the Unix epoch", "tenant-a", []uint32{1, 2}, vStateA, answer, 0)
	g.seal("recorded at the end of year 9999", "tenant-a", []uint32{1, 2}, vStateA, answer, sealer.MaxUnixMilli)
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	g.seal("every byte value", "tenant-a", []uint32{1, 2}, vStateA, every, vRecorded)
	long := make([]byte, 64<<10)
	for i := range long {
		long[i] = byte(i * 7)
	}
	g.seal("64 KiB outcome (the server's default limit)", "tenant-a", []uint32{1, 2}, vStateA, long, vRecorded)
}

// open adds an opening vector, after checking that the opener of
// spec_outcome_test.go reaches the verdict and step written here.
func (g *outcomeGen) open(v outcomeOpenVector) {
	verdict, step, at, outcome := specOpenOutcome(g.ring, v.Tenant, mustHex(g.t, v.StateID), mustHex(g.t, v.Blob), outcomeMistakes{})
	if verdict != v.Want || step != v.Step {
		g.t.Fatalf("outcome vector %q: FORMAT.md says %s at step %d, the vector %s at step %d", v.Name, verdict, step, v.Want, v.Step)
	}
	if verdict == "ok" {
		v.Opened = &openedOutcome{KeyID: binary.BigEndian.Uint32(mustHex(g.t, v.Blob)[1:5]), RecordedAt: int64(at), Outcome: hex.EncodeToString(outcome)}
	}
	for _, o := range g.opens {
		if o.Name == v.Name {
			g.t.Fatalf("outcome vector %q twice", v.Name)
		}
	}
	g.opens = append(g.opens, v)
}

// from returns an opening vector of the seal vector name, as sealed.
func (g *outcomeGen) from(name string) outcomeOpenVector {
	s, ok := g.sealed[name]
	if !ok {
		g.t.Fatalf("no seal vector %q", name)
	}
	return outcomeOpenVector{From: name, Tenant: s.Tenant, StateID: s.StateID, Blob: s.Blob}
}

// outcomeCraft describes an outcome blob sealed by hand: everything
// SealOutcome checks, unchecked.
type outcomeCraft struct {
	version    byte
	keyID      uint32 // in the header
	sealID     uint32 // the version whose key seals (and in the HKDF info)
	adID       bool   // the state id is in the associated data
	adTenant   bool   // the tenant is in the associated data
	recordedAt uint64
	outcome    []byte
}

func baseOutcomeCraft() outcomeCraft {
	return outcomeCraft{version: 3, keyID: 2, sealID: 2, adID: true, adTenant: true, recordedAt: uint64(vRecorded), outcome: []byte(`{"step":2}`)}
}

// crafted returns an opening vector of a crafted blob, opened as tenant-a
// for state A.
func (g *outcomeGen) crafted(name, want string, step int, note string, c outcomeCraft) outcomeOpenVector {
	g.seedRandom(name)
	nonce := make([]byte, 24)
	rand.Read(nonce)
	header := specHeader(c.version, c.keyID)
	ad := slices.Clone(header)
	if c.adID {
		ad = append(ad, vStateA...)
	}
	if c.adTenant {
		ad = append(ad, "tenant-a"...)
	}
	key := specTenantKey(g.material[c.sealID], c.sealID, "tenant-a")
	pt := specOutcomePlaintext(c.recordedAt, c.outcome)
	return outcomeOpenVector{
		Name: name, Tenant: "tenant-a", StateID: hex.EncodeToString(vStateA),
		Blob: hex.EncodeToString(specSealOutcome(key, header, nonce, pt, ad)), Want: want, Step: step, Note: note,
		Crafted: &craftedOutcome{KeyID: c.sealID, HKDFInfo: hex.EncodeToString(specInfo(c.sealID, "tenant-a")),
			TenantKey: hex.EncodeToString(key), Header: hex.EncodeToString(header), Nonce: hex.EncodeToString(nonce),
			AD: hex.EncodeToString(ad), Plaintext: hex.EncodeToString(pt)},
	}
}

// mutated returns v under another name and verdict, with f applied to a
// copy of its blob.
func mutated(v outcomeOpenVector, name, want string, step int, note string, f func([]byte) []byte) outcomeOpenVector {
	v.Name, v.Want, v.Step, v.Note = name, want, step, note
	v.Blob = hex.EncodeToString(f(mustHexString(v.Blob)))
	return v
}

func (g *outcomeGen) buildOpens() {
	named := func(v outcomeOpenVector, name, want string, step int, note string) outcomeOpenVector {
		v.Name, v.Want, v.Step, v.Note = name, want, step, note
		return v
	}
	valid := g.from("valid")
	shortest := g.from("empty outcome (shortest blob)")

	// Step 6: blobs that open.
	for _, s := range g.seals {
		g.open(named(g.from(s.Name), "opens: "+s.Name, "ok", specOutcomeOpenStep, ""))
	}

	// Step 1: length.
	g.open(mutated(valid, "empty", "invalid", 1, "", func([]byte) []byte { return nil }))
	g.open(mutated(shortest, "truncated to 52 bytes", "invalid", 1, "the shortest blob without its last byte",
		func(b []byte) []byte { return b[:len(b)-1] }))
	g.open(mutated(valid, "truncated to the header and nonce", "invalid", 1, "", func(b []byte) []byte { return b[:29] }))
	g.open(mutated(shortest, "52 bytes of version 0x01", "invalid", 1, "the length is checked before the version",
		func(b []byte) []byte { b[0] = 1; return b[:len(b)-1] }))

	// Step 2: version.
	v1 := baseOutcomeCraft()
	v1.version = 1
	g.open(g.crafted("version 0x01 header", "invalid", 2, "sealed with the key, 0x01 in the header and the ad", v1))
	v2 := baseOutcomeCraft()
	v2.version = 2
	g.open(g.crafted("version 0x02 header", "invalid", 2, "sealed with the key, 0x02 in the header and the ad", v2))
	g.open(g.stateBlob())
	g.open(mutated(valid, "version 0x01 and a flipped tag byte", "invalid", 2, "", func(b []byte) []byte {
		b[0], b[len(b)-1] = 1, b[len(b)-1]^1
		return b
	}))

	// Step 3: key version and tenant.
	unknown := baseOutcomeCraft()
	unknown.keyID, unknown.sealID = 3, 3
	g.open(g.crafted("unknown key version", "invalid", 3, "sealed by key version 3, which the ring does not hold", unknown))
	zero := baseOutcomeCraft()
	zero.keyID = 0
	g.open(g.crafted("key version 0", "invalid", 3, "sealed by version 2's key, 0 in the header", zero))
	empty := named(valid, "empty tenant", "invalid", 3, "no key exists for it")
	empty.Tenant = ""
	g.open(empty)
	long := named(valid, "tenant of 256 bytes", "invalid", 3, "no key exists for it")
	long.Tenant = strings.Repeat("t", 256)
	g.open(long)
	unknownTenant := mutated(valid, "unknown key version and wrong tenant", "invalid", 3, "", func(b []byte) []byte { b[4] = 3; return b })
	unknownTenant.Tenant = "tenant-b"
	g.open(unknownTenant)

	// Step 4: authentication.
	wrongTenant := named(valid, "wrong tenant", "invalid", 4, "")
	wrongTenant.Tenant = "tenant-b"
	g.open(wrongTenant)
	caseTenant := named(valid, "tenant in another case", "invalid", 4, "")
	caseTenant.Tenant = "Tenant-a"
	g.open(caseTenant)
	wrongID := named(valid, "wrong state id", "invalid", 4, "the last bit of the state id flipped")
	wrongID.StateID = hex.EncodeToString(append(slices.Clone(vStateA[:15]), vStateA[15]^1))
	g.open(wrongID)
	otherID := named(valid, "another state's id", "invalid", 4, "")
	otherID.StateID = hex.EncodeToString(vStateB)
	g.open(otherID)
	g.open(mutated(valid, "flipped tag byte", "invalid", 4, "the last byte", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }))
	g.open(mutated(valid, "flipped nonce byte", "invalid", 4, "", func(b []byte) []byte { b[5] ^= 0x80; return b }))
	g.open(mutated(valid, "flipped recorded_at byte", "invalid", 4, "the first byte of the ciphertext", func(b []byte) []byte { b[29] ^= 1; return b }))
	g.open(mutated(valid, "truncated by one byte", "invalid", 4, "still long enough for step 1", func(b []byte) []byte { return b[:len(b)-1] }))
	g.open(mutated(valid, "one byte appended", "invalid", 4, "", func(b []byte) []byte { return append(b, 0) }))
	g.open(mutated(valid, "header names key version 1, sealed by 2", "invalid", 4, "an opener that tries every key of the ring opens it",
		func(b []byte) []byte { b[4] = 1; return b }))
	noID := baseOutcomeCraft()
	noID.adID = false
	g.open(g.crafted("sealed without the state id in the ad", "invalid", 4, "ad = header || tenant, as a state's", noID))
	noTenant := baseOutcomeCraft()
	noTenant.adTenant = false
	g.open(g.crafted("sealed without the tenant in the ad", "invalid", 4, "ad = header || state_id", noTenant))

	// Step 5: recorded_at.
	late := baseOutcomeCraft()
	late.recordedAt = sealer.MaxUnixMilli + 1
	g.open(g.crafted("recorded after year 9999", "invalid", 5, "recorded_at is 253,402,300,800,000", late))
	last := baseOutcomeCraft()
	last.recordedAt = 1<<64 - 1
	g.open(g.crafted("recorded at 2^64 - 1", "invalid", 5, "an opener that reads recorded_at as signed sees -1", last))
}

// stateBlob returns an opening vector of a version 1 state's blob, sealed
// by sealer.Seal for tenant-a, given with its own state id.
func (g *outcomeGen) stateBlob() outcomeOpenVector {
	const name = "a version 1 state's blob"
	d, _ := sealer.DigestOf(g.req)
	g.seedRandom(name)
	state, err := sealer.Seal(g.keyRing(1, 2), "tenant-a", sealer.Claims{Principal: "alice", Request: d, OneTime: true,
		IssuedAt: time.UnixMilli(vt0), ExpiresAt: time.UnixMilli(vt0 + vTTL)}, []byte(`{"step":1}`))
	if err != nil {
		g.t.Fatal(err)
	}
	blob, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		g.t.Fatal(err)
	}
	return outcomeOpenVector{Name: name, Tenant: "tenant-a", StateID: hex.EncodeToString(blob[5:21]), Blob: hex.EncodeToString(blob),
		Want: "invalid", Step: 2, Note: "a state, decoded from base64url, is never an outcome"}
}
