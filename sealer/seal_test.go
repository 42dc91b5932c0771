package sealer_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// testRing returns a ring of the given versions, each keyed with its number
// repeated, sealing with the highest.
func testRing(tb testing.TB, versions ...uint32) *keys.Ring {
	tb.Helper()
	var ks []keys.Key
	for _, v := range versions {
		k, err := keys.NewKey(v, bytes.Repeat([]byte{byte(v)}, keys.Size), t0)
		if err != nil {
			tb.Fatal(err)
		}
		ks = append(ks, k)
	}
	r, err := keys.NewRing(ks, versions[len(versions)-1])
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func testDigest(tb testing.TB, args string) sealer.Digest {
	tb.Helper()
	d, err := mcpdigest.Request("tools/call", []byte(`{"name":"get_weather","arguments":`+args+`}`))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func testClaims(tb testing.TB) sealer.Claims {
	return sealer.Claims{
		Principal: "alice@example.com",
		Request:   testDigest(tb, `{"location":"New York"}`),
		IssuedAt:  t0,
		ExpiresAt: t0.Add(5 * time.Minute),
	}
}

func seal(tb testing.TB, ring *keys.Ring, c sealer.Claims, payload []byte) string {
	tb.Helper()
	s, err := sealer.Seal(ring, "tenant-a", c, payload)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestSealOpen_RoundTrip(t *testing.T) {
	ring := testRing(t, 1)
	c := testClaims(t)
	c.OneTime = true
	payload := []byte(`{"step":2,"cart":["a","b"]}`)
	state := seal(t, ring, c, payload)

	o, err := sealer.Open(ring, "tenant-a", state, sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}, t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if !bytes.Equal(o.Payload, payload) {
		t.Errorf("payload: got %q, want %q", o.Payload, payload)
	}
	if !o.IssuedAt.Equal(c.IssuedAt) || !o.ExpiresAt.Equal(c.ExpiresAt) || !o.OneTime {
		t.Errorf("claims: got %+v, want %+v", o.Claims, c)
	}
	h, err := sealer.Inspect(state)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if h.ID != o.ID || h.KeyVersion != 1 || o.KeyVersion != 1 {
		t.Errorf("header %v, opened id %v key %d: want the same id and key 1", h, o.ID, o.KeyVersion)
	}
}

func TestSeal_R8_StateIsUnpaddedBase64URL(t *testing.T) {
	ring := testRing(t, 1)
	for n := range 40 {
		state := seal(t, ring, testClaims(t), bytes.Repeat([]byte{0xff}, n))
		if i := strings.IndexFunc(state, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}); i >= 0 {
			t.Fatalf("payload %d bytes: state has %q at %d", n, state[i], i)
		}
	}
}

func TestSeal_StatesAreUnique(t *testing.T) {
	ring := testRing(t, 1)
	seen := map[sealer.StateID]bool{}
	for range 1000 {
		h, err := sealer.Inspect(seal(t, ring, testClaims(t), nil))
		if err != nil {
			t.Fatal(err)
		}
		if seen[h.ID] {
			t.Fatalf("state id %v sealed twice", h.ID)
		}
		seen[h.ID] = true
	}
}

func TestOpen_Rejections(t *testing.T) {
	ring := testRing(t, 1, 2)
	c := testClaims(t)
	state := seal(t, ring, c, []byte("payload"))
	want := sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}
	other := sealer.Expect{Principal: c.Principal, Request: testDigest(t, `{"location":"Boston"}`)}
	k2, _ := keys.NewKey(2, bytes.Repeat([]byte{0xee}, keys.Size), t0)
	otherMaterial, err := keys.NewRing([]keys.Key{k2}, 2)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		ring   *keys.Ring
		tenant string
		state  string
		want   sealer.Expect
		now    time.Time
		err    error
	}{
		{"R4 within skew after expiry", ring, "tenant-a", state, want, c.ExpiresAt.Add(sealer.DefaultSkew), nil},
		{"R4 expired past skew", ring, "tenant-a", state, want, c.ExpiresAt.Add(sealer.DefaultSkew + time.Millisecond), sealer.ErrExpired},
		{"R4 custom skew", ring, "tenant-a", state, sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: time.Millisecond}, c.ExpiresAt.Add(2 * time.Millisecond), sealer.ErrExpired},
		{"R3 other principal", ring, "tenant-a", state, sealer.Expect{Principal: "mallory", Request: c.Request}, t0, sealer.ErrPrincipalMismatch},
		{"R3 empty principal", ring, "tenant-a", state, sealer.Expect{Request: c.Request}, t0, sealer.ErrPrincipalMismatch},
		{"R5 other request", ring, "tenant-a", state, other, t0, sealer.ErrRequestMismatch},
		{"R2 other tenant", ring, "tenant-b", state, want, t0, sealer.ErrInvalid},
		{"R2 retired key", testRing(t, 1), "tenant-a", state, want, t0, sealer.ErrInvalid},
		{"R2 ring without the version", testRing(t, 3), "tenant-a", state, want, t0, sealer.ErrInvalid},
		{"R2 same version other material", otherMaterial, "tenant-a", state, want, t0, sealer.ErrInvalid},
		{"R1 empty", ring, "tenant-a", "", want, t0, sealer.ErrInvalid},
		{"R1 padding", ring, "tenant-a", state + "==", want, t0, sealer.ErrInvalid},
		{"R1 standard alphabet", ring, "tenant-a", strings.Repeat("+/", 100), want, t0, sealer.ErrInvalid},
		{"R1 oversize", ring, "tenant-a", strings.Repeat("A", sealer.MaxState+1), want, t0, sealer.ErrInvalid},
		{"R8 line break inside", ring, "tenant-a", state[:20] + "\n" + state[20:], want, t0, sealer.ErrInvalid},
		{"R8 CRLF at the end", ring, "tenant-a", state + "\r\n", want, t0, sealer.ErrInvalid},
		{"R1 control bytes", ring, "tenant-a", strings.Repeat("\x00\xff", 100), want, t0, sealer.ErrInvalid},
		{"R1 expired and forged", ring, "tenant-a", mangle(state, 50), want, c.ExpiresAt.Add(time.Hour), sealer.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := sealer.Open(tc.ring, tc.tenant, tc.state, tc.want, tc.now)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if err != nil && o != nil {
				t.Fatalf("got %+v with error %v, want nothing", o, err)
			}
		})
	}
}

