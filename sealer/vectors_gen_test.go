package sealer_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// This file writes testdata/vectors.json (TestVectors): the states are
// sealed by sealer.Seal, or crafted with spec_test.go where Seal refuses to
// go, each with a nonce drawn from a random source seeded by the vector's
// name, at fixed times; the digests are mcpdigest.Request's. Every verdict is
// written here by hand and checked against the opener of spec_test.go
// before it is written.

const (
	vt0      = int64(1795953600000) // 2026-11-29T12:00:00Z
	vTTL     = int64(5 * 60 * 1000)
	vSkew    = int64(2000) // sealer.DefaultSkew
	vMaxSkew = int64(time.Duration(1<<63-1) / time.Millisecond)
)

var vectorReasons = map[string]string{
	"invalid":            "INVALID_STATE",
	"expired":            "EXPIRED",
	"principal_mismatch": "PRINCIPAL_MISMATCH",
	"request_mismatch":   "REQUEST_MISMATCH",
	"flow_expired":       "FLOW_EXPIRED",
	"flow_exhausted":     "FLOW_EXHAUSTED",
	"input_mismatch":     "INPUT_MISMATCH",
}

type vectorGen struct {
	t        *testing.T
	material map[uint32][]byte // 1 and 2 in the ring, 3 retired
	ring     map[uint32][]byte // what the opening vectors' ring holds
	seals    []sealVector
	sealed   map[string]sealVector
	opens    []openVector
	digests  []digestVector
	req      []byte // the digest of get_weather in New York
}

// newVectorGen returns a generator with the vectors' keys and request.
func newVectorGen(t *testing.T) *vectorGen {
	g := &vectorGen{t: t, material: map[uint32][]byte{}, sealed: map[string]sealVector{}}
	for v := range uint32(3) {
		g.material[v+1] = bytes.Repeat([]byte{byte(v+1) * 0x11}, keys.Size)
	}
	g.ring = map[uint32][]byte{1: g.material[1], 2: g.material[2]}
	g.req = g.digest(`{"name":"get_weather","arguments":{"location":"New York"}}`)
	return g
}

// keyRing returns a ring of the given versions of g's material, sealing
// with the last.
func (g *vectorGen) keyRing(versions ...uint32) *keys.Ring {
	var ks []keys.Key
	for _, id := range versions {
		k, err := keys.NewKey(id, g.material[id], time.Time{})
		if err != nil {
			g.t.Fatal(err)
		}
		ks = append(ks, k)
	}
	ring, err := keys.NewRing(ks, versions[len(versions)-1])
	if err != nil {
		g.t.Fatal(err)
	}
	return ring
}

