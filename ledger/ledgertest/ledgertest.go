// Package ledgertest is the conformance suite every ledger.Ledger passes,
// and every ledger.Recorder too.
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

// soon returns an until about margin ahead for which write succeeded. A
// write whose until passed before the ledger judged it is refused
// ErrUnavailable and records nothing: on a machine too slow for margin, the
// write is made again with twice the margin, up to 10 s.
func soon(t *testing.T, margin time.Duration, write func(until time.Time) error) time.Time {
	t.Helper()
	for {
		until := time.Now().Add(margin)
		err := write(until)
		switch {
		case err == nil:
			return until
		case !errors.Is(err, ledger.ErrUnavailable) || time.Now().Before(until) || margin >= 10*time.Second:
			t.Fatalf("write with its until %v ahead: %v", margin, err)
		}
		margin *= 2
	}
}

// race has n goroutines try at once, try(i) in the i-th, and counts the
// tries that won and those refused ErrConsumed; any other error fails t.
func race(t *testing.T, n int, try func(i int) error) (wins, refused int32) {
	var won, lost atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			switch err := try(i); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, ledger.ErrConsumed):
				lost.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	return won.Load(), lost.Load()
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
		// Asked 300 ms before its until, the entry is there. An answer that
		// came back after the until proves nothing either way (the machine
		// was slow): ask again about a new entry.
		for attempt := 1; ; attempt++ {
			id := newID()
			end := soon(t, 1500*time.Millisecond, func(until time.Time) error { return s.Ledger.Consume(ctx, "t", id, until) })
			time.Sleep(time.Until(end) - 300*time.Millisecond)
			err := s.Ledger.Consume(ctx, "t", id, until())
			if errors.Is(err, ledger.ErrConsumed) {
				return
			}
			if time.Now().Before(end) {
				t.Fatalf("before its until: got %v, want ErrConsumed", err)
			}
			if attempt == 5 {
				t.Fatalf("%d attempts, each answered after the entry's until (the last %v): the machine is too slow to tell", attempt, err)
			}
		}
	})

	t.Run("R7 entries expire", func(t *testing.T) {
		s := newSubject(t)
		id, keep := newID(), newID()
		short := soon(t, 300*time.Millisecond, func(until time.Time) error { return s.Ledger.Consume(ctx, "t", id, until) })
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
			wins, refused := race(t, n, func(int) error { return s.Ledger.Consume(ctx, "t", id, until()) })
			if wins != 1 || refused != n-1 {
				t.Fatalf("got %d wins and %d refusals, want 1 and %d", wins, refused, n-1)
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

	runAdvance(t, newSubject)
	runOutcomes(t, newSubject)
}

func newFlow() sealer.FlowID { return sealer.FlowID(newID()) }

// runAdvance is the part of the suite for Advance (FORMAT.md, "Latest round
// only").
func runAdvance(t *testing.T, newSubject func(t *testing.T) Subject) {
	ctx := context.Background()
	until := func() time.Time { return time.Now().Add(time.Minute) }

	t.Run("R9 flows: only a round above every round opened wins", func(t *testing.T) {
		s := newSubject(t)
		f := newFlow()
		steps := []struct {
			round uint32
			wins  bool
		}{{1, true}, {1, false}, {2, true}, {1, false}, {2, false}, {5, true}, {3, false}, {5, false}, {6, true}}
		for i, st := range steps {
			err := s.Ledger.Advance(ctx, "t", f, st.round, until())
			if st.wins && err != nil || !st.wins && !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("step %d, round %d: got %v, want win %v", i, st.round, err, st.wins)
			}
		}
	})

	t.Run("R9 flows are per tenant and apart from state ids", func(t *testing.T) {
		s := newSubject(t)
		f := newFlow()
		for _, tenant := range []string{"a", "b", "ab"} {
			if err := s.Ledger.Advance(ctx, tenant, f, 1, until()); err != nil {
				t.Fatalf("tenant %s: got %v, want nil", tenant, err)
			}
		}
		if err := s.Ledger.Consume(ctx, "a", sealer.StateID(f), until()); err != nil {
			t.Fatalf("consume of a state id equal to a flow id: got %v, want nil", err)
		}
		g := newFlow()
		if err := s.Ledger.Consume(ctx, "a", sealer.StateID(g), until()); err != nil {
			t.Fatal(err)
		}
		if err := s.Ledger.Advance(ctx, "a", g, 1, until()); err != nil {
			t.Fatalf("advance of a flow id equal to a consumed state id: got %v, want nil", err)
		}
	})

	t.Run("R9 flows: a past until is never a win", func(t *testing.T) {
		s := newSubject(t)
		f := newFlow()
		if err := s.Ledger.Advance(ctx, "t", f, 1, time.Now().Add(-time.Millisecond)); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		if err := s.Ledger.Advance(ctx, "t", f, 1, until()); err != nil {
			t.Fatalf("after a refused advance: got %v, want nil (nothing was recorded)", err)
		}
	})

	t.Run("R7 flow entries expire", func(t *testing.T) {
		s := newSubject(t)
		f, keep := newFlow(), newFlow()
		short := soon(t, 300*time.Millisecond, func(until time.Time) error { return s.Ledger.Advance(ctx, "t", f, 3, until) })
		if err := s.Ledger.Advance(ctx, "t", keep, 3, until()); err != nil {
			t.Fatal(err)
		}
		s.Expire(t, short)
		if err := s.Ledger.Advance(ctx, "t", f, 1, until()); err != nil {
			t.Fatalf("after expiry: got %v, want the entry gone", err)
		}
		if err := s.Ledger.Advance(ctx, "t", keep, 2, until()); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("live flow after expiry of another: got %v, want ErrConsumed", err)
		}
	})

	t.Run("R7 a flow entry lives until the latest until it was given", func(t *testing.T) {
		s := newSubject(t)
		f := newFlow()
		if err := s.Ledger.Advance(ctx, "t", f, 1, until()); err != nil {
			t.Fatal(err)
		}
		short := soon(t, 300*time.Millisecond, func(until time.Time) error { return s.Ledger.Advance(ctx, "t", f, 2, until) })
		s.Expire(t, short)
		if err := s.Ledger.Advance(ctx, "t", f, 2, until()); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("round 2 again after the shorter until passed: got %v, want ErrConsumed (the entry lives until the longer)", err)
		}
	})

	t.Run("R9 concurrent opens of one flow: exactly one wins per round", func(t *testing.T) {
		s := newSubject(t)
		const n = 32
		for range 5 {
			f := newFlow()
			// Half open round 2, half round 1: round 2 wins once, and round 1
			// at most once, and only before round 2.
			w, refused := race(t, n, func(i int) error { return s.Ledger.Advance(ctx, "t", f, uint32(2-i%2), until()) })
			if w < 1 || w > 2 || refused != n-w {
				t.Fatalf("got %d wins and %d refusals, want 1 or 2 wins (round 1 before round 2) and the rest refused", w, refused)
			}
			if err := s.Ledger.Advance(ctx, "t", f, 2, until()); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("round 2 after the race: got %v, want ErrConsumed", err)
			}
		}
	})

	t.Run("flows: errors are unavailability, never a win", func(t *testing.T) {
		s := newSubject(t)
		s.Break(t)
		if err := s.Ledger.Advance(ctx, "t", newFlow(), 1, until()); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("broken ledger: got %v, want ErrUnavailable", err)
		}
	})
}