func TestOpen_R2_EveryBitFlipIsInvalid(t *testing.T) {
	ring := testRing(t, 1)
	c := testClaims(t)
	state := seal(t, ring, c, []byte("a payload of some length"))
	want := sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}
	b := []byte(state)
	for i := range b {
		for bit := range 8 {
			b[i] ^= 1 << bit
			o, err := sealer.Open(ring, "tenant-a", string(b), want, t0)
			if !errors.Is(err, sealer.ErrInvalid) || o != nil {
				t.Fatalf("char %d bit %d: got %v, want ErrInvalid", i, bit, err)
			}
			b[i] ^= 1 << bit
		}
	}
}

func TestOpen_R2_TruncationsAndExtensionsAreInvalid(t *testing.T) {
	ring := testRing(t, 1)
	c := testClaims(t)
	state := seal(t, ring, c, []byte("a payload"))
	want := sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}
	for n := range len(state) {
		if _, err := sealer.Open(ring, "tenant-a", state[:n], want, t0); !errors.Is(err, sealer.ErrInvalid) {
			t.Fatalf("truncated to %d: got %v, want ErrInvalid", n, err)
		}
	}
	for _, ext := range []string{"A", "AA", "AAA", "AAAA", "_", "-w", state} {
		if _, err := sealer.Open(ring, "tenant-a", state+ext, want, t0); !errors.Is(err, sealer.ErrInvalid) {
			t.Fatalf("extended by %q: got %v, want ErrInvalid", ext, err)
		}
	}
}