func buildVectors(t *testing.T) []byte {
	g := newVectorGen(t)
	g.buildSeals()
	g.buildOpens()
	g.buildDigests()

	doc := vectorFile{
		Comment: "Test vectors of FORMAT.md, format version 1. Schema: sealer/testdata/README.md. " +
			"Written by go test ./sealer/ -run TestVectors -update; do not edit.",
		Sealing: 2,
		Seal:    g.seals,
		Open:    g.opens,
		Digests: g.digests,
	}
	doc.KeyFile.Sealing = 2
	for _, id := range []uint32{1, 2} {
		doc.Keys = append(doc.Keys, vectorKey{id, hex.EncodeToString(g.material[id])})
		doc.KeyFile.Keys = append(doc.KeyFile.Keys, struct {
			ID  uint32 `json:"id"`
			Key string `json:"key"`
		}{id, base64.StdEncoding.EncodeToString(g.material[id])})
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

func (g *vectorGen) digest(params string) []byte {
	d, err := mcpdigest.Request("tools/call", []byte(params))
	if err != nil {
		g.t.Fatal(err)
	}
	return d[:]
}

// seedRandom makes crypto/rand a stream seeded by name.
func (g *vectorGen) seedRandom(name string) {
	h := sha256.Sum256([]byte(name))
	cryptotest.SetGlobalRandom(g.t, binary.LittleEndian.Uint64(h[:]))
}

// seal seals a seal vector with sealer.Seal under the ring of the given
// versions, sealing with the last.
func (g *vectorGen) seal(name, tenant string, versions []uint32, c sealer.Claims, payload []byte) {
	ring := g.keyRing(versions...)
	g.seedRandom(name)
	state, err := sealer.Seal(ring, tenant, c, payload)
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	blob, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		g.t.Fatal(err)
	}
	keyID := binary.BigEndian.Uint32(blob[1:5])
	header, nonce := blob[:5], blob[5:29]
	var flags byte
	if c.OneTime {
		flags = 1
	}
	key := specTenantKey(g.material[keyID], keyID, tenant)
	ad := append(slices.Clone(header), tenant...)
	pt := specPlaintext(flags, uint64(c.IssuedAt.UnixMilli()), uint64(c.ExpiresAt.UnixMilli()), c.Principal, c.Request[:], payload)
	if specSeal(key, header, nonce, pt, ad) != state {
		g.t.Fatalf("%s: FORMAT.md and sealer.Seal disagree", name)
	}
	v := sealVector{
		Name: name, Tenant: tenant, KeyID: keyID, Principal: c.Principal, Request: hex.EncodeToString(c.Request[:]),
		IssuedAt: c.IssuedAt.UnixMilli(), ExpiresAt: c.ExpiresAt.UnixMilli(), OneTime: c.OneTime,
		Payload: hex.EncodeToString(payload), Nonce: hex.EncodeToString(nonce),
		HKDFInfo: hex.EncodeToString(specInfo(keyID, tenant)), TenantKey: hex.EncodeToString(key),
		Header: hex.EncodeToString(header), AD: hex.EncodeToString(ad),
		PrincipalHash: hex.EncodeToString(specPrincipalHash(c.Principal)), Plaintext: hex.EncodeToString(pt),
		ID: hex.EncodeToString(nonce[:16]), State: state,
	}
	g.seals = append(g.seals, v)
	g.sealed[name] = v
}

func (g *vectorGen) buildSeals() {
	d, _ := sealer.DigestOf(g.req)
	base := sealer.Claims{Principal: "alice", Request: d, IssuedAt: time.UnixMilli(vt0), ExpiresAt: time.UnixMilli(vt0 + vTTL)}
	with := func(f func(*sealer.Claims)) sealer.Claims {
		c := base
		f(&c)
		return c
	}
	g.seal("valid", "tenant-a", []uint32{1, 2}, base, []byte(`{"step":1}`))
	g.seal("one-time, empty payload (shortest state)", "tenant-a", []uint32{1, 2}, with(func(c *sealer.Claims) { c.OneTime = true }), nil)
	g.seal("older key version", "tenant-a", []uint32{1}, base, []byte("old"))
	g.seal("two-byte payload", "tenant-a", []uint32{1, 2}, base, []byte("ok"))
	g.seal("another tenant", "tenant-b", []uint32{1, 2}, base, []byte(`{"step":1}`))
	g.seal("implicit tenant", "default", []uint32{1, 2}, with(func(c *sealer.Claims) { c.Principal = "anonymous" }), []byte("{}"))
	g.seal("longest tenant and principal, not ASCII", strings.Repeat("ü", 127)+"t", []uint32{1, 2},
		with(func(c *sealer.Claims) { c.Principal = strings.Repeat("é", sealer.MaxPrincipal/2) }), []byte("x"))
	own := sha256.Sum256([]byte("example.com/my-binding\x00order 42"))
	g.seal("caller-supplied digest", "tenant-a", []uint32{1, 2}, with(func(c *sealer.Claims) { c.Request = own }), []byte("p"))
	g.seal("expiry at the end of year 9999", "tenant-a", []uint32{1, 2}, with(func(c *sealer.Claims) {
		c.IssuedAt, c.ExpiresAt = time.UnixMilli(sealer.MaxUnixMilli-3_600_000), time.UnixMilli(sealer.MaxUnixMilli)
	}), []byte("late"))
	g.seal("issued at the Unix epoch", "tenant-a", []uint32{1, 2}, with(func(c *sealer.Claims) {
		c.IssuedAt, c.ExpiresAt = time.UnixMilli(0), time.UnixMilli(1)
	}), []byte("early"))
	longest := make([]byte, sealer.MaxPayload)
	for i := range longest {
		longest[i] = byte(i)
	}
	g.seal("longest payload (longest state)", "tenant-a", []uint32{1, 2}, base, longest)
}

// open adds an opening vector, after checking that the opener of
// spec_test.go reaches the verdict and step written here.
func (g *vectorGen) open(v openVector) {
	v.Reason = vectorReasons[v.Want]
	verdict, step, o := specOpen(v.opening(g.t, g.ring), mistakes{})
	if verdict != v.Want || step != v.Step {
		g.t.Fatalf("open vector %q: FORMAT.md says %s at step %d, the vector %s at step %d", v.Name, verdict, step, v.Want, v.Step)
	}
	if o != nil {
		v.Opened = &openedState{KeyID: o.keyID, ID: hex.EncodeToString(o.id), IssuedAt: int64(o.iat), ExpiresAt: int64(o.exp),
			OneTime: o.flags&1 != 0, Payload: hex.EncodeToString(o.payload)}
	}
	g.opens = append(g.opens, v)
}

// from returns an opening vector of the seal vector name, as sealed: its
// tenant, principal and request, at a minute after issue, default skew.
func (g *vectorGen) from(name string) openVector {
	s, ok := g.sealed[name]
	if !ok {
		g.t.Fatalf("no seal vector %q", name)
	}
	return openVector{From: name, Tenant: s.Tenant, State: s.State, Principal: s.Principal, Request: s.Request,
		Now: min(s.IssuedAt+60_000, s.ExpiresAt), Skew: vSkew}
}

// craft describes a state sealed by hand: everything Seal checks, unchecked.
type craft struct {
	version   byte
	keyID     uint32 // in the header
	sealID    uint32 // the version whose key seals (and in the HKDF info)
	tenant    string
	adTenant  bool // the tenant is in the associated data
	adHeader  bool // the header is in the associated data
	flags     byte
	iat, exp  uint64
	principal string
	payload   []byte
	cut       int // bytes cut from the end of the plaintext
}

func (g *vectorGen) baseCraft() craft {
	return craft{version: 1, keyID: 2, sealID: 2, tenant: "tenant-a", adTenant: true, adHeader: true,
		iat: uint64(vt0), exp: uint64(vt0 + vTTL), principal: "alice", payload: []byte(`{"step":1}`)}
}

// crafted returns an opening vector of a crafted state, opened as tenant-a
// by alice for g.req a minute after vt0.
func (g *vectorGen) crafted(name string, c craft) openVector {
	g.seedRandom(name)
	nonce := make([]byte, 24)
	rand.Read(nonce)
	header := specHeader(c.version, c.keyID)
	var ad []byte
	if c.adHeader {
		ad = append(ad, header...)
	}
	if c.adTenant {
		ad = append(ad, c.tenant...)
	}
	key := specTenantKey(g.material[c.sealID], c.sealID, c.tenant)
	pt := specPlaintext(c.flags, c.iat, c.exp, c.principal, g.req, c.payload)
	pt = pt[:len(pt)-c.cut]
	return openVector{
		Name: name, Tenant: c.tenant, State: specSeal(key, header, nonce, pt, ad), Principal: "alice",
		Request: hex.EncodeToString(g.req), Now: vt0 + 60_000, Skew: vSkew,
		Crafted: &craftedBlob{KeyID: c.sealID, HKDFInfo: hex.EncodeToString(specInfo(c.sealID, c.tenant)),
			TenantKey: hex.EncodeToString(key), Header: hex.EncodeToString(header), Nonce: hex.EncodeToString(nonce),
			AD: hex.EncodeToString(ad), Plaintext: hex.EncodeToString(pt)},
	}
}

// mutateBlob decodes state, lets f change the blob, and encodes it again.
func mutateBlob(state string, f func([]byte) []byte) string {
	blob, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(f(blob))
}

// setTrailingBits sets the unused low bits of the last character of state.
func setTrailingBits(state string) string {
	unused := map[int]int{2: 4, 3: 2}[len(state)%4]
	last := strings.IndexByte(specAlphabet, state[len(state)-1])
	return state[:len(state)-1] + string(specAlphabet[last|(1<<unused-1)])
}

func (g *vectorGen) buildOpens() {
	named := func(v openVector, name string, want string, step int, note string) openVector {
		v.Name, v.Want, v.Step, v.Note = name, want, step, note
		return v
	}
	at := func(v openVector, now, skew int64) openVector {
		v.Now, v.Skew = now, skew
		return v
	}
	valid := g.from("valid")
	exp := g.sealed["valid"].ExpiresAt
	other := hex.EncodeToString(g.digest(`{"name":"get_weather","arguments":{"location":"Boston"}}`))

	// Step 10: states that open.
	for _, s := range g.seals {
		g.open(named(g.from(s.Name), "opens: "+s.Name, "ok", 10, ""))
	}
	g.open(named(at(valid, exp+vSkew, vSkew), "opens at expiry + skew", "ok", 10, "the last millisecond of the window"))
	g.open(named(at(valid, exp, 0), "opens at expiry, no skew", "ok", 10, ""))
	g.open(named(at(valid, exp, -60_000), "opens at expiry, negative skew", "ok", 10, "a negative skew counts as zero"))
	g.open(named(at(valid, vt0-3_600_000, vSkew), "opens before issue", "ok", 10, "issued_at is not compared with now"))
	late := g.from("expiry at the end of year 9999")
	g.open(named(at(late, sealer.MaxUnixMilli+vMaxSkew, vMaxSkew), "opens at the end of the largest skew", "ok", 10,
		"skew is the largest Go time.Duration in ms; expires_at + skew must not overflow"))

	// Step 1: length.
	shortest := g.sealed["one-time, empty payload (shortest state)"].State
	longest := g.sealed["longest payload (longest state)"].State
	g.open(g.rename(valid, "empty", "invalid", 1, "", ""))
	g.open(g.rename(g.from("one-time, empty payload (shortest state)"), "146 characters", "invalid", 1, "the shortest state without its last character", shortest[:146]))
	g.open(g.rename(g.from("longest payload (longest state)"), "87,529 characters", "invalid", 1, "the longest state and one more character", longest+"A"))
	over := g.baseCraft()
	over.payload = make([]byte, sealer.MaxPayload+1)
	g.open(named(g.crafted("authentic, payload of 65,537 bytes", over), "authentic, payload of 65,537 bytes", "invalid", 1, "87,530 characters; authentic, and yet too long"))
	short := g.baseCraft()
	short.payload, short.cut = nil, 1
	g.open(named(g.crafted("authentic, blob of 109 bytes", short), "authentic, blob of 109 bytes", "invalid", 1, "146 characters; the plaintext lacks the last byte of the claims"))
	g.open(g.rename(g.from("one-time, empty payload (shortest state)"), "146 characters, one not ASCII", "invalid", 2,
		"147 bytes: step 1 counts bytes, so it passes and decoding fails; a count of characters stops at step 1", shortest[:145]+"é"))
	g.open(g.rename(g.from("longest payload (longest state)"), "87,528 characters, one not ASCII", "invalid", 1,
		"87,529 bytes: step 1 counts bytes; a count of characters passes it and stops at step 2", longest[:87_527]+"é"))

	// Step 2: strict base64url.
	twoByte := g.sealed["two-byte payload"].State
	plusSlash := strings.NewReplacer("-", "+", "_", "/").Replace(valid.State)
	if plusSlash == valid.State {
		g.t.Fatal("the valid state has neither - nor _")
	}
	for _, c := range []struct {
		name, from, state, note string
	}{
		{"4n+1 characters", "valid", valid.State + "A", "no blob has this length"},
		{"padding =", "one-time, empty payload (shortest state)", shortest + "=", ""},
		{"padding ==", "two-byte payload", twoByte + "==", ""},
		{"LF inside", "valid", valid.State[:40] + "\n" + valid.State[40:], "Go's and many decoders skip it"},
		{"CR LF at the end", "valid", valid.State + "\r\n", ""},
		{"CR inside", "valid", valid.State[:40] + "\r" + valid.State[40:], ""},
		{"space inside", "valid", valid.State[:40] + " " + valid.State[40:], ""},
		{"+ and / for - and _", "valid", plusSlash, "the standard alphabet"},
		{"trailing bits, 2 unused", "one-time, empty payload (shortest state)", setTrailingBits(shortest), "decodes to the same blob in a lax decoder"},
		{"trailing bits, 4 unused", "two-byte payload", setTrailingBits(twoByte), "decodes to the same blob in a lax decoder"},
		{"character outside the alphabet", "valid", valid.State[:40] + "!" + valid.State[41:], ""},
		{"NUL inside", "valid", valid.State[:40] + "\x00" + valid.State[41:], ""},
		{"character not ASCII", "valid", valid.State[:40] + "é" + valid.State[41:], "length counts bytes"},
	} {
		g.open(g.rename(g.from(c.from), c.name, "invalid", 2, c.note, c.state))
	}

	// Step 3: version.
	v2 := g.baseCraft()
	v2.version = 2
	g.open(named(g.crafted("authentic, version 2", v2), "authentic, version 2", "invalid", 3, "sealed and authentic under the header 02..."))
	v0 := g.baseCraft()
	v0.version = 0
	g.open(named(g.crafted("authentic, version 0", v0), "authentic, version 0", "invalid", 3, ""))
	g.open(g.rename(valid, "version byte changed", "invalid", 3, "not sealed again", mutateBlob(valid.State, func(b []byte) []byte { b[0] = 2; return b })))

	// Step 4: key version and tenant.
	retired := g.baseCraft()
	retired.keyID, retired.sealID = 3, 3
	g.open(named(g.crafted("key version 3", retired), "key version 3, not in the ring", "invalid", 4, "sealed by version 3, retired: the ring holds 1 and 2"))
	k0 := g.baseCraft()
	k0.keyID, k0.sealID = 0, 1
	g.open(named(g.crafted("key version 0", k0), "key version 0", "invalid", 4, "sealed with version 1's tenant key"))
	k9 := g.baseCraft()
	k9.keyID, k9.sealID = 9, 1
	g.open(named(g.crafted("key version 9", k9), "key version 9", "invalid", 4, "sealed with version 1's tenant key"))
	long := g.baseCraft()
	long.tenant = strings.Repeat("t", 256)
	g.open(named(g.crafted("tenant of 256 bytes", long), "authentic for a tenant of 256 bytes", "invalid", 4, "tenants are 1 to 255 bytes"))
	none := g.baseCraft()
	none.tenant = ""
	g.open(named(g.crafted("empty tenant", none), "authentic for the empty tenant", "invalid", 4, "tenants are 1 to 255 bytes"))
	g.open(g.rename(valid, "key version bit flipped", "invalid", 4, "key_id 3", mutateBlob(valid.State, func(b []byte) []byte { b[4] ^= 1; return b })))

	// Step 5: authentication.
	lie := g.baseCraft()
	lie.keyID, lie.sealID = 2, 1
	g.open(named(g.crafted("header names version 2, version 1 sealed", lie), "header names version 2, version 1 sealed", "invalid", 5, ""))
	other1 := g.from("another tenant")
	other1.Tenant = "tenant-a"
	g.open(named(other1, "another tenant", "invalid", 5, "sealed for tenant-b"))
	noTenant := g.baseCraft()
	noTenant.adTenant = false
	g.open(named(g.crafted("associated data without the tenant", noTenant), "associated data without the tenant", "invalid", 5, ""))
	noHeader := g.baseCraft()
	noHeader.adHeader = false
	g.open(named(g.crafted("associated data without the header", noHeader), "associated data without the header", "invalid", 5, ""))
	for _, c := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"nonce bit flipped", func(b []byte) []byte { b[5] ^= 1; return b }},
		{"ciphertext bit flipped", func(b []byte) []byte { b[40] ^= 1; return b }},
		{"tag bit flipped", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }},
		{"last 3 bytes cut", func(b []byte) []byte { return b[:len(b)-3] }},
		{"3 bytes added", func(b []byte) []byte { return append(b, 0, 0, 0) }},
	} {
		g.open(g.rename(valid, c.name, "invalid", 5, "", mutateBlob(valid.State, c.f)))
	}

	// Step 6: claims that Seal never writes.
	for _, c := range []struct {
		name     string
		flags    byte
		iat, exp uint64
	}{
		{"flags 0x02", 2, uint64(vt0), uint64(vt0 + vTTL)},
		{"flags 0x80", 0x80, uint64(vt0), uint64(vt0 + vTTL)},
		{"flags 0x03", 3, uint64(vt0), uint64(vt0 + vTTL)},
		{"expires_at equal to issued_at", 0, uint64(vt0 + 60_000), uint64(vt0 + 60_000)},
		{"expires_at before issued_at", 0, uint64(vt0 + vTTL), uint64(vt0)},
		{"expires_at past year 9999", 0, uint64(vt0), sealer.MaxUnixMilli + 1},
		{"issued_at past year 9999", 0, sealer.MaxUnixMilli + 1, sealer.MaxUnixMilli + 2},
		{"expires_at 2^64-1", 0, uint64(vt0), 1<<64 - 1},
		{"issued_at 2^63", 0, 1 << 63, 1<<63 + uint64(vTTL)},
	} {
		cr := g.baseCraft()
		cr.flags, cr.iat, cr.exp = c.flags, c.iat, c.exp
		g.open(named(g.crafted(c.name, cr), "authentic, "+c.name, "invalid", 6, ""))
	}

	// Step 7: expiry.
	g.open(named(at(valid, exp+vSkew+1, vSkew), "expired, 1 ms past expiry + skew", "expired", 7, ""))
	g.open(named(at(valid, exp+1, 0), "expired, 1 ms past expiry, no skew", "expired", 7, ""))
	g.open(named(at(valid, exp+1, -60_000), "expired, 1 ms past expiry, negative skew", "expired", 7, "a negative skew counts as zero"))
	g.open(named(at(valid, exp+365*86_400_000, vSkew), "expired a year ago", "expired", 7, ""))
	g.open(named(at(late, sealer.MaxUnixMilli+vMaxSkew+1, vMaxSkew), "expired past the largest skew", "expired", 7, ""))

	// Steps 8 and 9: principal and request.
	for _, p := range []struct{ name, principal string }{
		{"another principal", "mallory"},
		{"principal in another case", "Alice"},
		{"principal with a trailing NUL", "alice\x00"},
		{"principal prefix", "alic"},
		{"empty principal", ""},
		{"principal of 1,025 bytes", strings.Repeat("a", sealer.MaxPrincipal+1)},
	} {
		v := named(valid, p.name, "principal_mismatch", 8, "")
		v.Principal = p.principal
		g.open(v)
	}
	for _, r := range []struct{ name, request string }{
		{"another request", other},
		{"all-zero request", strings.Repeat("00", 32)},
		{"same params, another method", func() string {
			d, _ := mcpdigest.Request("prompts/get", []byte(`{"name":"get_weather","arguments":{"location":"New York"}}`))
			return d.String()
		}()},
	} {
		v := named(valid, r.name, "request_mismatch", 9, "")
		v.Request = r.request
		g.open(v)
	}

	// Two failures: the first step's verdict.
	tagExpired := g.rename(valid, "tag failure and expired", "invalid", 5, "", mutateBlob(valid.State, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }))
	g.open(at(tagExpired, exp+vSkew+1, vSkew))
	flagsExpired := g.baseCraft()
	flagsExpired.flags = 2
	fe := named(g.crafted("unknown flags and expired", flagsExpired), "unknown flags and expired", "invalid", 6, "")
	g.open(at(fe, exp+vSkew+1, vSkew))
	rangePrincipal := g.baseCraft()
	rangePrincipal.exp = sealer.MaxUnixMilli + 1
	rp := named(g.crafted("expiry past year 9999 and another principal", rangePrincipal), "expiry past year 9999 and another principal", "invalid", 6, "")
	rp.Principal = "mallory"
	g.open(rp)
	ep := named(at(valid, exp+vSkew+1, vSkew), "expired and another principal", "expired", 7, "")
	ep.Principal = "mallory"
	g.open(ep)
	epr := ep
	epr.Name, epr.Request = "expired, another principal and another request", other
	g.open(epr)
	pr := named(valid, "another principal and another request", "principal_mismatch", 8, "")
	pr.Principal, pr.Request = "mallory", other
	g.open(pr)
	badExpired := g.rename(valid, "+ and / in an expired state", "invalid", 2, "", plusSlash)
	g.open(at(badExpired, exp+vSkew+1, vSkew))
}

