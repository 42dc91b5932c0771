package sealer_test

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/sealer"
)

const outcomesPath = "testdata/outcomes.json"

// outcomeFile is testdata/outcomes.json; testdata/README.md documents it.
type outcomeFile struct {
	Comment string              `json:"comment"`
	Keys    []vectorKey         `json:"keys"`
	Sealing uint32              `json:"sealing"`
	Seal    []outcomeSealVector `json:"seal"`
	Open    []outcomeOpenVector `json:"open"`
	Answers []answersVector     `json:"answers"`
}

// outcomeSealVector is an outcome sealed from its inputs, with the
// intermediate values of FORMAT.md. Bytes are hex, times milliseconds since
// the epoch.
type outcomeSealVector struct {
	Name       string `json:"name"`
	Tenant     string `json:"tenant"`
	KeyID      uint32 `json:"keyId"`
	StateID    string `json:"stateId"`
	RecordedAt int64  `json:"recordedAt"`
	Outcome    string `json:"outcome"`
	Nonce      string `json:"nonce"`

	HKDFInfo  string `json:"hkdfInfo"`
	TenantKey string `json:"tenantKey"`
	Header    string `json:"header"`
	AD        string `json:"ad"`
	Plaintext string `json:"plaintext"`

	Blob string `json:"blob"`
}

// outcomeOpenVector is one call of an outcome opener and the verdict it
// must reach.
type outcomeOpenVector struct {
	Name    string          `json:"name"`
	Tenant  string          `json:"tenant"`
	StateID string          `json:"stateId"`
	Blob    string          `json:"blob"`
	Want    string          `json:"want"`
	Step    int             `json:"step"`
	From    string          `json:"from,omitempty"`
	Note    string          `json:"note,omitempty"`
	Crafted *craftedOutcome `json:"crafted,omitempty"`
	Opened  *openedOutcome  `json:"opened,omitempty"`
}

// craftedOutcome is how a blob that SealOutcome would not make was sealed.
type craftedOutcome struct {
	KeyID     uint32 `json:"keyId"`
	HKDFInfo  string `json:"hkdfInfo"`
	TenantKey string `json:"tenantKey"`
	Header    string `json:"header"`
	Nonce     string `json:"nonce"`
	AD        string `json:"ad"`
	Plaintext string `json:"plaintext"`
}

// openedOutcome is what an opener returns for a blob that opens.
type openedOutcome struct {
	KeyID      uint32 `json:"keyId"`
	RecordedAt int64  `json:"recordedAt"`
	Outcome    string `json:"outcome"`
}

// TestOutcomeVectors writes testdata/outcomes.json with -update, and
// otherwise checks that the file is exactly what this package writes today:
// a stale or hand-edited file fails. Like vectors.json, it is the same on
// every run.
func TestOutcomeVectors(t *testing.T) {
	checkWritten(t, outcomesPath, "TestOutcomeVectors", buildOutcomeVectors(t))
}

func loadOutcomeVectors(tb testing.TB) outcomeFile {
	var v outcomeFile
	decodeVectors(tb, outcomesPath, &v)
	if len(v.Seal) == 0 || len(v.Open) == 0 {
		tb.Fatal("no vectors")
	}
	return v
}

// TestOutcomeVectors_Seal rebuilds every seal vector from its inputs with
// the implementation of FORMAT.md in spec_outcome_test.go, intermediate
// values included, and opens it with sealer.OpenOutcome.
func TestOutcomeVectors_Seal(t *testing.T) {
	v := loadOutcomeVectors(t)
	f := vectorFile{Keys: v.Keys, Sealing: v.Sealing}
	ring, material := vectorRing(t, f), specRing(t, f)
	for _, tc := range v.Seal {
		t.Run(tc.Name, func(t *testing.T) {
			header := specHeader(3, tc.KeyID)
			id := mustHex(t, tc.StateID)
			key := specTenantKey(material[tc.KeyID], tc.KeyID, tc.Tenant)
			ad := specOutcomeAD(header, id, tc.Tenant)
			pt := specOutcomePlaintext(uint64(tc.RecordedAt), mustHex(t, tc.Outcome))
			for _, c := range []struct{ name, got, want string }{
				{"hkdfInfo", hex.EncodeToString(specInfo(tc.KeyID, tc.Tenant)), tc.HKDFInfo},
				{"tenantKey", hex.EncodeToString(key), tc.TenantKey},
				{"header", hex.EncodeToString(header), tc.Header},
				{"ad", hex.EncodeToString(ad), tc.AD},
				{"plaintext", hex.EncodeToString(pt), tc.Plaintext},
				{"blob", hex.EncodeToString(specSealOutcome(key, header, mustHex(t, tc.Nonce), pt, ad)), tc.Blob},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %.80s, want %.80s", c.name, c.got, c.want)
				}
			}
			outcome, at, err := sealer.OpenOutcome(ring, tc.Tenant, sealer.StateID(id), mustHex(t, tc.Blob))
			if err != nil || hex.EncodeToString(outcome) != tc.Outcome || at.UnixMilli() != tc.RecordedAt {
				t.Fatalf("OpenOutcome: got %.40x, %v, %v; want the sealed outcome", outcome, at, err)
			}
		})
	}
}

