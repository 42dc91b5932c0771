package sealer_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

// outcomeOverhead is what a sealed outcome adds to the outcome (FORMAT.md,
// "Recorded outcomes"): header, nonce, recorded_at and tag.
const outcomeOverhead = 5 + 24 + 8 + 16

var testStateID = sealer.StateID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func sealOutcome(tb testing.TB, ring *keys.Ring, outcome []byte) []byte {
	tb.Helper()
	blob, err := sealer.SealOutcome(ring, "tenant-a", testStateID, outcome, t0)
	if err != nil {
		tb.Fatal(err)
	}
	return blob
}

func TestSealOpenOutcome_RoundTrip(t *testing.T) {
	ring := testRing(t, 1, 2)
	for _, n := range []int{0, 1, 1000, 64 << 10, sealer.MaxOutcome} {
		outcome := bytes.Repeat([]byte{'o'}, n)
		at := t0.Add(1500*time.Microsecond + 7) // kept to the millisecond
		blob, err := sealer.SealOutcome(ring, "tenant-a", testStateID, outcome, at.In(time.FixedZone("x", 3600)))
		if err != nil {
			t.Fatal(err)
		}
		if len(blob) != outcomeOverhead+n || blob[0] != 3 || blob[4] != 2 {
			t.Fatalf("%d bytes: blob of %d bytes, header %x; want %d bytes, header 0300000002", n, len(blob), blob[:5], outcomeOverhead+n)
		}
		got, gotAt, err := sealer.OpenOutcome(ring, "tenant-a", testStateID, blob)
		if err != nil || !bytes.Equal(got, outcome) || !gotAt.Equal(at.Truncate(time.Millisecond)) || gotAt.Location() != time.UTC {
			t.Fatalf("%d bytes: got %d bytes at %v, %v; want them back at %v UTC", n, len(got), gotAt, err, at.Truncate(time.Millisecond))
		}
	}
}

func TestSealOutcome_Limits(t *testing.T) {
	ring := testRing(t, 1)
	tests := []struct {
		name    string
		tenant  string
		outcome int
		at      time.Time
		err     error
	}{
		{"largest outcome", "t", sealer.MaxOutcome, t0, nil},
		{"outcome one byte over", "t", sealer.MaxOutcome + 1, t0, sealer.ErrArgument},
		{"recorded at the Unix epoch", "t", 0, time.UnixMilli(0), nil},
		{"recorded before the Unix epoch", "t", 0, time.UnixMilli(0).Add(-time.Nanosecond), sealer.ErrArgument},
		{"recorded at the end of year 9999", "t", 0, time.UnixMilli(sealer.MaxUnixMilli).Add(time.Millisecond - 1), nil},
		{"recorded after year 9999", "t", 0, time.UnixMilli(sealer.MaxUnixMilli + 1), sealer.ErrArgument},
		{"zero time", "t", 0, time.Time{}, sealer.ErrArgument},
		{"no tenant", "", 0, t0, sealer.ErrArgument},
		{"tenant too long", strings.Repeat("t", keys.MaxTenant+1), 0, t0, sealer.ErrArgument},
		{"longest tenant", strings.Repeat("t", keys.MaxTenant), 0, t0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			blob, err := sealer.SealOutcome(ring, tc.tenant, testStateID, make([]byte, tc.outcome), tc.at)
			if !errors.Is(err, tc.err) || err != nil && blob != nil {
				t.Fatalf("got %d bytes, %v; want %v", len(blob), err, tc.err)
			}
			if bad := tc.tenant == "" || len(tc.tenant) > keys.MaxTenant; bad != errors.Is(err, keys.ErrBadTenant) {
				t.Fatalf("errors.Is(%v, keys.ErrBadTenant) = %v, want %v", err, !bad, bad)
			}
			if err != nil {
				return
			}
			if _, _, err := sealer.OpenOutcome(ring, tc.tenant, testStateID, blob); err != nil {
				t.Fatalf("open: %v", err)
			}
		})
	}
}

// TestOpenOutcome_R2_Bound checks that an outcome opens only for the state
// and tenant it was sealed for, with the key version that sealed it.
func TestOpenOutcome_R2_Bound(t *testing.T) {
	ring := testRing(t, 1, 2)
	blob := sealOutcome(t, ring, []byte("answer"))
	other := testStateID
	other[15] ^= 1
	k2, _ := keys.NewKey(2, bytes.Repeat([]byte{0xee}, keys.Size), t0)
	otherMaterial, err := keys.NewRing([]keys.Key{k2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		ring   *keys.Ring
		tenant string
		id     sealer.StateID
		blob   []byte
		err    error
	}{
		{"as sealed", ring, "tenant-a", testStateID, blob, nil},
		{"after rotation", testRing(t, 1, 2, 3), "tenant-a", testStateID, blob, nil},
		{"another state", ring, "tenant-a", other, blob, sealer.ErrInvalid},
		{"the zero state id", ring, "tenant-a", sealer.StateID{}, blob, sealer.ErrInvalid},
		{"another tenant", ring, "tenant-b", testStateID, blob, sealer.ErrInvalid},
		{"no tenant", ring, "", testStateID, blob, sealer.ErrInvalid},
		{"retired key", testRing(t, 1), "tenant-a", testStateID, blob, sealer.ErrInvalid},
		{"same version, other material", otherMaterial, "tenant-a", testStateID, blob, sealer.ErrInvalid},
		{"nil", ring, "tenant-a", testStateID, nil, sealer.ErrInvalid},
		{"too long", ring, "tenant-a", testStateID, append([]byte{3, 0, 0, 0, 2}, make([]byte, outcomeOverhead-5+sealer.MaxOutcome+1)...), sealer.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, at, err := sealer.OpenOutcome(tc.ring, tc.tenant, tc.id, tc.blob)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if err != nil && (got != nil || !at.IsZero()) {
				t.Fatalf("got %q at %v with error %v, want nothing", got, at, err)
			}
		})
	}
}