// rename returns v with another name, verdict and state.
func (g *vectorGen) rename(v openVector, name, want string, step int, note, state string) openVector {
	v.Name, v.Want, v.Step, v.Note, v.State = name, want, step, note, state
	return v
}

// digestCase is a digest vector as written here.
type digestCase struct {
	name, method, params string
	ok, textOnly         bool
	note                 string
}

func (g *vectorGen) buildDigests() {
	const weather = `{"name":"get_weather","arguments":{"location":"New York"}}`
	arg := func(args string) string { return `{"name":"x","arguments":` + args + `}` }
	mib := `{"name":"x","arguments":{"a":1},"_meta":"`
	pad := func(n int) string { return mib + strings.Repeat("a", n-len(mib)-2) + `"}` }
	cases := []digestCase{
		// Kept from the first vectors.
		{"get_weather", "tools/call", weather, true, false, ""},
		{"retry of get_weather", "tools/call", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"location":"New York"},"name":"get_weather","inputResponses":{"u":{"action":"accept"}},"requestState":"x"}`, true, false, "same digest as get_weather"},
		{"key order, number spellings, escapes", "tools/call", `{"name":"get_weather","arguments":{"b":[1.0,2e0,"\u00e9"],"a":{"y":null,"x":true}}}`, true, false, ""},
		{"absent arguments", "tools/call", `{"name":"get_weather"}`, true, false, "args is null"},
		{"empty arguments", "tools/call", `{"name":"get_weather","arguments":{}}`, true, false, ""},
		{"prompts/get", "prompts/get", `{"name":"greeting","arguments":{"who":"world"}}`, true, false, ""},
		{"resources/read", "resources/read", `{"uri":"file:///etc/motd","_meta":{}}`, true, false, "args is empty"},
		{"method tools/list", "tools/list", `{}`, false, false, ""},
		{"duplicate name", "tools/call", `{"name":"x","name":"y"}`, false, true, ""},
		{"integer 2^53+1", "tools/call", `{"name":"x","arguments":{"id":9007199254740993}}`, false, false, ""},
		{"arguments array", "tools/call", `{"name":"x","arguments":[]}`, false, false, ""},
		{"NAME", "tools/call", `{"name":"transfer","arguments":{"amount":1},"NAME":"transfer"}`, false, false, ""},
		{"Arguments", "tools/call", `{"name":"transfer","arguments":{"amount":1},"Arguments":{"amount":100000}}`, false, false, ""},
		{"argumentſ", "tools/call", `{"name":"transfer","arguments":{"amount":1},"argumentſ":{"amount":100000}}`, false, false, "U+017F folds to s"},
		{"prompts/get Name", "prompts/get", `{"name":"greeting","Name":"admin"}`, false, false, ""},
		{"URI", "resources/read", `{"uri":"file:///etc/motd","URI":"file:///etc/shadow"}`, false, false, ""},
		{"urı", "resources/read", `{"uri":"file:///etc/motd","ur\u0131":"file:///etc/shadow"}`, false, false, "U+0131 upper-cases to I"},
		{"fullwidth arguments", "tools/call", `{"name":"transfer","arguments":{"amount":1},"ａｒｇｕｍｅｎｔｓ":{"amount":100000}}`, false, false, "NFKC takes fullwidth letters to ASCII"},
		{"double-struck Name", "tools/call", `{"name":"transfer","arguments":{"amount":1},"\u2115ame":"admin"}`, false, false, "U+2115: NFKC to N"},
		{"modifier u, uri", "resources/read", `{"uri":"file:///etc/motd","\u1d58ri":"file:///etc/shadow"}`, false, false, "U+1D58: NFKC to u"},
		{"fullwidth ur, then ı", "resources/read", `{"uri":"file:///etc/motd","ｕｒ\u0131":"file:///etc/shadow"}`, false, false, "step 1 and NFKC together"},
		{"uri with a combining dot", "resources/read", `{"uri":"file:///etc/motd","uri\u0307":"x"}`, true, false, "i U+0307 is another name: no folding takes it to uri"},
		{"Cyrillic a in name", "tools/call", `{"name":"transfer","arguments":{"amount":1},"n\u0430me":"admin"}`, true, false, "a homoglyph no folding takes to a"},
		{"resources/read with Arguments and NAME", "resources/read", `{"uri":"file:///etc/motd","Arguments":{},"NAME":"x"}`, true, false, "not salient for resources/read"},
		{"64 levels", "tools/call", arg(nested(mcpdigest.MaxDepth)), true, false, ""},
		{"65 levels", "tools/call", arg(nested(mcpdigest.MaxDepth + 1)), false, false, ""},

		// Arguments, target, params and method.
		{"null arguments", "tools/call", `{"name":"get_weather","arguments":null}`, true, false, "same digest as absent arguments"},
		{"arguments string", "prompts/get", `{"name":"x","arguments":"a=b"}`, false, false, ""},
		{"arguments number", "tools/call", `{"name":"x","arguments":1}`, false, false, ""},
		{"arguments true", "tools/call", `{"name":"x","arguments":true}`, false, false, ""},
		{"resources/read ignores arguments", "resources/read", `{"uri":"file:///etc/motd","arguments":{"a":[1,2]}}`, true, false, "same digest as resources/read"},
		{"escaped member names", "tools/call", `{"n\u0061me":"get_weather","\u0061rguments":{"location":"New York"}}`, true, false, "same digest as get_weather"},
		{"escaped case variant", "tools/call", `{"name":"x","arguments":{},"Argument\u0073":{}}`, false, false, ""},
		{"whitespace", "tools/call", " {\n\t\"name\" : \"get_weather\" ,\r\n \"arguments\" : { \"location\" : \"New York\" } } \n", true, false, "same digest as get_weather"},
		{"missing name", "tools/call", `{"arguments":{}}`, false, false, ""},
		{"empty name", "tools/call", `{"name":""}`, false, false, ""},
		{"name not a string", "tools/call", `{"name":7}`, false, false, ""},
		{"name null", "tools/call", `{"name":null}`, false, false, ""},
		{"missing uri", "resources/read", `{"name":"x"}`, false, false, ""},
		{"empty uri", "resources/read", `{"uri":""}`, false, false, ""},
		{"name not ASCII", "prompts/get", `{"name":"grüße 🙂","arguments":{"wer":"Welt"}}`, true, false, ""},
		{"params array", "tools/call", `[{"name":"x"}]`, false, false, ""},
		{"params null", "tools/call", `null`, false, false, ""},
		{"params string", "tools/call", `"x"`, false, false, ""},
		{"params empty", "tools/call", ``, false, false, ""},
		{"params not JSON", "tools/call", `{"name":`, false, false, ""},
		{"trailing data", "tools/call", `{"name":"x"} {}`, false, false, ""},
		{"method initialize", "initialize", `{"name":"x"}`, false, false, ""},
		{"method Tools/Call", "Tools/Call", `{"name":"x"}`, false, false, "methods are case-sensitive"},
		{"method empty", "", `{"name":"x"}`, false, false, ""},

		// Numbers: the rule is on the double.
		{"-0", "tools/call", arg(`{"a":-0}`), true, false, "canonical 0"},
		{"-0.0e0", "tools/call", arg(`{"a":-0.0e0}`), true, false, "canonical 0"},
		{"0", "tools/call", arg(`{"a":0}`), true, false, "same digest as -0"},
		{"1e-400", "tools/call", arg(`{"a":1e-400}`), true, false, "rounds to 0"},
		{"1e400", "tools/call", arg(`{"a":1e400}`), false, false, "no double"},
		{"-1e400", "tools/call", arg(`{"a":-1e400}`), false, false, "no double"},
		{"2^53-1", "tools/call", arg(`{"a":9007199254740991}`), true, false, ""},
		{"-(2^53-1)", "tools/call", arg(`{"a":-9007199254740991}`), true, false, ""},
		{"2^53", "tools/call", arg(`{"a":9007199254740992}`), false, false, ""},
		{"-2^53", "tools/call", arg(`{"a":-9007199254740992}`), false, false, ""},
		{"2^53-1 + 0.4", "tools/call", arg(`{"a":9007199254740991.4}`), true, false, "the double is 2^53-1: accepted, canonical 9007199254740991"},
		{"2^53-1 + 0.5", "tools/call", arg(`{"a":9007199254740991.5}`), false, false, "the double is 2^53 (ties to even)"},
		{"2^53-1 in exponent form", "tools/call", arg(`{"a":9.007199254740991e15}`), true, false, "canonical 9007199254740991"},
		{"1e16", "tools/call", arg(`{"a":1e16}`), false, false, ""},
		{"1e21", "tools/call", arg(`{"a":1E+21}`), false, false, ""},
		{"1e400 in _meta", "tools/call", `{"name":"x","_meta":{"a":1e400}}`, false, true, "JCS has no form for it"},
		{"number beyond 2^53 in _meta", "tools/call", `{"name":"x","_meta":{"big":9007199254740993}}`, true, false, "the rule binds the arguments only"},
		{"exponent forms of 1", "tools/call", arg(`{"a":[1,1.0,1e0,1E+0,10e-1,0.1e1]}`), true, false, "each canonical 1"},
		{"fractions and small exponents", "tools/call", arg(`{"a":[0.1,1.5e3,0.0000001,1e-7,-2.5E-3,123456789.125]}`), true, false, ""},

		// Strings and member order.
		{"UTF-16 member order", "tools/call", arg(`{"｡":1,"😀":2,"é":3,"e":4,"\u0000":5}`), true, false, "U+1F600 is D83D DE00 in UTF-16, before U+FF61"},
		{"escapes", "tools/call", arg(`{"a":"\u0041\/\b\f\n\r\t\u001f\u007f\"\\","b":"\u00e9","c":"é"}`), true, false, ""},
		{"surrogate pair", "tools/call", arg(`{"a":"\ud83d\ude00"}`), true, false, ""},
		{"lone high surrogate in arguments", "tools/call", arg(`{"a":"\ud800"}`), false, false, ""},
		{"lone low surrogate in a member name", "tools/call", arg(`{"\udc00":1}`), false, false, ""},
		{"lone surrogate in name", "tools/call", `{"name":"x\ud800"}`, false, false, ""},
		{"lone surrogate in _meta", "tools/call", `{"name":"x","_meta":{"a":"\ud800"}}`, false, true, ""},
		{"invalid UTF-8 in arguments", "tools/call", arg("{\"a\":\"\xff\"}"), false, false, ""},
		{"invalid UTF-8 in _meta", "tools/call", "{\"name\":\"x\",\"_meta\":\"\xc0\xaf\"}", false, true, "an overlong /"},

		// Duplicates.
		{"duplicate in arguments", "tools/call", arg(`{"a":1,"a":1}`), false, true, ""},
		{"duplicate deep in arguments", "tools/call", arg(`{"a":[{"b":1,"b":2}]}`), false, true, ""},
		{"duplicate in _meta", "tools/call", `{"name":"x","_meta":{"a":1,"a":2}}`, false, true, ""},
		{"duplicate arguments", "tools/call", `{"name":"x","arguments":{"a":1},"arguments":{"a":2}}`, false, true, ""},

		// Size and limits.
		{"params of 1 MiB", "tools/call", pad(mcpdigest.MaxParams), true, false, "1,048,576 bytes"},
		{"params of 1 MiB + 1", "tools/call", pad(mcpdigest.MaxParams + 1), false, true, "1,048,577 bytes"},
		{"64 levels of objects", "tools/call", arg(strings.Repeat(`{"a":`, mcpdigest.MaxDepth-1) + `{}` + strings.Repeat(`}`, mcpdigest.MaxDepth-1)), true, false, ""},
		{"65 levels of objects", "tools/call", arg(strings.Repeat(`{"a":`, mcpdigest.MaxDepth) + `{}` + strings.Repeat(`}`, mcpdigest.MaxDepth)), false, false, ""},
		{"1,000 levels in _meta", "tools/call", `{"name":"x","_meta":` + nested(1000) + `}`, true, false, "the limits bind the arguments only"},
		{"100,000 values", "tools/call", arg(wide(mcpdigest.MaxValues)), true, false, "and one member name, which is not a value"},
		{"100,001 values", "tools/call", arg(wide(mcpdigest.MaxValues + 1)), false, false, ""},

		// Case variants by each mapping, only at the top level; the byte
		// order mark.
		{"urİ", "resources/read", `{"uri":"file:///etc/motd","ur\u0130":"file:///etc/shadow"}`, false, false,
			"U+0130 lower-cases to i (simple mapping); its full lower case, i U+0307, does not match"},
		{"NAME and Arguments inside arguments", "tools/call", `{"name":"transfer","arguments":{"amount":1,"NAME":"x","Arguments":{}}}`, true, false,
			"only the members of params are checked: these are arguments"},
		{"NAME and Arguments inside _meta", "tools/call", `{"name":"transfer","arguments":{"amount":1},"_meta":{"NAME":"x","Arguments":{}}}`, true, false,
			"only the members of params are checked: same digest as without _meta"},
		{"byte order mark before params", "tools/call", "\ufeff" + weather, false, true, "U+FEFF (EF BB BF) is not whitespace; RFC 8259 lets a parser ignore it, FORMAT.md refuses it"},
		{"byte order mark in the name", "tools/call", `{"name":"\ufeffget_weather","arguments":{"location":"New York"}}`, true, false,
			"U+FEFF inside a string is a character: another target than get_weather"},
	}
	for _, c := range cases {
		v := digestVector{Name: c.name, Method: c.method, Want: "refused", TextOnly: c.textOnly, Note: c.note}
		if utf8.ValidString(c.params) {
			v.Params = &c.params
		} else {
			v.ParamsHex = hex.EncodeToString([]byte(c.params))
		}
		d, err := mcpdigest.Request(c.method, []byte(c.params))
		if (err == nil) != c.ok {
			g.t.Fatalf("digest vector %q: mcpdigest.Request says %v, the vector ok %v", c.name, err, c.ok)
		}
		if c.ok {
			v.Want, v.Digest = "ok", d.String()
			v.Target, v.Args = canonicalParts(g.t, c.method, c.params)
		}
		g.digests = append(g.digests, v)
	}
}

// canonicalParts returns the target and the canonical arguments of params,
// as FORMAT.md puts them in the digest.
func canonicalParts(t *testing.T, method, params string) (string, *string) {
	canon, err := jcs.Transform([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(canon, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := mcpdigest.Salient(method)
	var target string
	if err := json.Unmarshal(m[s.Target], &target); err != nil {
		t.Fatal(err)
	}
	args := ""
	if s.Arguments != "" {
		args = "null"
		if a, ok := m[s.Arguments]; ok {
			args = string(a)
		}
	}
	return target, &args
}

// nested returns arguments nested levels deep: an object, then arrays.
func nested(levels int) string {
	return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
}

// wide returns arguments of n values (n >= 2): an object, an array, zeros.
func wide(n int) string {
	return `{"a":[` + strings.TrimSuffix(strings.Repeat("0,", n-2), ",") + `]}`
}
