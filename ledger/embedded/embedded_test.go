package embedded_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/bolt"
	"github.com/mcp-sealer/sealer/ledger/embedded"
	"github.com/mcp-sealer/sealer/ledger/ledgertest"
	"github.com/mcp-sealer/sealer/sealer"
)

func open(t *testing.T, dir string) *embedded.Ledger {
	t.Helper()
	l, err := embedded.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestEmbedded_Conformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Subject {
		l := open(t, t.TempDir())
		return ledgertest.Subject{
			Ledger: l,
			// A sweep at a time to come would refuse the consumes after
			// it (ClockBehind): wait for the wall clock, which the ledger
			// reads, to pass until in whole milliseconds, then sweep. The
			// monotonic clock time.Now().After compares is not the one
			// the ledger keeps, and the two drift apart when the wall
			// clock is adjusted.
			Expire: func(t *testing.T, until time.Time) {
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					now := time.Now()
					if now.UnixMilli() > until.UnixMilli() {
						if _, err := l.Sweep(now); err != nil {
							t.Fatal(err)
						}
						return
					}
					if now.After(deadline) {
						t.Fatalf("the wall clock did not pass %v within 30s: %v", until.Round(0), now.Round(0))
					}
				}
			},
			Break: func(t *testing.T) { l.Close() },
		}
	})
}

func TestEmbedded_R6_ConsumedAndAdvancedSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, until := context.Background(), time.Now().Add(time.Hour)
	id, flow := sealer.StateID{1, 2, 3}, sealer.FlowID{4, 5, 6}
	l, err := embedded.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Consume(ctx, "t", id, until); err != nil {
		t.Fatal(err)
	}
	if err := l.Advance(ctx, "t", flow, 3, until); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, dir)
	if err := l.Consume(ctx, "t", id, until); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("consume after reopening: got %v, want ErrConsumed", err)
	}
	if err := l.Advance(ctx, "t", flow, 3, until); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("round 3 after reopening: got %v, want ErrConsumed", err)
	}
	if err := l.Advance(ctx, "t", flow, 4, until); err != nil {
		t.Errorf("round 4 after reopening: got %v, want nil", err)
	}
}

