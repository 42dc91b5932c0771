package sealer_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/sealer"
)

// TestAuthenticate_JudgesNothing checks that Authenticate returns the claims
// of an authentic state whatever Open would judge of it: expired, or flow
// expired, with no principal or request to compare.
func TestAuthenticate_JudgesNothing(t *testing.T) {
	ring := testRing(t, 1, 2)
	c := testClaims(t)
	c.OneTime = true
	flow := sealer.NewFlow(flowDeadline)
	flow.LatestOnly = true
	fc := testClaims(t)
	fc.Flow = &flow
	tests := []struct {
		name string
		c    sealer.Claims
	}{
		{"R4 one-time, expired a day ago", c},
		{"R9 flow, past its deadline", fc},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := seal(t, ring, tc.c, []byte("payload"))
			h, _ := sealer.Inspect(state)
			o, err := sealer.Authenticate(ring, "tenant-a", state)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.c
			want.Principal, want.Request = "", sealer.Digest{}
			if !sameClaims(o.Claims, want) || o.ID != h.ID || o.KeyVersion != 2 || o.Payload != nil {
				t.Fatalf("got %+v (flow %+v), want %+v (flow %+v), id %v, key version 2, no payload", o, o.Flow, want, want.Flow, h.ID)
			}
			// The same state Open refuses by its judgement, not as invalid.
			_, err = sealer.Open(ring, "tenant-a", state, sealer.Expect{Principal: tc.c.Principal, Request: tc.c.Request}, flowDeadline.Add(24*time.Hour))
			if !errors.Is(err, sealer.ErrExpired) {
				t.Fatalf("Open: got %v, want ErrExpired", err)
			}
		})
	}
}

// sameClaims compares claims field by field, times as instants.
func sameClaims(a, b sealer.Claims) bool {
	if (a.Flow == nil) != (b.Flow == nil) {
		return false
	}
	if f, g := a.Flow, b.Flow; f != nil && (f.ID != g.ID || f.Round != g.Round || !f.Deadline.Equal(g.Deadline) || f.LatestOnly != g.LatestOnly || f.Asked != g.Asked) {
		return false
	}
	return a.Principal == b.Principal && a.Request == b.Request && a.IssuedAt.Equal(b.IssuedAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.OneTime == b.OneTime
}

// TestAuthenticate_R2_OnlyAuthenticStates checks that Authenticate refuses,
// as ErrInvalid, what Open refuses as invalid: forged, of another tenant or
// key, or authentic with malformed claims.
func TestAuthenticate_R2_OnlyAuthenticStates(t *testing.T) {
	ring := testRing(t, 1)
	state := seal(t, ring, testClaims(t), []byte("payload"))
	// Sealed with the key but expiring before it was issued (Opening, step 6).
	nonce := bytes.Repeat([]byte{9}, 24)
	header := specHeader(1, 1)
	malformed := specSeal(specTenantKey(bytes.Repeat([]byte{1}, 32), 1, "tenant-a"), header, nonce,
		specPlaintext(0, uint64(t0.UnixMilli()), uint64(t0.UnixMilli()), "alice", make([]byte, 32), nil), append(header, "tenant-a"...))
	tests := []struct {
		name, tenant, state string
	}{
		{"forged: one character changed", "tenant-a", mangle(state, 60)},
		{"forged: tag cut", "tenant-a", state[:len(state)-4]},
		{"another tenant", "tenant-b", state},
		{"no tenant", "", state},
		{"malformed claims", "tenant-a", malformed},
		{"empty", "tenant-a", ""},
		{"not base64url", "tenant-a", strings.Repeat("+/", 100)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if o, err := sealer.Authenticate(ring, tc.tenant, tc.state); !errors.Is(err, sealer.ErrInvalid) || o != nil {
				t.Fatalf("got %+v, %v; want ErrInvalid", o, err)
			}
		})
	}
	t.Run("a retired key", func(t *testing.T) {
		if _, err := sealer.Authenticate(testRing(t, 2), "tenant-a", state); !errors.Is(err, sealer.ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
	})
}
