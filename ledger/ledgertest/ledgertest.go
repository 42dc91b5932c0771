// Package ledgertest is the conformance suite every ledger.Ledger passes.
package ledgertest

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// Subject is a ledger under test with hooks the suite needs.
type Subject struct {
	// Ledger is the ledger, ready for use.
	Ledger ledger.Ledger
	// Expire makes entries whose until is at or before the given time go
	// away, the way the ledger does it by itself (a sweep, or waiting for the
	// store's own expiry).
	Expire func(t *testing.T, until time.Time)
	// Break makes the ledger unable to answer, for example by closing it or
	// stopping its server. Later calls on this subject must fail.
	Break func(t *testing.T)
}

func newID() sealer.StateID {
	var id sealer.StateID
	rand.Read(id[:])
	return id
}

// Run runs the suite. newSubject returns a fresh, working subject each call.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	ctx := context.Background()
	until := func() time.Time { return time.Now().Add(time.Minute) }

	t.Run("R6 first consume wins, second is refused", func(t *testing.T) {
		s := newSubject(t)
		id := newID()
		if err := s.Ledger.Consume(ctx, "tenant-a", id, until()); err != nil {
			t.Fatalf("first consume: got %v, want nil", err)
		}
		for range 3 {
			if err := s.Ledger.Consume(ctx, "tenant-a", id, until()); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("again: got %v, want ErrConsumed", err)
			}
		}
	})

	t.Run("ids are per tenant", func(t *testing.T) {
		s := newSubject(t)
		id := newID()
		for _, tenant := range []string{"a", "b", "ab"} {
			if err := s.Ledger.Consume(ctx, tenant, id, until()); err != nil {
				t.Fatalf("tenant %s: got %v, want nil", tenant, err)
			}
		}
	})

	t.Run("R6 a past until is never a win", func(t *testing.T) {
		s := newSubject(t)
		id := newID()
		for _, past := range []time.Time{time.Now().Add(-time.Millisecond), time.Now().Add(-time.Hour), {}} {
			if err := s.Ledger.Consume(ctx, "t", id, past); !errors.Is(err, ledger.ErrUnavailable) {
				t.Fatalf("until %v in the past: got %v, want ErrUnavailable", past, err)
			}
		}
	})

	t.Run("R6 an entry lives until its until", func(t *testing.T) {
		s := newSubject(t)
		id := newID()
		end := time.Now().Add(1500 * time.Millisecond)
		if err := s.Ledger.Consume(ctx, "t", id, end); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(end) - 300*time.Millisecond)
		if err := s.Ledger.Consume(ctx, "t", id, until()); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("300 ms before its until: got %v, want ErrConsumed", err)
		}
	})

	t.Run("R7 entries expire", func(t *testing.T) {
		s := newSubject(t)
		id, keep := newID(), newID()
		short := time.Now().Add(300 * time.Millisecond)
		if err := s.Ledger.Consume(ctx, "t", id, short); err != nil {
			t.Fatal(err)
		}
		if err := s.Ledger.Consume(ctx, "t", keep, until()); err != nil {
			t.Fatal(err)
		}
		s.Expire(t, short)
		if err := s.Ledger.Consume(ctx, "t", id, until()); err != nil {
			t.Fatalf("after expiry: got %v, want the entry gone", err)
		}
		if err := s.Ledger.Consume(ctx, "t", keep, until()); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("live entry after expiry of another: got %v, want ErrConsumed", err)
		}
	})

	t.Run("R6 concurrent consumers of one id: exactly one wins", func(t *testing.T) {
		s := newSubject(t)
		const n = 32
		for range 5 {
			id := newID()
			var wins, refused atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range n {
				wg.Go(func() {
					<-start
					switch err := s.Ledger.Consume(ctx, "t", id, until()); {
					case err == nil:
						wins.Add(1)
					case errors.Is(err, ledger.ErrConsumed):
						refused.Add(1)
					default:
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			if wins.Load() != 1 || refused.Load() != n-1 {
				t.Fatalf("got %d wins and %d refusals, want 1 and %d", wins.Load(), refused.Load(), n-1)
			}
		}
	})

	t.Run("errors are unavailability, never a win", func(t *testing.T) {
		s := newSubject(t)
		s.Break(t)
		err := s.Ledger.Consume(ctx, "t", newID(), until())
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("broken ledger: got %v, want ErrUnavailable", err)
		}
	})

	t.Run("cancelled context is unavailability", func(t *testing.T) {
		s := newSubject(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Ledger.Consume(cctx, "t", newID(), until()); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
}