func TestEmbedded_R7_SweepKeepsOnlyLiveEntries(t *testing.T) {
	l := open(t, t.TempDir())
	now := time.Now()
	var wg sync.WaitGroup
	for w := range 50 {
		wg.Go(func() {
			for i := w; i < 5000; i += 50 {
				id := sealer.StateID{byte(i), byte(i >> 8), byte(i >> 16)}
				// Far enough ahead that a slow machine's consumes never
				// reach it.
				until := now.Add(time.Hour)
				if i%5 == 0 {
					until = now.Add(3 * time.Hour)
				}
				var err error
				if i%2 == 0 {
					err = l.Consume(context.Background(), "t", id, until)
				} else {
					err = l.Advance(context.Background(), "t", sealer.FlowID(id), 1, until)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n, err := l.Sweep(now.Add(2 * time.Hour))
	if err != nil || n != 4000 {
		t.Fatalf("swept %d, %v; want 4000", n, err)
	}
	if left, err := l.Len(); err != nil || left != 1000 {
		t.Fatalf("left %d, %v; want 1000", left, err)
	}
	if n, err := l.Sweep(now.Add(2 * time.Hour)); err != nil || n != 0 {
		t.Fatalf("second sweep: swept %d, %v; want 0", n, err)
	}
}

// An advance that moves a flow's until past the sweep's cut keeps the
// flow, though its old index key is below the cut.
func TestEmbedded_R9_SweepKeepsAdvancedFlow(t *testing.T) {
	l := open(t, t.TempDir())
	ctx, now := context.Background(), time.Now()
	flow := sealer.FlowID{7}
	if err := l.Advance(ctx, "t", flow, 1, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := l.Advance(ctx, "t", flow, 2, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Sweep(now.Add(2 * time.Minute)); err != nil || n != 0 {
		t.Fatalf("swept %d, %v; want 0", n, err)
	}
	if n, err := l.Len(); err != nil || n != 1 {
		t.Fatalf("after the sweep: %d entries, %v; want the flow kept", n, err)
	}
}

func TestEmbedded_SecondProcessIsRefused(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	if l, err := embedded.Open(dir, nil); err == nil {
		l.Close()
		t.Fatal("opened a ledger directory held by another handle")
	}
}

// R6: the file of an earlier release's bbolt ledger
// (ledger/bolt/testdata/README.md) is imported whole: every entry, each
// with its deadline, so that every consumed state and every flow's round
// stays as it was. An entry already expired is imported like the others
// and goes at the first sweep, as it would have in the old ledger.
func TestEmbedded_R6_ImportsBoltLedger(t *testing.T) {
	const old = "../bolt/testdata/ledger.db"
	ctx, until := context.Background(), time.Now().Add(time.Hour)
	l := open(t, t.TempDir())
	for range 2 { // a second import changes nothing
		n, err := l.Import(func(put func(bool, []byte, []byte) error) error { return bolt.Each(old, put) })
		if err != nil || n != 6 {
			t.Fatalf("imported %d, %v; want 6", n, err)
		}
	}
	if n, err := l.Len(); err != nil || n != 6 {
		t.Fatalf("after the import: %d entries, %v; want 6", n, err)
	}
	for _, id := range []sealer.StateID{{1}, {2}, {3}, {4}} {
		if err := l.Consume(ctx, "tenant-a", id, until); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("imported state %x: got %v, want ErrConsumed", id[:1], err)
		}
	}
	if err := l.Advance(ctx, "tenant-b", sealer.FlowID{8}, 2, until); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("imported expired flow round 2: got %v, want ErrConsumed", err)
	}
	// A cut between the expired deadlines (2001) and the live ones (2100).
	if n, err := l.Sweep(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil || n != 2 {
		t.Fatalf("swept %d, %v; want the 2 expired entries", n, err)
	}
	if n, err := l.Len(); err != nil || n != 4 {
		t.Fatalf("after the sweep: %d entries, %v; want the 4 live ones", n, err)
	}
	for _, id := range []sealer.StateID{{1}, {2}, {3}} {
		if err := l.Consume(ctx, "tenant-a", id, until); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("after the sweep, imported state %x: got %v, want ErrConsumed", id[:1], err)
		}
	}
	if err := l.Consume(ctx, "tenant-b", sealer.StateID{1}, until); err != nil {
		t.Errorf("another tenant's state: got %v, want nil", err)
	}
	if err := l.Advance(ctx, "tenant-b", sealer.FlowID{9}, 5, until); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("imported flow round 5: got %v, want ErrConsumed", err)
	}
	if err := l.Advance(ctx, "tenant-b", sealer.FlowID{9}, 6, until); err != nil {
		t.Errorf("imported flow round 6: got %v, want nil", err)
	}
}

func TestEmbedded_ImportRefusesDamagedEntry(t *testing.T) {
	l := open(t, t.TempDir())
	for _, e := range []struct {
		flow       bool
		key, value []byte
	}{
		{false, nil, make([]byte, 8)},
		{false, []byte{5, 'a'}, make([]byte, 8)},
		{false, []byte{1, 'a', 1}, make([]byte, 12)},
		{true, []byte{1, 'a', 1}, make([]byte, 8)},
	} {
		_, err := l.Import(func(put func(bool, []byte, []byte) error) error { return put(e.flow, e.key, e.value) })
		if err == nil {
			t.Errorf("imported %+v", e)
		}
	}
}

// TestEmbedded_R6_AClockSteppedBackNeverReopensASweptState is issue 40's
// second finding: a sweep, with the clock 2 minutes ahead, deletes a
// consumed state's entry; the clock steps back, where the state is
// accepted again. The consume must be refused (fail closed), across a
// restart too, until the clock has passed the sweep's cut again.
func TestEmbedded_R6_AClockSteppedBackNeverReopensASweptState(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir)
	ctx, now := context.Background(), time.Now()
	id, flow := sealer.StateID{9}, sealer.FlowID{9}
	until := now.Add(time.Minute)
	if err := l.Consume(ctx, "t", id, until); err != nil {
		t.Fatal(err)
	}
	if err := l.Advance(ctx, "t", flow, 2, until); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Sweep(now.Add(2 * time.Minute)); err != nil || n != 2 {
		t.Fatalf("sweep 2 minutes ahead: swept %d, %v; want 2", n, err)
	}
	check := func(when string) {
		t.Helper()
		if err := l.Consume(ctx, "t", id, until); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s: consume again: got %v, want ErrUnavailable", when, err)
		}
		if err := l.Advance(ctx, "t", flow, 2, until); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s: advance to round 2 again: got %v, want ErrUnavailable", when, err)
		}
	}
	check("clock stepped back")
	l.Close()
	l = open(t, dir)
	check("clock stepped back, after a restart")
}

// TestEmbedded_ClockBehindTheHighestSweep: ClockBehind answers for any
// time before the highest cut swept, which a sweep at an earlier time
// never lowers.
func TestEmbedded_ClockBehindTheHighestSweep(t *testing.T) {
	l := open(t, t.TempDir())
	now := time.Now()
	if err := l.ClockBehind(now); err != nil {
		t.Fatalf("never swept: got %v, want nil", err)
	}
	for _, at := range []time.Duration{2 * time.Minute, time.Minute} {
		if _, err := l.Sweep(now.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		at   time.Duration
		want error
	}{
		{0, embedded.ErrClockBehind},
		{2*time.Minute - time.Millisecond, embedded.ErrClockBehind},
		{2 * time.Minute, nil},
	} {
		if got := l.ClockBehind(now.Add(tc.at)); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("ClockBehind(now+%v): got %v, want %v", tc.at, got, tc.want)
		}
	}
}

// TestEmbedded_R6_OutcomesSurviveRestart: a recorded outcome and a
// pending claim are durable: after closing and opening the store again the
// outcome comes back, and the claim still waits for its record.
func TestEmbedded_R6_OutcomesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, until := context.Background(), time.Now().Add(time.Hour)
	recorded, pending := ledger.Entry{ID: sealer.StateID{1}}, ledger.Entry{Flow: sealer.FlowID{2}, Round: 3}
	l, err := embedded.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []ledger.Entry{recorded, pending} {
		if err := l.Claim(ctx, "t", e, until, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Record(ctx, "t", recorded, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir)
	if got, err := l.Outcome(ctx, "t", recorded); err != nil || string(got) != "answer" {
		t.Errorf("outcome after reopening: got %q, %v, want answer", got, err)
	}
	if _, err := l.Outcome(ctx, "t", pending); !errors.Is(err, ledger.ErrPending) {
		t.Errorf("claim after reopening: got %v, want ErrPending", err)
	}
	if err := l.Claim(ctx, "t", pending, until, time.Hour); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("claim again after reopening: got %v, want ErrConsumed", err)
	}
	if err := l.Record(ctx, "t", pending, []byte("later")); err != nil {
		t.Errorf("record after reopening: got %v, want nil", err)
	}
}

// TestEmbedded_R7_SweepDeletesOutcomesWithTheirEntries: an outcome goes
// with its entry at its until, and a record or an advance past a claim
// keeps the entry's until, which the sweep reads from its first bytes.
func TestEmbedded_R7_SweepDeletesOutcomesWithTheirEntries(t *testing.T) {
	l := open(t, t.TempDir())
	ctx, now := context.Background(), time.Now()
	soon, late := now.Add(time.Minute), now.Add(time.Hour)
	entries := map[ledger.Entry]time.Time{
		{ID: sealer.StateID{1}}: soon, {ID: sealer.StateID{2}}: late,
		{Flow: sealer.FlowID{1}, Round: 1}: soon, {Flow: sealer.FlowID{2}, Round: 1}: late,
	}
	for e, until := range entries {
		if err := l.Claim(ctx, "t", e, until, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := l.Record(ctx, "t", e, []byte("answer")); err != nil {
			t.Fatal(err)
		}
	}
	// A later round given an earlier until: the flow lives until the later.
	if err := l.Advance(ctx, "t", sealer.FlowID{2}, 1, soon); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("round 1 again after its record: got %v, want ErrConsumed", err)
	}
	if err := l.Advance(ctx, "t", sealer.FlowID{2}, 2, soon); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Sweep(now.Add(2 * time.Minute)); err != nil || n != 2 {
		t.Fatalf("swept %d, %v; want 2", n, err)
	}
	for e, until := range entries {
		got, err := l.Outcome(ctx, "t", e)
		switch {
		case until == soon && !errors.Is(err, ledger.ErrGone):
			t.Errorf("%+v after the sweep: got %q, %v, want ErrGone", e, got, err)
		case until == late && e.Round == 0 && string(got) != "answer":
			t.Errorf("%+v after the sweep: got %q, %v, want answer", e, got, err)
		case until == late && e.Round == 1 && !errors.Is(err, ledger.ErrConsumed):
			t.Errorf("%+v after the sweep and round 2: got %q, %v, want ErrConsumed (the flow kept, at round 2)", e, got, err)
		}
	}
}
