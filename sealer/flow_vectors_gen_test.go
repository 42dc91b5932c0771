package sealer_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcp-sealer/sealer/sealer"
)

// This file writes testdata/flows.json (TestFlowVectors), the vectors of
// format version 2, as vectors_gen_test.go writes vectors.json: the states
// are sealed by sealer.Seal (a continued round's flow by sealer.Continue),
// or crafted with spec_test.go where Seal refuses to go; flow ids and nonces
// come from a random source seeded by the vector's name, times are fixed.
// Every verdict is written here by hand and checked against the opener of
// both versions of spec_test.go before it is written.

const (
	vFlowLife  = int64(30 * 60 * 1000) // the flow lifetime of most vectors
	vShortLife = int64(10 * 60 * 1000) // the flow of the rounds 1 to 3, short enough to clamp round 3
)

// vCraftedFlowID is the flow id of every crafted version 2 state.
var vCraftedFlowID = mustHexString("0f1e2d3c4b5a69788796a5b4c3d2e1f0")

func mustHexString(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

type flowGen struct {
	*vectorGen
	seals  []flowSealVector
	sealed map[string]flowSealVector
	opens  []flowOpenVector
	inputs []inputsVector
	names  map[string]bool
}

func buildFlowVectors(t *testing.T) []byte {
	g := &flowGen{vectorGen: newVectorGen(t), sealed: map[string]flowSealVector{}, names: map[string]bool{}}
	g.buildFlowSeals()
	g.buildFlowOpens()
	g.buildInputs()

	doc := flowFile{
		Comment: "Test vectors of FORMAT.md, format version 2 (flows), for an opener of both versions. " +
			"Schema: sealer/testdata/README.md. Written by go test ./sealer/ -run TestFlowVectors -update; do not edit.",
		Sealing: 2,
		Seal:    g.seals,
		Open:    g.opens,
		Inputs:  g.inputs,
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

// keyList returns keys as a vector holds them: never nil, so that the empty
// set is written [] and not left out.
func keyList(keys ...string) *[]string {
	ks := append([]string{}, keys...)
	return &ks
}

// flowSeal is a flow seal vector as written here.
type flowSeal struct {
	name      string
	continues string   // the seal vector of the round before; empty: round 1
	versions  []uint32 // the ring; the last seals
	claims    sealer.Claims
	deadline  int64  // round 1: the flow deadline
	round     uint32 // round 1: another round, sealed directly
	latest    bool
	asked     *[]string // the keys the round asks; nil: not bound
	payload   []byte
	note      string
}

// sealFlow seals a flow seal vector with sealer.Seal, after sealer.NewFlow
// or sealer.Continue, and checks it against FORMAT.md (spec_test.go).
func (g *flowGen) sealFlow(s flowSeal) {
	if g.names["seal "+s.name] {
		g.t.Fatalf("two seal vectors %q", s.name)
	}
	g.names["seal "+s.name] = true
	ring := g.keyRing(s.versions...)
	tenant := "tenant-a"
	g.seedRandom(s.name)
	c := s.claims
	var f sealer.Flow
	if s.continues == "" {
		f = sealer.NewFlow(time.UnixMilli(s.deadline))
		if s.round != 0 {
			f.Round = s.round
		}
	} else {
		prev, ok := g.sealed[s.continues]
		if !ok {
			g.t.Fatalf("%s: no seal vector %q", s.name, s.continues)
		}
		var err error
		f, err = sealer.Continue(ring, prev.Tenant, prev.State, sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}, c.IssuedAt)
		if err != nil {
			g.t.Fatalf("%s: Continue: %v", s.name, err)
		}
	}
	f.LatestOnly = f.LatestOnly || s.latest
	if s.asked != nil {
		var err error
		if f.Asked, err = sealer.InputsOf(*s.asked); err != nil {
			g.t.Fatal(err)
		}
	}
	if c.ExpiresAt.After(f.Deadline) {
		c.ExpiresAt = f.Deadline // a sealer clamps the state's lifetime to the flow's
	}
	c.Flow = &f
	state, err := sealer.Seal(ring, tenant, c, s.payload)
	if err != nil {
		g.t.Fatalf("%s: %v", s.name, err)
	}

	blob, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		g.t.Fatal(err)
	}
	keyID := binary.BigEndian.Uint32(blob[1:5])
	header, nonce := blob[:5], blob[5:29]
	var flags byte
	if c.OneTime {
		flags |= 1
	}
	if f.LatestOnly {
		flags |= 2
	}
	inputs := make([]byte, 32)
	if s.asked != nil {
		flags |= 4
		inputs = f.Asked[:]
	}
	key := specTenantKey(g.material[keyID], keyID, tenant)
	ad := append(slices.Clone(header), tenant...)
	flow := specFlowFields(f.ID[:], f.Round, uint64(f.Deadline.UnixMilli()), inputs)
	pt := specPlaintext(flags, uint64(c.IssuedAt.UnixMilli()), uint64(c.ExpiresAt.UnixMilli()), c.Principal, c.Request[:], append(slices.Clone(flow), s.payload...))
	if specSeal(key, header, nonce, pt, ad) != state {
		g.t.Fatalf("%s: FORMAT.md and sealer.Seal disagree", s.name)
	}
	v := flowSealVector{
		Name: s.name, Continues: s.continues, Tenant: tenant, KeyID: keyID, Principal: c.Principal, Request: hex.EncodeToString(c.Request[:]),
		IssuedAt: c.IssuedAt.UnixMilli(), ExpiresAt: c.ExpiresAt.UnixMilli(), OneTime: c.OneTime,
		FlowID: f.ID.String(), Round: f.Round, FlowDeadline: f.Deadline.UnixMilli(), LatestOnly: f.LatestOnly, InputKeys: s.asked,
		Payload: hex.EncodeToString(s.payload), Nonce: hex.EncodeToString(nonce), Note: s.note,
		Inputs: hex.EncodeToString(inputs), Flags: flags,
		HKDFInfo: hex.EncodeToString(specInfo(keyID, tenant)), TenantKey: hex.EncodeToString(key),
		Header: hex.EncodeToString(header), AD: hex.EncodeToString(ad), PrincipalHash: hex.EncodeToString(specPrincipalHash(c.Principal)),
		FlowFields: hex.EncodeToString(flow), Plaintext: hex.EncodeToString(pt),
		ID: hex.EncodeToString(nonce[:16]), State: state,
	}
	g.seals = append(g.seals, v)
	g.sealed[s.name] = v
}

func (g *flowGen) buildFlowSeals() {
	d, _ := sealer.DigestOf(g.req)
	at := func(iat, ttl int64) sealer.Claims {
		return sealer.Claims{Principal: "alice", Request: d, IssuedAt: time.UnixMilli(iat), ExpiresAt: time.UnixMilli(iat + ttl)}
	}
	base := at(vt0, vTTL)
	oneTime := base
	oneTime.OneTime = true
	step := func(n int) []byte { return []byte(fmt.Sprintf(`{"step":%d}`, n)) }
	v12 := []uint32{1, 2}

	g.sealFlow(flowSeal{name: "round 1", versions: v12, claims: base, deadline: vt0 + vFlowLife, payload: step(1)})
	g.sealFlow(flowSeal{name: "round 1, latest round only, asks github_login", versions: v12, claims: base, deadline: vt0 + vShortLife,
		latest: true, asked: keyList("github_login"), payload: step(1)})
	g.sealFlow(flowSeal{name: "round 2, asks confirm and card", continues: "round 1, latest round only, asks github_login", versions: v12,
		claims: at(vt0+4*60_000, vTTL), asked: keyList("confirm", "card"), payload: step(2),
		note: "latest round only because round 1 was; the keys are listed as asked, not sorted"})
	g.sealFlow(flowSeal{name: "round 3, expiry clamped to the flow deadline", continues: "round 2, asks confirm and card", versions: v12,
		claims: at(vt0+8*60_000, vTTL), payload: step(3), note: "issued 2 minutes before the flow deadline: expires at it, not 5 minutes after issue"})
	g.sealFlow(flowSeal{name: "one-time, asks two keys", versions: v12, claims: oneTime, deadline: vt0 + vFlowLife,
		asked: keyList("iban", "amount"), payload: step(1)})
	g.sealFlow(flowSeal{name: "one-time, latest round only, asks a key (every flag)", versions: v12, claims: oneTime, deadline: vt0 + vFlowLife,
		latest: true, asked: keyList("approve"), payload: step(1)})
	g.sealFlow(flowSeal{name: "asks the empty set", versions: v12, claims: base, deadline: vt0 + vFlowLife, asked: keyList(), payload: step(1),
		note: "bound to a retry without inputResponses"})
	g.sealFlow(flowSeal{name: "asks keys not in ASCII", versions: v12, claims: base, deadline: vt0 + vFlowLife,
		asked: keyList("｡", "😀", "é", "e"), payload: step(1), note: "sorted by UTF-8 bytes: e, é, ｡, 😀; by UTF-16 units 😀 (D83D DE00) would come before ｡ (FF61)"})
	g.sealFlow(flowSeal{name: "asks keys that differ only in case", versions: v12, claims: base, deadline: vt0 + vFlowLife,
		asked: keyList("card", "Card"), payload: step(1), note: "two keys: compared as bytes"})
	g.sealFlow(flowSeal{name: "round 4,294,967,295", versions: v12, claims: base, deadline: vt0 + vFlowLife, round: 1<<32 - 1, payload: step(1),
		note: "the largest round, sealed directly: Seal takes any round from 1, Continue never goes past it"})
	late := sealer.Claims{Principal: "alice", Request: d, IssuedAt: time.UnixMilli(sealer.MaxUnixMilli - 3_600_000), ExpiresAt: time.UnixMilli(sealer.MaxUnixMilli)}
	g.sealFlow(flowSeal{name: "flow deadline at the end of year 9999", versions: v12, claims: late, deadline: sealer.MaxUnixMilli, payload: []byte("late")})
	g.sealFlow(flowSeal{name: "older key version", versions: []uint32{1}, claims: base, deadline: vt0 + vFlowLife, payload: []byte("old")})
	g.sealFlow(flowSeal{name: "empty payload (shortest version 2 state)", versions: v12, claims: base, deadline: vt0 + vFlowLife})
	longest := make([]byte, sealer.MaxPayload)
	for i := range longest {
		longest[i] = byte(i)
	}
	g.sealFlow(flowSeal{name: "longest payload (longest version 2 state)", versions: v12, claims: base, deadline: vt0 + vFlowLife, payload: longest})
}

// openFlow adds an open vector, after checking that the opener of both
// versions of spec_test.go reaches the verdict and step written here.
func (g *flowGen) openFlow(v flowOpenVector, name, want string, step int, note string) {
	v.Name, v.Want, v.Step, v.Note, v.Reason = name, want, step, note, vectorReasons[want]
	if g.names["open "+name] {
		g.t.Fatalf("two open vectors %q", name)
	}
	g.names["open "+name] = true
	v.Inputs = ""
	if v.InputKeys != nil {
		if d, ok := specInputs(*v.InputKeys, mistakes{}); ok {
			v.Inputs = hex.EncodeToString(d)
		}
	}
	verdict, s, o := specOpen(v.opening(g.t, g.ring), mistakes{})
	if verdict != v.Want || s != v.Step {
		g.t.Fatalf("open vector %q: FORMAT.md says %s at step %d, the vector %s at step %d", v.Name, verdict, s, v.Want, v.Step)
	}
	v.Opened = nil
	if o != nil {
		v.Opened = specFlowOpened(o)
	}
	g.opens = append(g.opens, v)
}

// from returns an open vector of the flow seal vector name, as sealed: its
// tenant, principal and request, at a minute after issue (or at expiry,
// when sooner), default skew, answering exactly the keys the round asks
// (as listed when sealed), and with the keys not given when it asks none.
func (g *flowGen) from(name string) flowOpenVector {
	s, ok := g.sealed[name]
	if !ok {
		g.t.Fatalf("no seal vector %q", name)
	}
	return flowOpenVector{From: name, Tenant: s.Tenant, State: s.State, Principal: s.Principal, Request: s.Request,
		Now: min(s.IssuedAt+60_000, s.ExpiresAt), Skew: vSkew, InputKeys: s.InputKeys}
}

// flowCraft is a version 2 state sealed by hand: the claims of craft, and
// the flow fields, unchecked.
type flowCraft struct {
	craft
	round    uint32
	deadline uint64
	inputs   []byte
}

func (g *flowGen) baseFlowCraft() flowCraft {
	c := g.baseCraft()
	c.version = 2
	return flowCraft{craft: c, round: 1, deadline: uint64(vt0 + vFlowLife), inputs: make([]byte, 32)}
}

// craftedFlow returns an open vector of a crafted version 2 state (or of a
// version 1 state with noFlow), opened as tenant-a by alice for g.req a
// minute after vt0, with the keys not given.
func (g *flowGen) craftedFlow(name string, c flowCraft, noFlow bool) flowOpenVector {
	cr := c.craft
	if !noFlow {
		cr.payload = append(specFlowFields(vCraftedFlowID, c.round, c.deadline, c.inputs), cr.payload...)
	}
	v := g.crafted(name, cr)
	return flowOpenVector{Tenant: v.Tenant, State: v.State, Principal: v.Principal, Request: v.Request, Now: v.Now, Skew: v.Skew, Crafted: v.Crafted}
}

func (g *flowGen) buildFlowOpens() {
	other := hex.EncodeToString(g.digest(`{"name":"get_weather","arguments":{"location":"Boston"}}`))
	at := func(v flowOpenVector, now, skew int64) flowOpenVector {
		v.Now, v.Skew = now, skew
		return v
	}
	withKeys := func(v flowOpenVector, keys *[]string) flowOpenVector {
		v.InputKeys = keys
		return v
	}
	withRounds := func(v flowOpenVector, n uint32) flowOpenVector {
		v.MaxRounds = n
		return v
	}
	as := func(v flowOpenVector, principal, request string) flowOpenVector {
		if principal != "" {
			v.Principal = principal
		}
		if request != "" {
			v.Request = request
		}
		return v
	}
	withState := func(v flowOpenVector, state string) flowOpenVector {
		v.State = state
		return v
	}
	round1 := g.from("round 1")
	round2 := g.from("round 2, asks confirm and card")
	round3 := g.from("round 3, expiry clamped to the flow deadline")
	deadline := g.sealed["round 3, expiry clamped to the flow deadline"].FlowDeadline
	first := g.from("round 1, latest round only, asks github_login")
	caseKeys := g.from("asks keys that differ only in case")
	empty := g.from("asks the empty set")

	// A version 1 state, sealed by today's path, opened by an opener of
	// both versions.
	d, _ := sealer.DigestOf(g.req)
	g.seedRandom("version 1 state")
	v1, err := sealer.Seal(g.keyRing(1, 2), "tenant-a", sealer.Claims{Principal: "alice", Request: d,
		IssuedAt: time.UnixMilli(vt0), ExpiresAt: time.UnixMilli(vt0 + vTTL)}, []byte(`{"step":1}`))
	if err != nil {
		g.t.Fatal(err)
	}
	version1 := flowOpenVector{Tenant: "tenant-a", State: v1, Principal: "alice", Request: hex.EncodeToString(g.req), Now: vt0 + 60_000, Skew: vSkew}

	// Step 13: states that open.
	for _, s := range g.seals {
		g.openFlow(g.from(s.Name), "opens: "+s.Name, "ok", 13, "")
	}
	g.openFlow(version1, "version 1 state", "ok", 13, "sealed without a flow, as before version 2: no flow is returned")
	g.openFlow(withRounds(withKeys(version1, keyList("card")), 1), "version 1 state, keys given and maxRounds 1", "ok", 13, "steps 10 to 12 are for version 2")
	g.openFlow(at(round3, deadline, vSkew), "opens at the flow deadline", "ok", 13, "the last millisecond of the flow")
	g.openFlow(withRounds(round2, 2), "opens at maxRounds", "ok", 13, "round 2, maxRounds 2")
	g.openFlow(withKeys(round2, keyList("card", "confirm")), "keys in another order", "ok", 13, "a set: the order is not bound")
	g.openFlow(withKeys(round1, keyList("github_login")), "asks no keys, keys given", "ok", 13, "a state without bit 2 ignores the retry's keys")
	g.openFlow(withKeys(round1, keyList()), "asks no keys, no inputResponses", "ok", 13, "")
	g.openFlow(withKeys(g.from("asks keys not in ASCII"), keyList("e", "é", "😀", "｡")), "keys not in ASCII, in UTF-16 order", "ok", 13, "")
	g.openFlow(withKeys(caseKeys, keyList("Card", "card")), "keys that differ only in case, in another order", "ok", 13, "")

	// Step 1: length.
	over := g.baseFlowCraft()
	over.payload = make([]byte, sealer.MaxPayload+1)
	overState := g.craftedFlow("version 2, payload of 65,537 bytes", over, false)
	g.openFlow(overState, "authentic version 2, payload of 65,537 bytes", "invalid", 1, "87,610 characters")
	notASCII := withState(overState, overState.State[:87_607]+"é")
	notASCII.Crafted = nil // not the crafted blob's encoding any more
	g.openFlow(notASCII, "87,608 characters, one not ASCII", "invalid", 1,
		"87,609 bytes: step 1 counts bytes; a count of characters passes it and stops at step 2")

	// Step 3: version and length.
	short := g.baseFlowCraft()
	short.payload, short.cut = nil, 1
	g.openFlow(g.craftedFlow("version 2 blob of 169 bytes", short, false), "authentic version 2 blob of 169 bytes", "invalid", 3,
		"226 characters, a length of version 1 states; the plaintext lacks the last byte of inputs")
	overV1 := g.baseCraft()
	overV1.payload = make([]byte, sealer.MaxPayload+1)
	g.openFlow(g.craftedFlow("version 1 blob of 65,647 bytes", flowCraft{craft: overV1}, true), "authentic version 1 blob of 65,647 bytes", "invalid", 3,
		"87,530 characters: within step 1 for an opener of both versions, too long for version 1 (in vectors.json, step 1 of an opener of version 1 alone)")
	v1pt := g.baseCraft()
	v1pt.version = 2
	g.openFlow(g.craftedFlow("version 2 header, version 1 plaintext", flowCraft{craft: v1pt}, true), "authentic version 2 header on a version 1 plaintext", "invalid", 3,
		"a blob of 120 bytes")
	v3 := g.baseFlowCraft()
	v3.version = 3
	g.openFlow(g.craftedFlow("version 3", v3, false), "authentic version 3", "invalid", 3, "a version 2 plaintext under the header 03...")

	// Step 5: authentication.
	g.openFlow(withState(round1, mutateBlob(round1.State, func(b []byte) []byte { b[0] = 1; return b })), "version byte changed from 2 to 1", "invalid", 5,
		"a blob of 180 bytes, a length of version 1 states; the header is in the associated data")
	tenantB := round1
	tenantB.Tenant = "tenant-b"
	g.openFlow(tenantB, "another tenant", "invalid", 5, "sealed for tenant-a")
	g.openFlow(withState(round2, mutateBlob(round2.State, func(b []byte) []byte { b[5+24+specClaimsLen+16+3] ^= 1; return b })), "flow fields bit flipped", "invalid", 5,
		"the low bit of round, in the ciphertext")

	// Step 6: claims and flows that Seal never writes.
	asked, _ := specInputs([]string{"x"}, mistakes{})
	for _, c := range []struct {
		name string
		f    func(*flowCraft)
		keys *[]string
	}{
		{"flags 0x08", func(c *flowCraft) { c.flags = 8 }, nil},
		{"flags 0x80", func(c *flowCraft) { c.flags = 0x80 }, nil},
		{"flags 0x0f", func(c *flowCraft) { c.flags, c.inputs = 0x0f, asked }, keyList("x")},
		{"round 0", func(c *flowCraft) { c.round = 0 }, nil},
		{"expires_at after flow_deadline", func(c *flowCraft) { c.deadline = c.exp - 1 }, nil},
		{"flow_deadline past year 9999", func(c *flowCraft) { c.deadline = sealer.MaxUnixMilli + 1 }, nil},
		{"flow_deadline 2^64-1", func(c *flowCraft) { c.deadline = 1<<64 - 1 }, nil},
		{"bit 2 set, inputs 32 zero bytes", func(c *flowCraft) { c.flags = 4 }, keyList()},
		{"bit 2 clear, inputs not zero", func(c *flowCraft) { c.inputs = asked }, keyList("x")},
		{"expires_at equal to issued_at", func(c *flowCraft) { c.exp = c.iat }, nil},
	} {
		cr := g.baseFlowCraft()
		c.f(&cr)
		g.openFlow(withKeys(g.craftedFlow(c.name, cr, false), c.keys), "authentic version 2, "+c.name, "invalid", 6, "")
	}
	for _, flags := range []byte{2, 4, 6} {
		cr := g.baseCraft()
		cr.flags = flags
		name := fmt.Sprintf("version 1, flags 0x%02x", flags)
		g.openFlow(g.craftedFlow(name, flowCraft{craft: cr}, true), "authentic "+name, "invalid", 6, "bits 1 and 2 are defined in version 2 only")
	}

	// Step 7: the state's own expiry comes first.
	exp1 := g.sealed["round 1"].ExpiresAt
	g.openFlow(at(round1, exp1+vSkew+1, vSkew), "expired, 1 ms past expiry + skew, the flow still running", "expired", 7, "")
	g.openFlow(at(round3, deadline+vSkew+1, vSkew), "expired and flow expired", "expired", 7, "")

	// Steps 8 and 9.
	g.openFlow(as(round2, "mallory", ""), "another principal", "principal_mismatch", 8, "")
	g.openFlow(as(round2, "", other), "another request", "request_mismatch", 9, "")

	// Step 10: the flow deadline, without skew.
	g.openFlow(at(round3, deadline+1, vSkew), "flow expired, 1 ms past the deadline, within expiry + skew", "flow_expired", 10,
		"the state expires at the flow deadline and opens until 2 s after it, but the flow does not: no skew applies to flow_deadline")
	g.openFlow(at(round3, deadline+1, vMaxSkew), "flow expired, 1 ms past the deadline, largest skew", "flow_expired", 10, "")
	g.openFlow(at(first, vt0+vShortLife+1, 3_600_000), "flow expired, round 1, skew of an hour", "flow_expired", 10,
		"round 1 expires 5 minutes before its flow; with an hour of skew, only the flow deadline stops it")

	// Step 11: rounds.
	g.openFlow(withRounds(round3, 2), "flow exhausted, round 3, maxRounds 2", "flow_exhausted", 11, "")
	g.openFlow(withRounds(round2, 1), "flow exhausted, round 2, maxRounds 1", "flow_exhausted", 11, "")
	g.openFlow(withRounds(g.from("round 4,294,967,295"), 1<<32-2), "flow exhausted, round 4,294,967,295, maxRounds 4,294,967,294", "flow_exhausted", 11, "")

	// Step 12: input keys.
	for _, c := range []struct {
		name string
		v    flowOpenVector
		keys *[]string
		note string
	}{
		{"an extra key", round2, keyList("card", "confirm", "note"), ""},
		{"a missing key", round2, keyList("card"), ""},
		{"a key in another case", round2, keyList("Card", "confirm"), "keys are compared as bytes"},
		{"a key in another case, round 1", first, keyList("GitHub_Login"), "keys are compared as bytes"},
		{"keys not given", round2, nil, "an opener not given the retry's keys finds every state with bit 2 an input mismatch"},
		{"no inputResponses", round2, keyList(), "the empty set"},
		{"a key given twice", round2, keyList("card", "confirm", "card"), "a list that repeats a key has no digest"},
		{"one of two keys that differ only in case", caseKeys, keyList("card"), ""},
		{"keys that differ only in case, one in another case", caseKeys, keyList("card", "CARD"), ""},
		{"the empty set asked, keys not given", empty, nil, "not given is not the empty set"},
		{"the empty set asked, a key given", empty, keyList("card"), ""},
		{"keys not in ASCII, one in another normalization", g.from("asks keys not in ASCII"), keyList("｡", "😀", "e\u0301", "e"), "é as e and U+0301: no Unicode normalization"},
	} {
		g.openFlow(withKeys(c.v, c.keys), "input mismatch: "+c.name, "input_mismatch", 12, c.note)
	}

	// Several failures: the first step's verdict.
	g.openFlow(as(at(round3, deadline+1, vSkew), "mallory", ""), "flow expired and another principal", "principal_mismatch", 8, "")
	g.openFlow(as(at(round3, deadline+1, vSkew), "", other), "flow expired and another request", "request_mismatch", 9, "")
	g.openFlow(as(withKeys(round2, nil), "mallory", ""), "input mismatch and another principal", "principal_mismatch", 8, "")
	g.openFlow(as(withKeys(round2, nil), "", other), "input mismatch and another request", "request_mismatch", 9, "")
	g.openFlow(as(withRounds(round3, 2), "", other), "flow exhausted and another request", "request_mismatch", 9, "")
	g.openFlow(withRounds(at(round3, deadline+1, vSkew), 2), "flow expired and flow exhausted", "flow_expired", 10, "")
	g.openFlow(withKeys(withRounds(round2, 1), keyList("card")), "flow exhausted and input mismatch", "flow_exhausted", 11, "")
	zero := g.baseFlowCraft()
	zero.round = 0
	g.openFlow(at(g.craftedFlow("round 0 and expired", zero, false), int64(zero.exp)+vSkew+1, vSkew), "authentic version 2, round 0 and expired", "invalid", 6, "")
	bad := g.baseFlowCraft()
	bad.flags = 8
	g.openFlow(at(g.craftedFlow("flags 0x08 and flow expired", bad, false), int64(bad.deadline)+1, 3_600_000), "authentic version 2, flags 0x08 and flow expired", "invalid", 6, "")
}

// inputsCase is an input keys digest vector as written here.
type inputsCase struct {
	name string
	keys []string
	ok   bool
	note string
}

func (g *flowGen) buildInputs() {
	many := func(n int) []string {
		var ks []string
		for i := n - 1; i >= 0; i-- {
			ks = append(ks, fmt.Sprintf("k%03d", i))
		}
		return ks
	}
	cases := []inputsCase{
		{"no keys", []string{}, true, "an absent inputResponses; a key count of 0 and nothing after it"},
		{"one key", []string{"github_login"}, true, ""},
		{"two keys", []string{"confirm", "card"}, true, "sorted: card, confirm"},
		{"two keys, the other order", []string{"card", "confirm"}, true, "same digest as two keys"},
		{"keys that differ only in case", []string{"card", "Card"}, true, "two keys; Card (0x43) sorts before card (0x63)"},
		{"a prefix sorts first", []string{"ab", "a", "abc"}, true, "sorted: a, ab, abc"},
		{"bytes, not UTF-16", []string{"｡", "😀", "é", "e"}, true, "sorted by UTF-8 bytes: e, é, ｡ (EF BD A1), 😀 (F0 9F 98 80); UTF-16 puts 😀 (D83D) before ｡ (FF61)"},
		{"no normalization", []string{"é", "e\u0301"}, true, "U+00E9 and e U+0301 are two keys"},
		{"length prefixes", []string{"a", "bc"}, true, "not the digest of ab, c"},
		{"length prefixes, other split", []string{"ab", "c"}, true, "not the digest of a, bc"},
		{"a key of 1,024 bytes", []string{strings.Repeat("k", sealer.MaxInputKey)}, true, ""},
		{"256 keys", many(sealer.MaxInputKeys), true, "given in descending order"},
		{"a key given twice", []string{"card", "confirm", "card"}, false, ""},
		{"an empty key", []string{"card", ""}, false, ""},
		{"a key of 1,025 bytes", []string{strings.Repeat("k", sealer.MaxInputKey+1)}, false, ""},
		{"a key of invalid UTF-8", []string{"card", "\xff"}, false, ""},
		{"a key with a lone surrogate, as WTF-8", []string{"\xed\xa0\x80"}, false, "U+D800 encoded as if it were a character"},
		{"257 keys", many(sealer.MaxInputKeys + 1), false, ""},
	}
	for _, c := range cases {
		if g.names["inputs "+c.name] {
			g.t.Fatalf("two inputs vectors %q", c.name)
		}
		g.names["inputs "+c.name] = true
		v := inputsVector{Name: c.name, Want: "refused", Note: c.note}
		if slices.ContainsFunc(c.keys, func(k string) bool { return !utf8.ValidString(k) }) {
			for _, k := range c.keys {
				v.KeysHex = append(v.KeysHex, hex.EncodeToString([]byte(k)))
			}
		} else {
			v.Keys = keyList(c.keys...)
		}
		in, err := sealer.InputsOf(c.keys)
		spec, ok := specInputs(c.keys, mistakes{})
		if (err == nil) != c.ok || ok != c.ok || ok && !bytes.Equal(in[:], spec) {
			g.t.Fatalf("inputs vector %q: InputsOf says %v, %v; FORMAT.md %x, %v; the vector ok %v", c.name, in, err, spec, ok, c.ok)
		}
		if c.ok {
			sorted := slices.Clone(c.keys)
			slices.Sort(sorted)
			pre := binary.BigEndian.AppendUint32([]byte("mcp-sealer/v2 inputs\x00"), uint32(len(sorted)))
			for _, k := range sorted {
				pre = append(binary.BigEndian.AppendUint32(pre, uint32(len(k))), k...)
			}
			v.Want, v.Sorted, v.Preimage, v.Digest = "ok", keyList(sorted...), hex.EncodeToString(pre), in.String()
		}
		g.inputs = append(g.inputs, v)
	}
}
