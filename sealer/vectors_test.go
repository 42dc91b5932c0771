package sealer_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json (go test ./sealer/ -run TestVectors -update), testdata/flows.json (-run TestFlowVectors -update) and testdata/outcomes.json (-run TestOutcomeVectors -update)")

const vectorsPath = "testdata/vectors.json"

// vectorFile is testdata/vectors.json; testdata/README.md documents it.
type vectorFile struct {
	Comment string         `json:"comment"`
	Keys    []vectorKey    `json:"keys"`
	Sealing uint32         `json:"sealing"`
	KeyFile keyFile        `json:"keyFile"`
	Seal    []sealVector   `json:"seal"`
	Open    []openVector   `json:"open"`
	Digests []digestVector `json:"digests"`
}

// vectorKey is a master key version; Key is its material in hex.
type vectorKey struct {
	ID  uint32 `json:"id"`
	Key string `json:"key"`
}

// keyFile is the same ring as the sealer's key file holds it (keys.File):
// material in padded standard base64.
type keyFile struct {
	Sealing uint32 `json:"sealing"`
	Keys    []struct {
		ID  uint32 `json:"id"`
		Key string `json:"key"`
	} `json:"keys"`
}

// sealVector is a state sealed from its inputs, with the intermediate
// values of FORMAT.md. Bytes are hex, times milliseconds since the epoch.
type sealVector struct {
	Name      string `json:"name"`
	Tenant    string `json:"tenant"`
	KeyID     uint32 `json:"keyId"`
	Principal string `json:"principal"`
	Request   string `json:"request"`
	IssuedAt  int64  `json:"issuedAt"`
	ExpiresAt int64  `json:"expiresAt"`
	OneTime   bool   `json:"oneTime"`
	Payload   string `json:"payload"`
	Nonce     string `json:"nonce"`

	HKDFInfo      string `json:"hkdfInfo"`
	TenantKey     string `json:"tenantKey"`
	Header        string `json:"header"`
	AD            string `json:"ad"`
	PrincipalHash string `json:"principalHash"`
	Plaintext     string `json:"plaintext"`

	ID    string `json:"id"`
	State string `json:"state"`
}

// openVector is one call of an opener and the verdict it must reach.
type openVector struct {
	Name      string       `json:"name"`
	Tenant    string       `json:"tenant"`
	State     string       `json:"state"`
	Principal string       `json:"principal"`
	Request   string       `json:"request"`
	Now       int64        `json:"now"`
	Skew      int64        `json:"skew"`
	Want      string       `json:"want"`
	Step      int          `json:"step"`
	Reason    string       `json:"reason,omitempty"`
	From      string       `json:"from,omitempty"`
	Note      string       `json:"note,omitempty"`
	Crafted   *craftedBlob `json:"crafted,omitempty"`
	Opened    *openedState `json:"opened,omitempty"`
}

// opening is what the opener of spec_test.go is given for v: an opener of
// version 1 alone, which the vectors of vectors.json were written for.
func (v openVector) opening(tb testing.TB, ring map[uint32][]byte) specOpening {
	return specOpening{ring: ring, tenant: v.Tenant, state: v.State, principal: v.Principal, request: mustHex(tb, v.Request), now: v.Now, skew: v.Skew}
}

// craftedBlob is how a state that Seal would not make was sealed.
type craftedBlob struct {
	KeyID     uint32 `json:"keyId"`
	HKDFInfo  string `json:"hkdfInfo"`
	TenantKey string `json:"tenantKey"`
	Header    string `json:"header"`
	Nonce     string `json:"nonce"`
	AD        string `json:"ad"`
	Plaintext string `json:"plaintext"`
}

// openedState is what an opener returns for a state that opens.
type openedState struct {
	KeyID     uint32 `json:"keyId"`
	ID        string `json:"id"`
	IssuedAt  int64  `json:"issuedAt"`
	ExpiresAt int64  `json:"expiresAt"`
	OneTime   bool   `json:"oneTime"`
	Payload   string `json:"payload"`
}

// digestVector is one request and its digest, or its refusal.
type digestVector struct {
	Name      string  `json:"name"`
	Method    string  `json:"method"`
	Params    *string `json:"params,omitempty"`
	ParamsHex string  `json:"paramsHex,omitempty"`
	Want      string  `json:"want"`
	TextOnly  bool    `json:"textOnly,omitempty"`
	Target    string  `json:"target,omitempty"`
	Args      *string `json:"args,omitempty"`
	Digest    string  `json:"digest,omitempty"`
	Note      string  `json:"note,omitempty"`
}

func (d digestVector) params() []byte {
	if d.Params != nil {
		return []byte(*d.Params)
	}
	b, err := hex.DecodeString(d.ParamsHex)
	if err != nil {
		panic(err)
	}
	return b
}

