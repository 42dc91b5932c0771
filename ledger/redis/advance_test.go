package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testredis"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// flowKeyT is the key of flow {f} of tenant t, as docs/OPERATIONS.md names it.
func flowKeyT(f byte) string {
	return fmt.Sprintf("sealer:v1:flow:1:t:%02x%030d", f, 0)
}

// TestRedis_AdvanceValues pins what an advance leaves in Redis, step by
// step on one flow: the round, bare, as the value; the expiry at the until
// given, or a later one the entry already had (never shortened); nothing
// changed by a refused advance.
func TestRedis_AdvanceValues(t *testing.T) {
	srv := testredis.Start(t, false)
	r := newRedis(t, srv.URL())
	admin := srv.Client(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tc := range []struct {
		name      string
		round     uint32
		until     time.Time
		err       error
		value     string
		expiresAt time.Time
	}{
		{"first round", 3, at(time.Minute), nil, "3", at(time.Minute)},
		{"a higher round, a later until", 4, at(2 * time.Minute), nil, "4", at(2 * time.Minute)},
		{"a higher round, an earlier until: the later stays", 5, at(time.Minute), nil, "5", at(2 * time.Minute)},
		{"the same round", 5, at(3 * time.Minute), ledger.ErrConsumed, "5", at(2 * time.Minute)},
		{"a lower round", 2, at(3 * time.Minute), ledger.ErrConsumed, "5", at(2 * time.Minute)},
		{"until passed", 6, at(-time.Millisecond), ledger.ErrTooLate, "5", at(2 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Advance(ctx, "t", sealer.FlowID{1}, tc.round, tc.until)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("advance to %d: got %v, want %v", tc.round, err, tc.err)
			}
			if v, err := admin.Get(ctx, flowKeyT(1)).Result(); err != nil || v != tc.value {
				t.Errorf("value: got %q, %v; want %q", v, err, tc.value)
			}
			if got := admin.PExpireTime(ctx, flowKeyT(1)).Val().Milliseconds(); got != tc.expiresAt.UnixMilli() {
				t.Errorf("expires at %d, want %d", got, tc.expiresAt.UnixMilli())
			}
		})
	}
}

// TestRedis_Replicas_AdvanceUndone: with Replicas 1 and the replica gone,
// an advance is refused and undone on the primary: a flow without a round
// is deleted, a flow at a round goes back to it, bare, with the expiry the
// advance gave it (never shortened).
// Once the replica is back, the same advance wins.
func TestRedis_Replicas_AdvanceUndone(t *testing.T) {
	primary, replica, r := withReplica(t, aclUser("~sealer:v1:flow:*", "+get", "+pttl", "+wait", "+del")...)
	admin := primary.Client(t)
	ctx := context.Background()
	fresh, atThree := sealer.FlowID{1}, sealer.FlowID{2}
	kept := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := r.Claim(ctx, "t", ledger.Entry{Flow: atThree, Round: 3}, kept, time.Minute); err != nil {
		t.Fatalf("round 3 with the replica up: %v", err)
	}

	replica.Stop(t)
	until := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	for _, tc := range []struct {
		name      string
		flow      sealer.FlowID
		value     string // "" for no key
		expiresAt int64
	}{
		{"a flow without a round is deleted", fresh, "", 0},
		{"a flow at round 3 goes back to it, without its claim", atThree, "3", until.UnixMilli()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.Advance(ctx, "t", tc.flow, 4, until); !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 replicas") {
				t.Fatalf("advance, replica stopped: got %v, want ErrUnavailable: 0 of 1 replicas", err)
			}
			key := flowKeyT(tc.flow[0])
			v, err := admin.Get(ctx, key).Result()
			if tc.value == "" {
				if err == nil {
					t.Fatalf("the undone advance left %q", v)
				}
				return
			}
			if err != nil || v != tc.value {
				t.Fatalf("after the undo: got %q, %v; want %q", v, err, tc.value)
			}
			if got := admin.PExpireTime(ctx, key).Val().Milliseconds(); got != tc.expiresAt {
				t.Errorf("after the undo, expires at %d, want %d, the advance's", got, tc.expiresAt)
			}
		})
	}

	replica.Restart(t)
	testredis.WaitLinked(t, replica)
	for _, f := range []sealer.FlowID{fresh, atThree} {
		if err := r.Advance(ctx, "t", f, 4, until); err != nil {
			t.Fatalf("advance of %x with the replica back: %v", f[0], err)
		}
	}
}