// TestOutcomeVectors_Open opens every opening vector with
// sealer.OpenOutcome (R2: only authentic outcomes of that state and tenant
// open), and checks that it leaves the blob as it was.
func TestOutcomeVectors_Open(t *testing.T) {
	v := loadOutcomeVectors(t)
	ring := vectorRing(t, vectorFile{Keys: v.Keys, Sealing: v.Sealing})
	for _, tc := range v.Open {
		t.Run(tc.Name, func(t *testing.T) {
			blob := mustHex(t, tc.Blob)
			outcome, at, err := sealer.OpenOutcome(ring, tc.Tenant, sealer.StateID(mustHex(t, tc.StateID)), blob)
			if hex.EncodeToString(blob) != tc.Blob {
				t.Fatal("OpenOutcome changed the blob")
			}
			if tc.Want != "ok" {
				if !errors.Is(err, sealer.ErrInvalid) || outcome != nil || !at.IsZero() {
					t.Fatalf("got %x, %v, %v; want ErrInvalid (step %d)", outcome, at, err, tc.Step)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want the outcome", err)
			}
			got := openedOutcome{KeyID: binary.BigEndian.Uint32(blob[1:5]), RecordedAt: at.UnixMilli(), Outcome: hex.EncodeToString(outcome)}
			if got != *tc.Opened || at.Location() != time.UTC {
				t.Fatalf("got %+v at %v, want %+v", got, at, *tc.Opened)
			}
		})
	}
}

// TestOutcomeVectors_SpecOpener holds the opener written from FORMAT.md
// (spec_outcome_test.go) to every opening vector, step included.
func TestOutcomeVectors_SpecOpener(t *testing.T) {
	v := loadOutcomeVectors(t)
	ring := specRing(t, vectorFile{Keys: v.Keys})
	for _, tc := range v.Open {
		t.Run(tc.Name, func(t *testing.T) {
			verdict, step, at, outcome := specOpenOutcome(ring, tc.Tenant, mustHex(t, tc.StateID), mustHex(t, tc.Blob), outcomeMistakes{})
			if verdict != tc.Want || step != tc.Step {
				t.Fatalf("got %s at step %d, want %s at step %d", verdict, step, tc.Want, tc.Step)
			}
			if verdict == "ok" && (int64(at) != tc.Opened.RecordedAt || hex.EncodeToString(outcome) != tc.Opened.Outcome) {
				t.Fatalf("got %d %x, want %+v", at, outcome, *tc.Opened)
			}
		})
	}
}

var brokenOutcomeOpeners = map[string]outcomeMistakes{
	"no length check":                    {skipLength: true},
	"version before length":              {versionFirst: true},
	"no version check":                   {skipVersion: true},
	"every key tried":                    {anyKey: true},
	"state id not in the ad":             {noStateID: true},
	"tenant not in the ad":               {noTenant: true},
	"no time range":                      {skipTimeRange: true},
	"recorded_at read as signed integer": {signedTime: true},
}

// TestOutcomeVectors_BrokenOpenersFail shows that the outcome vectors catch
// the mistakes an implementation is likely to make: each broken opener
// reaches another verdict than the vectors, or the same at another step,
// on at least one of them.
func TestOutcomeVectors_BrokenOpenersFail(t *testing.T) {
	v := loadOutcomeVectors(t)
	ring := specRing(t, vectorFile{Keys: v.Keys})
	for name, m := range brokenOutcomeOpeners {
		t.Run(name, func(t *testing.T) {
			var caught []string
			for _, tc := range v.Open {
				verdict, step, _, _ := specOpenOutcome(ring, tc.Tenant, mustHex(t, tc.StateID), mustHex(t, tc.Blob), m)
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

// outcomeSealed returns the (tenant, state id, blob) of every seal vector:
// the only blobs SealOutcome made, and the only ones that may open.
func outcomeSealed(tb testing.TB, v outcomeFile) map[[3]string]bool {
	sealed := map[[3]string]bool{}
	for _, s := range v.Seal {
		sealed[[3]string{s.Tenant, string(mustHex(tb, s.StateID)), string(mustHex(tb, s.Blob))}] = true
	}
	return sealed
}