func TestSeal_Limits(t *testing.T) {
	ring := testRing(t, 1)
	ok := testClaims(t)
	tests := []struct {
		name    string
		tenant  string
		mutate  func(*sealer.Claims)
		payload int
		err     error
	}{
		{"largest payload", "t", func(*sealer.Claims) {}, sealer.MaxPayload, nil},
		{"payload one byte over", "t", func(*sealer.Claims) {}, sealer.MaxPayload + 1, sealer.ErrArgument},
		{"longest principal", "t", func(c *sealer.Claims) { c.Principal = strings.Repeat("p", sealer.MaxPrincipal) }, 0, nil},
		{"principal one byte over", "t", func(c *sealer.Claims) { c.Principal = strings.Repeat("p", sealer.MaxPrincipal+1) }, 0, sealer.ErrArgument},
		{"R3 no principal", "t", func(c *sealer.Claims) { c.Principal = "" }, 0, sealer.ErrArgument},
		{"R4 expiry at issue", "t", func(c *sealer.Claims) { c.ExpiresAt = c.IssuedAt }, 0, sealer.ErrArgument},
		{"R4 expiry within the same millisecond", "t", func(c *sealer.Claims) { c.ExpiresAt = c.IssuedAt.Add(time.Microsecond) }, 0, sealer.ErrArgument},
		{"R4 no times", "t", func(c *sealer.Claims) { c.IssuedAt, c.ExpiresAt = time.Time{}, time.Time{} }, 0, sealer.ErrArgument},
		{"no tenant", "", func(*sealer.Claims) {}, 0, sealer.ErrArgument},
		{"tenant too long", strings.Repeat("t", keys.MaxTenant+1), func(*sealer.Claims) {}, 0, sealer.ErrArgument},
		{"longest tenant", strings.Repeat("t", keys.MaxTenant), func(*sealer.Claims) {}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			state, err := sealer.Seal(ring, tc.tenant, c, make([]byte, tc.payload))
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			// A refusal of the key ring keeps its identity through Seal.
			if bad := tc.tenant == "" || len(tc.tenant) > keys.MaxTenant; bad != errors.Is(err, keys.ErrBadTenant) {
				t.Fatalf("errors.Is(%v, keys.ErrBadTenant) = %v, want %v", err, !bad, bad)
			}
			if err != nil {
				return
			}
			if len(state) > sealer.MaxState {
				t.Fatalf("state of %d chars exceeds MaxState %d", len(state), sealer.MaxState)
			}
			o, err := sealer.Open(ring, tc.tenant, state, sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}, t0)
			if err != nil || len(o.Payload) != tc.payload {
				t.Fatalf("open: got %v, want the sealed %d bytes", err, tc.payload)
			}
		})
	}
}

func TestOpen_PayloadIsACopy(t *testing.T) {
	ring := testRing(t, 1)
	c := testClaims(t)
	payload := []byte("mutable")
	state := seal(t, ring, c, payload)
	payload[0] = 'M'
	o, err := sealer.Open(ring, "tenant-a", state, sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: sealer.DefaultSkew}, t0)
	if err != nil || string(o.Payload) != "mutable" {
		t.Fatalf("got %q, %v; want the payload as it was at Seal", o.Payload, err)
	}
}

func TestInspect_RejectsNonStates(t *testing.T) {
	for _, s := range []string{"", "AAAA", strings.Repeat("A", 200), strings.Repeat("!", 200)} {
		if _, err := sealer.Inspect(s); !errors.Is(err, sealer.ErrInvalid) {
			t.Errorf("Inspect(%.10q...): got %v, want ErrInvalid", s, err)
		}
	}
}