// TestVectors writes testdata/vectors.json with -update, and otherwise
// checks that the file is exactly what this package writes today: a stale or
// hand-edited file fails. The file is the same on every run: nonces come
// from a random source seeded by each vector's name, times are fixed.
func TestVectors(t *testing.T) {
	checkWritten(t, vectorsPath, "TestVectors", buildVectors(t))
}

// checkWritten writes got to path with -update, and otherwise fails when the
// file at path is not got: stale or edited by hand. test names the test
// that writes it.
func checkWritten(t *testing.T, path, test string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s is stale: line %d is %.120q, want %.120q; run go test ./sealer/ -run %s -update and review the diff", path, i+1, wl[i], gl[i], test)
			}
		}
		t.Fatalf("%s is stale: %d lines, want %d; run go test ./sealer/ -run %s -update", path, len(wl), len(gl), test)
	}
}

func loadVectors(tb testing.TB) vectorFile {
	var v vectorFile
	decodeVectors(tb, vectorsPath, &v)
	if len(v.Seal) == 0 || len(v.Open) == 0 || len(v.Digests) == 0 {
		tb.Fatal("no vectors")
	}
	return v
}

// decodeVectors reads the vector file at path into v, refusing unknown
// fields.
func decodeVectors(tb testing.TB, path string, v any) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		tb.Fatal(err)
	}
}

// vectorRing returns the ring of the vectors' keys.
func vectorRing(tb testing.TB, v vectorFile) *keys.Ring {
	tb.Helper()
	var ks []keys.Key
	for _, k := range v.Keys {
		key, err := keys.NewKey(k.ID, mustHex(tb, k.Key), time.Time{})
		if err != nil {
			tb.Fatal(err)
		}
		ks = append(ks, key)
	}
	ring, err := keys.NewRing(ks, v.Sealing)
	if err != nil {
		tb.Fatal(err)
	}
	return ring
}

