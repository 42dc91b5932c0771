package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// runOutcomes is the part of the suite for a ledger.Recorder: recorded
// outcomes of one-time states and of flows' rounds (FORMAT.md, "Recorded
// outcomes"). It runs only for a subject whose Ledger is one.
func runOutcomes(t *testing.T, newSubject func(t *testing.T) Subject) {
	if _, ok := newSubject(t).Ledger.(ledger.Recorder); !ok {
		return
	}
	ctx := context.Background()
	until := func() time.Time { return time.Now().Add(time.Minute) }
	const wait = time.Minute
	recorder := func(t *testing.T) (Subject, ledger.Recorder) {
		s := newSubject(t)
		return s, s.Ledger.(ledger.Recorder)
	}
	kinds := []struct {
		name  string
		fresh func() ledger.Entry
	}{
		{"state", func() ledger.Entry { return ledger.Entry{ID: newID()} }},
		{"flow", func() ledger.Entry { return ledger.Entry{Flow: newFlow(), Round: 2} }},
	}
	for _, kind := range kinds {
		name, e := kind.name, kind.fresh()
		t.Run("R6 "+name+": a claim wins once, pending until recorded, then its outcome", func(t *testing.T) {
			_, r := recorder(t)
			if err := r.Claim(ctx, "t", e, until(), wait); err != nil {
				t.Fatalf("claim: got %v, want nil", err)
			}
			if err := r.Claim(ctx, "t", e, until(), wait); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("claim again: got %v, want ErrConsumed", err)
			}
			if err := consumeWithoutClaim(ctx, r, e); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("consume of the claimed entry: got %v, want ErrConsumed", err)
			}
			if _, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrPending) {
				t.Fatalf("outcome before the record: got %v, want ErrPending", err)
			}
			if err := r.Record(ctx, "t", e, []byte("answer")); err != nil {
				t.Fatalf("record: got %v, want nil", err)
			}
			wantOutcome(t, r, "t", e, "answer")
			if err := r.Record(ctx, "t", e, []byte("another")); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("second record: got %v, want ErrConsumed", err)
			}
			if err := r.Record(ctx, "t", e, nil); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("empty record after one: got %v, want ErrConsumed", err)
			}
			wantOutcome(t, r, "t", e, "answer")
		})

		t.Run(name+": an empty record says none will come", func(t *testing.T) {
			_, r := recorder(t)
			if err := r.Claim(ctx, "t", e, until(), wait); err != nil {
				t.Fatal(err)
			}
			if err := r.Record(ctx, "t", e, nil); err != nil {
				t.Fatalf("empty record: got %v, want nil", err)
			}
			if _, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("outcome: got %v, want ErrConsumed", err)
			}
			if err := r.Record(ctx, "t", e, []byte("late")); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("record after the empty one: got %v, want ErrConsumed", err)
			}
		})

		t.Run(name+": consumed without a claim, no outcome comes", func(t *testing.T) {
			_, r := recorder(t)
			if err := consumeWithoutClaim(ctx, r, e); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("outcome: got %v, want ErrConsumed", err)
			}
			if err := r.Record(ctx, "t", e, []byte("answer")); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("record: got %v, want ErrConsumed", err)
			}
			if err := r.Claim(ctx, "t", e, until(), wait); !errors.Is(err, ledger.ErrConsumed) {
				t.Fatalf("claim: got %v, want ErrConsumed", err)
			}
		})

		t.Run(name+": no entry is gone", func(t *testing.T) {
			_, r := recorder(t)
			if _, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrGone) {
				t.Fatalf("outcome: got %v, want ErrGone", err)
			}
			if err := r.Record(ctx, "t", e, []byte("answer")); !errors.Is(err, ledger.ErrGone) {
				t.Fatalf("record: got %v, want ErrGone", err)
			}
			if err := r.Claim(ctx, "t", e, until(), wait); err != nil {
				t.Fatalf("claim after them: got %v, want nil (they recorded nothing)", err)
			}
		})

		t.Run(name+": a pending claim is consumed once its wait is over, and still recorded", func(t *testing.T) {
			_, r := recorder(t)
			if err := r.Claim(ctx, "t", e, until(), 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				_, err := r.Outcome(ctx, "t", e)
				if errors.Is(err, ledger.ErrConsumed) {
					break
				}
				if !errors.Is(err, ledger.ErrPending) {
					t.Fatalf("outcome while waiting: got %v, want ErrPending, then ErrConsumed", err)
				}
				if time.Now().After(deadline) {
					t.Fatal("a claim with a wait of 300 ms was still pending after 30 s")
				}
			}
			if err := r.Record(ctx, "t", e, []byte("slow answer")); err != nil {
				t.Fatalf("record after the wait: got %v, want nil", err)
			}
			wantOutcome(t, r, "t", e, "slow answer")
		})

		t.Run(name+": outcomes are per tenant", func(t *testing.T) {
			_, r := recorder(t)
			if err := r.Claim(ctx, "a", e, until(), wait); err != nil {
				t.Fatal(err)
			}
			if err := r.Record(ctx, "a", e, []byte("for a")); err != nil {
				t.Fatal(err)
			}
			for _, tenant := range []string{"b", "ab"} {
				if got, err := r.Outcome(ctx, tenant, e); !errors.Is(err, ledger.ErrGone) {
					t.Fatalf("tenant %q: got %q, %v, want ErrGone", tenant, got, err)
				}
				if err := r.Record(ctx, tenant, e, []byte("forged")); !errors.Is(err, ledger.ErrGone) {
					t.Fatalf("tenant %q: record got %v, want ErrGone", tenant, err)
				}
			}
			if err := r.Claim(ctx, "b", e, until(), wait); err != nil {
				t.Fatalf("tenant b's own claim: got %v, want nil", err)
			}
			if got, err := r.Outcome(ctx, "b", e); !errors.Is(err, ledger.ErrPending) {
				t.Fatalf("tenant b: got %q, %v, want ErrPending", got, err)
			}
			wantOutcome(t, r, "a", e, "for a")
		})

		t.Run("R6 "+name+": concurrent claims of one entry: exactly one wins", func(t *testing.T) {
			_, r := recorder(t)
			const n = 32
			for range 5 {
				e := kind.fresh()
				var wins, refused atomic.Int32
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range n {
					wg.Go(func() {
						<-start
						switch err := r.Claim(ctx, "t", e, until(), wait); {
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

		t.Run(name+": a 64 KiB outcome comes back whole", func(t *testing.T) {
			_, r := recorder(t)
			big := make([]byte, 64<<10)
			for i := range big {
				big[i] = byte(i * 7) // every byte value, NUL and digits among them
			}
			if err := r.Claim(ctx, "t", e, until(), wait); err != nil {
				t.Fatal(err)
			}
			if err := r.Record(ctx, "t", e, big); err != nil {
				t.Fatal(err)
			}
			got, err := r.Outcome(ctx, "t", e)
			if err != nil || !bytes.Equal(got, big) {
				t.Fatalf("got %d bytes, %v; want the 64 KiB recorded", len(got), err)
			}
		})
	}

	t.Run("R7 an outcome lives as long as its entry", func(t *testing.T) {
		s, r := recorder(t)
		short := time.Now().Add(2 * time.Second)
		es := map[string]ledger.Entry{}
		for _, kind := range kinds {
			e := kind.fresh()
			es[kind.name] = e
			if err := r.Claim(ctx, "t", e, short, wait); err != nil {
				t.Fatal(err)
			}
			if err := r.Record(ctx, "t", e, []byte("answer")); err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, r, "t", e, "answer")
		}
		s.Expire(t, short)
		for name, e := range es {
			if got, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrGone) {
				t.Fatalf("%s after its until: got %q, %v, want ErrGone", name, got, err)
			}
			if err := r.Record(ctx, "t", e, []byte("late")); !errors.Is(err, ledger.ErrGone) {
				t.Fatalf("%s: record after its until: got %v, want ErrGone", name, err)
			}
		}
	})

	t.Run("R9 flows: an outcome is its round's, dropped when the flow moves on", func(t *testing.T) {
		_, r := recorder(t)
		f := newFlow()
		at := func(round uint32) ledger.Entry { return ledger.Entry{Flow: f, Round: round} }
		if err := r.Advance(ctx, "t", f, 1, until()); err != nil {
			t.Fatal(err)
		}
		if err := r.Claim(ctx, "t", at(1), until(), wait); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("claim of the round opened: got %v, want ErrConsumed", err)
		}
		if err := r.Claim(ctx, "t", at(2), until(), wait); err != nil {
			t.Fatalf("claim of round 2: got %v, want nil", err)
		}
		if err := r.Record(ctx, "t", at(2), []byte("round 2")); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, r, "t", at(2), "round 2")
		if _, err := r.Outcome(ctx, "t", at(1)); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("round 1 after round 2: got %v, want ErrConsumed", err)
		}
		if err := r.Record(ctx, "t", at(1), []byte("round 1")); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("record of round 1 after round 2: got %v, want ErrConsumed", err)
		}
		if err := r.Advance(ctx, "t", f, 3, until()); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Outcome(ctx, "t", at(2)); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("round 2 after round 3: got %v, want ErrConsumed", err)
		}
		if err := r.Record(ctx, "t", at(2), []byte("round 2")); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("record of round 2 after round 3: got %v, want ErrConsumed", err)
		}
		if _, err := r.Outcome(ctx, "t", at(3)); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("round 3, advanced without a claim: got %v, want ErrConsumed", err)
		}
		if _, err := r.Outcome(ctx, "t", at(4)); !errors.Is(err, ledger.ErrGone) {
			t.Fatalf("round 4, above the flow's: got %v, want ErrGone", err)
		}
		if err := r.Claim(ctx, "t", at(4), until(), wait); err != nil {
			t.Fatalf("claim of round 4: got %v, want nil", err)
		}
		if _, err := r.Outcome(ctx, "t", at(4)); !errors.Is(err, ledger.ErrPending) {
			t.Fatalf("round 4 claimed: got %v, want ErrPending", err)
		}
		if err := r.Advance(ctx, "t", f, 4, until()); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("advance to the claimed round: got %v, want ErrConsumed", err)
		}
	})

	t.Run("R9 flows: a claim and a state's entry are apart", func(t *testing.T) {
		_, r := recorder(t)
		f := newFlow()
		flow, state := ledger.Entry{Flow: f, Round: 1}, ledger.Entry{ID: sealer.StateID(f)}
		for _, e := range []ledger.Entry{flow, state} {
			if err := r.Claim(ctx, "t", e, until(), wait); err != nil {
				t.Fatalf("claim %+v: got %v, want nil", e, err)
			}
		}
		if err := r.Record(ctx, "t", flow, []byte("flow")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Outcome(ctx, "t", state); !errors.Is(err, ledger.ErrPending) {
			t.Fatalf("the state whose id is the flow's: got %v, want ErrPending", err)
		}
		wantOutcome(t, r, "t", flow, "flow")
	})
}

// consumeWithoutClaim consumes e without a claim: Consume or Advance.
func consumeWithoutClaim(ctx context.Context, r ledger.Recorder, e ledger.Entry) error {
	until := time.Now().Add(time.Minute)
	if e.Round == 0 {
		return r.Consume(ctx, "t", e.ID, until)
	}
	return r.Advance(ctx, "t", e.Flow, e.Round, until)
}

// wantOutcome fails t unless e of tenant has the outcome want.
func wantOutcome(t *testing.T, r ledger.Recorder, tenant string, e ledger.Entry, want string) {
	t.Helper()
	got, err := r.Outcome(context.Background(), tenant, e)
	if err != nil || string(got) != want {
		t.Fatalf("outcome: got %q, %v, want %q", got, err, want)
	}
}