// mangle returns s with the character at i replaced by another valid one.
func mangle(s string, i int) string {
	c := byte('A')
	if s[i] == c {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestSeal_R4_TimeRange(t *testing.T) {
	ring := testRing(t, 1)
	last := time.UnixMilli(sealer.MaxUnixMilli)
	if want := time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC); !last.Equal(want) {
		t.Fatalf("MaxUnixMilli is %v, want %v", last.UTC(), want)
	}
	tests := []struct {
		name     string
		iat, exp time.Time
		err      error
	}{
		{"from the epoch", time.UnixMilli(0), time.UnixMilli(1), nil},
		{"to the last millisecond of 9999", last.Add(-time.Hour), last, nil},
		{"within the last millisecond of 9999", last.Add(-time.Hour), last.Add(999 * time.Microsecond), nil},
		{"before the epoch", time.UnixMilli(-1), time.UnixMilli(1), sealer.ErrArgument},
		{"expiry in year 10000", last.Add(-time.Hour), last.Add(time.Millisecond), sealer.ErrArgument},
		{"both in year 10000", last.Add(time.Millisecond), last.Add(time.Hour), sealer.ErrArgument},
		{"issue far past 9999, expiry in range", time.Unix(1<<60, 0), t0, sealer.ErrArgument},
		{"expiry past what int64 milliseconds hold", t0, time.Unix(1<<60, 0), sealer.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testClaims(t)
			c.IssuedAt, c.ExpiresAt = tc.iat, tc.exp
			state, err := sealer.Seal(ring, "tenant-a", c, nil)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			o, err := sealer.Open(ring, "tenant-a", state, sealer.Expect{Principal: c.Principal, Request: c.Request}, tc.iat)
			if err != nil || o.ExpiresAt.UnixMilli() != tc.exp.UnixMilli() {
				t.Fatalf("open: got %v, %v; want expiry %d", o, err, tc.exp.UnixMilli())
			}
		})
	}
}

func TestClaims_R4_ExpiredNeverOverflows(t *testing.T) {
	exp := t0
	last := time.UnixMilli(sealer.MaxUnixMilli)
	const maxSkew = time.Duration(math.MaxInt64)
	tests := []struct {
		name    string
		expires time.Time
		now     time.Time
		skew    time.Duration
		want    bool
	}{
		{"at expiry + skew", exp, exp.Add(sealer.DefaultSkew), sealer.DefaultSkew, false},
		{"within the millisecond after", exp, exp.Add(sealer.DefaultSkew + 999*time.Microsecond), sealer.DefaultSkew, false},
		{"the next millisecond", exp, exp.Add(sealer.DefaultSkew + time.Millisecond), sealer.DefaultSkew, true},
		{"skew below a millisecond counts as none", exp, exp.Add(time.Millisecond), 999 * time.Microsecond, true},
		{"negative skew counts as none", exp, exp, -time.Hour, false},
		{"most negative skew", exp, exp.Add(time.Millisecond), math.MinInt64, true},
		{"largest skew", exp, exp.Add(maxSkew - time.Millisecond), maxSkew, false},
		{"largest skew at the end of 9999", last, last.Add(maxSkew).Add(-time.Millisecond), maxSkew, false},
		{"largest skew at the end of 9999, passed", last, last.Add(maxSkew).Add(time.Millisecond), maxSkew, true},
		{"now far in the future", last, time.Unix(1<<60, 0), maxSkew, true},
		{"now far in the past", last, time.Unix(-1<<60, 0), maxSkew, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := (sealer.Claims{ExpiresAt: tc.expires}).Expired(tc.now, tc.skew); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDefaultMaxPayload (issue 50): the largest payload sealed by default
// makes a state of at most 65,536 characters, with a flow or without, and
// one byte more makes a longer one with a flow: the default is the largest
// that fits.
func TestDefaultMaxPayload(t *testing.T) {
	ring := testRing(t, 1)
	plain := testClaims(t)
	flowing := testClaims(t)
	flowing.Flow = &sealer.Flow{ID: sealer.NewFlow(t0.Add(time.Hour)).ID, Round: 3, Deadline: t0.Add(time.Hour), LatestOnly: true}
	for _, tc := range []struct {
		name    string
		c       sealer.Claims
		payload int
		fits    bool
	}{
		{"no flow, the default", plain, sealer.DefaultMaxPayload, true},
		{"a flow, the default", flowing, sealer.DefaultMaxPayload, true},
		{"a flow, one byte more", flowing, sealer.DefaultMaxPayload + 1, false},
		{"a flow, MaxPayload", flowing, sealer.MaxPayload, false},
	} {
		state := seal(t, ring, tc.c, make([]byte, tc.payload))
		if fits := len(state) <= sealer.DefaultMaxState; fits != tc.fits {
			t.Errorf("%s: a payload of %d bytes sealed to %d characters; want within %d: %v", tc.name, tc.payload, len(state), sealer.DefaultMaxState, tc.fits)
		}
	}
}