// specRing returns the vectors' keys for the opener of spec_test.go.
func specRing(tb testing.TB, v vectorFile) map[uint32][]byte {
	ring := map[uint32][]byte{}
	for _, k := range v.Keys {
		ring[k.ID] = mustHex(tb, k.Key)
	}
	return ring
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var verdicts = map[string]error{
	"ok":                 nil,
	"invalid":            sealer.ErrInvalid,
	"expired":            sealer.ErrExpired,
	"principal_mismatch": sealer.ErrPrincipalMismatch,
	"request_mismatch":   sealer.ErrRequestMismatch,
	"flow_expired":       sealer.ErrFlowExpired,
	"flow_exhausted":     sealer.ErrFlowExhausted,
	"input_mismatch":     sealer.ErrInputMismatch,
}

// TestVectors_Open opens every state vector with sealer.Open, with the ring
// of the hex keys and with the same ring read from the key file format:
// R1 (any string), R2 (only authentic states), R3, R4, R5, R8.
func TestVectors_Open(t *testing.T) {
	v := loadVectors(t)
	path := filepath.Join(t.TempDir(), "keys.json")
	kf, err := json.Marshal(v.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, kf, 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := keys.File{Path: path}.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for ringName, ring := range map[string]*keys.Ring{"hex keys": vectorRing(t, v), "key file": fromFile} {
		for _, tc := range v.Open {
			t.Run(ringName+"/"+tc.Name, func(t *testing.T) {
				wantErr, known := verdicts[tc.Want]
				if !known {
					t.Fatalf("unknown verdict %q", tc.Want)
				}
				d, err := sealer.DigestOf(mustHex(t, tc.Request))
				if err != nil {
					t.Fatal(err)
				}
				want := sealer.Expect{Principal: tc.Principal, Request: d, Skew: time.Duration(tc.Skew) * time.Millisecond}
				o, err := sealer.Open(ring, tc.Tenant, tc.State, want, time.UnixMilli(tc.Now))
				if !errors.Is(err, wantErr) || err != nil && o != nil {
					t.Fatalf("got %v, %v; want %v (step %d)", o, err, wantErr, tc.Step)
				}
				if err != nil {
					return
				}
				got := openedState{KeyID: o.KeyVersion, ID: o.ID.String(), IssuedAt: o.IssuedAt.UnixMilli(),
					ExpiresAt: o.ExpiresAt.UnixMilli(), OneTime: o.OneTime, Payload: hex.EncodeToString(o.Payload)}
				if got != *tc.Opened {
					t.Fatalf("got %+v, want %+v", got, *tc.Opened)
				}
			})
		}
	}
}

// TestVectors_Seal rebuilds every seal vector from its inputs with the
// implementation of FORMAT.md in spec_test.go, intermediate values included,
// and opens it with sealer.Open.
func TestVectors_Seal(t *testing.T) {
	v := loadVectors(t)
	ring := vectorRing(t, v)
	material := specRing(t, v)
	for _, tc := range v.Seal {
		t.Run(tc.Name, func(t *testing.T) {
			var flags byte
			if tc.OneTime {
				flags = 1
			}
			header := specHeader(1, tc.KeyID)
			key := specTenantKey(material[tc.KeyID], tc.KeyID, tc.Tenant)
			ad := append(header, tc.Tenant...)
			pt := specPlaintext(flags, uint64(tc.IssuedAt), uint64(tc.ExpiresAt), tc.Principal, mustHex(t, tc.Request), mustHex(t, tc.Payload))
			nonce := mustHex(t, tc.Nonce)
			for _, c := range []struct{ name, got, want string }{
				{"hkdfInfo", hex.EncodeToString(specInfo(tc.KeyID, tc.Tenant)), tc.HKDFInfo},
				{"tenantKey", hex.EncodeToString(key), tc.TenantKey},
				{"header", hex.EncodeToString(header), tc.Header},
				{"ad", hex.EncodeToString(ad), tc.AD},
				{"principalHash", hex.EncodeToString(specPrincipalHash(tc.Principal)), tc.PrincipalHash},
				{"plaintext", hex.EncodeToString(pt), tc.Plaintext},
				{"id", hex.EncodeToString(nonce[:16]), tc.ID},
				{"state", specSeal(key, header, nonce, pt, ad), tc.State},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %.80s, want %.80s", c.name, c.got, c.want)
				}
			}
			d, _ := sealer.DigestOf(mustHex(t, tc.Request))
			o, err := sealer.Open(ring, tc.Tenant, tc.State, sealer.Expect{Principal: tc.Principal, Request: d}, time.UnixMilli(tc.IssuedAt))
			if err != nil || hex.EncodeToString(o.Payload) != tc.Payload || o.OneTime != tc.OneTime {
				t.Fatalf("Open: got %v, %v; want the sealed payload", o, err)
			}
		})
	}
}

// TestVectors_Digests computes every digest vector with mcpdigest.Request, and
// the accepted ones again with mcpdigest.Canonical from their canonical parts
// (R5, R9).
func TestVectors_Digests(t *testing.T) {
	for _, tc := range loadVectors(t).Digests {
		t.Run(tc.Name, func(t *testing.T) {
			d, err := mcpdigest.Request(tc.Method, tc.params())
			switch {
			case tc.Want == "refused" && err == nil:
				t.Fatalf("got digest %v, want a refusal", d)
			case tc.Want == "refused":
				if !errors.Is(err, sealer.ErrArgument) && !errors.Is(err, sealer.ErrMethod) {
					t.Fatalf("got %v, want ErrArgument or ErrMethod", err)
				}
				return
			case err != nil || d.String() != tc.Digest:
				t.Fatalf("got %v, %v; want %s", d, err, tc.Digest)
			}
			d, err = mcpdigest.Canonical(tc.Method, tc.Target, []byte(*tc.Args))
			if err != nil || d.String() != tc.Digest {
				t.Fatalf("mcpdigest.Canonical: got %v, %v; want %s", d, err, tc.Digest)
			}
		})
	}
}

// TestVectors_SpecOpener holds the opener written from FORMAT.md alone
// (spec_test.go) to every state vector, verdict, step and opened state.
func TestVectors_SpecOpener(t *testing.T) {
	v := loadVectors(t)
	ring := specRing(t, v)
	for _, tc := range v.Open {
		verdict, step, o := specOpen(tc.opening(t, ring), mistakes{})
		if verdict != tc.Want || step != tc.Step {
			t.Errorf("%s: got %s at step %d, want %s at step %d", tc.Name, verdict, step, tc.Want, tc.Step)
			continue
		}
		if o != nil {
			got := openedState{KeyID: o.keyID, ID: hex.EncodeToString(o.id), IssuedAt: int64(o.iat), ExpiresAt: int64(o.exp),
				OneTime: o.flags&1 != 0, Payload: hex.EncodeToString(o.payload)}
			if got != *tc.Opened {
				t.Errorf("%s: got %+v, want %+v", tc.Name, got, *tc.Opened)
			}
		}
	}
}

// brokenOpeners are openers that each make one mistake of mistakes.
var brokenOpeners = map[string]mistakes{
	"no length bounds":                   {skipLength: true},
	"length counted in characters":       {countCharacters: true},
	"decoder skips CR and LF":            {laxCRLF: true},
	"decoder accepts padding":            {laxPadding: true},
	"decoder accepts + and /":            {laxAlphabet: true},
	"decoder ignores trailing bits":      {laxTrailingBits: true},
	"no version check":                   {skipVersion: true},
	"tries every key version":            {anyKey: true},
	"derives keys for any tenant length": {anyTenant: true},
	"no tag check":                       {noTag: true},
	"accepts unknown flags":              {skipFlags: true},
	"accepts expiry not after issue":     {skipOrder: true},
	"accepts times past year 9999":       {skipRange: true},
	"no expiry check":                    {skipExpiry: true},
	"no skew":                            {ignoreSkew: true},
	"negative skew shortens":             {negativeSkew: true},
	"expired at expiry + skew":           {expiryInclusive: true},
	"no principal check":                 {skipPrincipal: true},
	"bounds the expected principal":      {boundPrincipal: true},
	"no request check":                   {skipRequest: true},
	"principal before expiry":            {principalFirst: true},
	"request before principal":           {requestFirst: true},
}

// TestVectors_BrokenOpenersFail shows that the state vectors catch the
// mistakes an implementation of FORMAT.md is likely to make: each broken
// opener reaches another verdict than the vectors, or the same at another
// step, on at least one of them.
func TestVectors_BrokenOpenersFail(t *testing.T) {
	v := loadVectors(t)
	ring := specRing(t, v)
	for name, m := range brokenOpeners {
		t.Run(name, func(t *testing.T) {
			var caught []string
			for _, tc := range v.Open {
				verdict, step, _ := specOpen(tc.opening(t, ring), m)
				if verdict != tc.Want || step != tc.Step {
					caught = append(caught, fmt.Sprintf("%s (%s at step %d, want %s at %d)", tc.Name, verdict, step, tc.Want, tc.Step))
				}
			}
			if len(caught) == 0 {
				t.Fatal("no vector catches this opener")
			}
			t.Logf("caught by %d vectors: %s", len(caught), strings.Join(caught[:min(3, len(caught))], "; "))
		})
	}
}

// TestVectors_SpecDigester holds the digester written from FORMAT.md
// (spec_digest_test.go) to every digest vector, canonical arguments
// included; and the same digester on the decoded-params path, which may
// accept the vectors marked textOnly, to all the others.
func TestVectors_SpecDigester(t *testing.T) {
	for _, tc := range loadVectors(t).Digests {
		for _, m := range []digestMistakes{{}, {decoded: true}} {
			target, args, d, err := specDigest(tc.Method, tc.params(), m)
			switch {
			case m.decoded && tc.TextOnly:
			case tc.Want == "refused" && err == nil:
				t.Errorf("%s (decoded %v): got digest %x, want a refusal", tc.Name, m.decoded, d)
			case tc.Want == "ok" && (err != nil || hex.EncodeToString(d) != tc.Digest || target != tc.Target || string(args) != *tc.Args):
				t.Errorf("%s (decoded %v): got %q, %.80q, %x, %v; want %q, %.80q, %s", tc.Name, m.decoded, target, args, d, err, tc.Target, *tc.Args, tc.Digest)
			}
		}
	}
}

// brokenDigesters are digesters that each make one mistake of
// digestMistakes.
var brokenDigesters = map[string]digestMistakes{
	"no size limit":                      {noSizeLimit: true},
	"no case-variant check":              {noCaseCheck: true},
	"case compared in ASCII only":        {asciiCaseCheck: true},
	"no lower-case comparison":           {noLowerCase: true},
	"no upper-case comparison":           {noUpperCase: true},
	"full case mappings":                 {fullCaseMappings: true},
	"case variants checked at any depth": {deepCaseCheck: true},
	"byte order mark skipped":            {ignoreBOM: true},
	"absent arguments digested as empty": {absentArgsEmpty: true},
	"resources/read with null arguments": {resourceArgsNull: true},
	"no number check":                    {noNumberCheck: true},
	"checks integer spellings only":      {integerCheck: true},
	"checks the decimal, not the double": {decimalCheck: true},
	"no depth limit":                     {noDepthLimit: true},
	"depth counted from params":          {depthFromParams: true},
	"no value limit":                     {noValueLimit: true},
	"member names counted as values":     {namesAreValues: true},
	"no length prefixes":                 {noLengthPrefix: true},
	"members sorted by code point":       {codePointOrder: true},
	"-0 written as -0":                   {negativeZero: true},
	"non-ASCII escaped":                  {escapeNonASCII: true},
}

// TestVectors_BrokenDigestersFail shows that the digest vectors catch the
// mistakes an implementation of the request digest is likely to make.
func TestVectors_BrokenDigestersFail(t *testing.T) {
	v := loadVectors(t)
	for name, m := range brokenDigesters {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range v.Digests {
				_, _, d, err := specDigest(tc.Method, tc.params(), m)
				if (err == nil) != (tc.Want == "ok") || err == nil && hex.EncodeToString(d) != tc.Digest {
					t.Logf("caught by %s", tc.Name)
					return
				}
			}
			t.Fatal("no vector catches this digester")
		})
	}
}