func TestOpenOutcome_R2_EveryBitFlipIsInvalid(t *testing.T) {
	ring := testRing(t, 1)
	blob := sealOutcome(t, ring, []byte("an outcome of some length"))
	for i := range blob {
		for bit := range 8 {
			blob[i] ^= 1 << bit
			if got, _, err := sealer.OpenOutcome(ring, "tenant-a", testStateID, blob); !errors.Is(err, sealer.ErrInvalid) || got != nil {
				t.Fatalf("byte %d bit %d: got %v, want ErrInvalid", i, bit, err)
			}
			blob[i] ^= 1 << bit
		}
	}
}

func TestOpenOutcome_R2_TruncationsAndExtensionsAreInvalid(t *testing.T) {
	ring := testRing(t, 1)
	blob := sealOutcome(t, ring, []byte("an outcome"))
	for n := range len(blob) {
		if _, _, err := sealer.OpenOutcome(ring, "tenant-a", testStateID, blob[:n]); !errors.Is(err, sealer.ErrInvalid) {
			t.Fatalf("truncated to %d: got %v, want ErrInvalid", n, err)
		}
	}
	for _, ext := range [][]byte{{0}, {0, 0, 0, 0}, blob} {
		if _, _, err := sealer.OpenOutcome(ring, "tenant-a", testStateID, append(bytes.Clone(blob), ext...)); !errors.Is(err, sealer.ErrInvalid) {
			t.Fatalf("extended by %x: got %v, want ErrInvalid", ext, err)
		}
	}
}

// TestOutcome_StatesAndOutcomesDoNotMix checks that a state's blob is no
// outcome and an outcome blob no state, under the same key and tenant.
func TestOutcome_StatesAndOutcomesDoNotMix(t *testing.T) {
	ring := testRing(t, 1)
	c := testClaims(t)
	state := seal(t, ring, c, []byte("payload"))
	raw, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := sealer.Inspect(state)
	if _, _, err := sealer.OpenOutcome(ring, "tenant-a", h.ID, raw); !errors.Is(err, sealer.ErrInvalid) {
		t.Fatalf("a state as an outcome: got %v, want ErrInvalid", err)
	}
	blob := sealOutcome(t, ring, bytes.Repeat([]byte("x"), 200))
	want := sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}
	if _, err := sealer.Open(ring, "tenant-a", base64.RawURLEncoding.EncodeToString(blob), want, t0); !errors.Is(err, sealer.ErrInvalid) {
		t.Fatalf("an outcome as a state: got %v, want ErrInvalid", err)
	}
	if _, err := sealer.Authenticate(ring, "tenant-a", base64.RawURLEncoding.EncodeToString(blob)); !errors.Is(err, sealer.ErrInvalid) {
		t.Fatalf("an outcome authenticated as a state: got %v, want ErrInvalid", err)
	}
}

func TestOpenOutcome_LeavesTheBlob(t *testing.T) {
	ring := testRing(t, 1)
	blob := sealOutcome(t, ring, []byte("answer"))
	kept := bytes.Clone(blob)
	got, _, err := sealer.OpenOutcome(ring, "tenant-a", testStateID, blob)
	if err != nil || !bytes.Equal(blob, kept) {
		t.Fatalf("got %v; the blob changed: %v", err, !bytes.Equal(blob, kept))
	}
	got[0] = 'A'
	again, _, err := sealer.OpenOutcome(ring, "tenant-a", testStateID, blob)
	if err != nil || string(again) != "answer" {
		t.Fatalf("got %q, %v; want the outcome, not a view of the last one", again, err)
	}
	if cap(got) != len(got) {
		t.Fatalf("outcome has %d bytes of capacity past its end, want none", cap(got)-len(got))
	}
}

func TestSealOutcome_NoncesAreUnique(t *testing.T) {
	ring := testRing(t, 1)
	seen := map[string]bool{}
	for range 1000 {
		nonce := string(sealOutcome(t, ring, nil)[5:29])
		if seen[nonce] {
			t.Fatal("nonce drawn twice")
		}
		seen[nonce] = true
	}
}
