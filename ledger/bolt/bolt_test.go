package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/bolt"
	"github.com/mcp-sealer/sealer/ledger/ledgertest"
	"github.com/mcp-sealer/sealer/sealer"
)

func openBolt(t *testing.T, path string) *bolt.Ledger {
	t.Helper()
	b, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestBolt_Conformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Subject {
		b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"))
		return ledgertest.Subject{
			Ledger: b,
			Expire: func(t *testing.T, until time.Time) {
				if _, err := b.Sweep(until.Add(time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			},
			Break: func(t *testing.T) { b.Close() },
		}
	})
}

func TestBolt_R6_ConsumedSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	id := sealer.StateID{1, 2, 3}
	b, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Consume(context.Background(), "t", id, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = openBolt(t, path)
	if err := b.Consume(context.Background(), "t", id, time.Now().Add(time.Hour)); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("after reopening: got %v, want ErrConsumed", err)
	}
}

func TestBolt_R7_SweepKeepsOnlyLiveEntries(t *testing.T) {
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"))
	now := time.Now()
	var wg sync.WaitGroup
	for w := range 100 {
		wg.Go(func() {
			for i := w; i < 25000; i += 100 {
				id := sealer.StateID{byte(i), byte(i >> 8), byte(i >> 16)}
				// Far enough ahead that a slow machine's consumes never
				// reach it (each is an fsync).
				until := now.Add(time.Hour)
				if i%5 == 0 {
					until = now.Add(3 * time.Hour)
				}
				if err := b.Consume(context.Background(), "t", id, until); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n, err := b.Sweep(now.Add(2 * time.Hour))
	if err != nil || n != 20000 {
		t.Fatalf("swept %d, %v; want 20000", n, err)
	}
	if left, err := b.Len(); err != nil || left != 5000 {
		t.Fatalf("left %d, %v; want 5000", left, err)
	}
}

func TestBolt_SecondProcessIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	openBolt(t, path)
	if _, err := bolt.Open(path); err == nil {
		t.Fatal("opened a ledger file held by another handle")
	}
}

func TestBolt_PreloadedStatesAreConsumed(t *testing.T) {
	b := openBolt(t, filepath.Join(t.TempDir(), "ledger.db"))
	ids := []sealer.StateID{{1}, {2}, {3}}
	now := time.Now()
	if err := b.Preload("t", ids, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := b.Consume(context.Background(), "t", id, now.Add(time.Minute)); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("preloaded %x: got %v, want ErrConsumed", id[:1], err)
		}
	}
	if n, err := b.Sweep(now.Add(2 * time.Minute)); err != nil || n != 3 {
		t.Errorf("swept %d, %v; want 3", n, err)
	}
}
