package embedded_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/embedded"
	"github.com/mcp-sealer/sealer/sealer"
)

// When the disk fills, writes are refused ErrUnavailable from the first
// that finds no room (those before it used room Pebble had set aside for
// its log) for as long as it stays full, every win stays consumed, and
// once there is room again the ledger reopens itself and takes writes.
func TestEmbedded_DiskFull_RefusesThenHeals(t *testing.T) {
	dir := testenv.Tmpfs(t, 32<<20)
	l := open(t, filepath.Join(dir, "ledger"))
	ctx, until := context.Background(), time.Now().Add(time.Hour)
	before := sealer.StateID{1}
	if err := l.Consume(ctx, "t", before, until); err != nil {
		t.Fatal(err)
	}
	filler := testenv.Fill(t, dir)
	var won []sealer.StateID
	refused := 0
	for i := 0; refused < 100; i++ {
		if i == 1_000_000 {
			t.Fatalf("%d consumes on a full disk, none refused", i)
		}
		id := sealer.StateID{2, byte(i), byte(i >> 8), byte(i >> 16)}
		switch err := l.Consume(ctx, "t", id, until); {
		case err == nil && refused > 0:
			t.Fatalf("consume %d on a full disk, after a refusal: a win", i)
		case err == nil:
			won = append(won, id)
		case errors.Is(err, ledger.ErrUnavailable):
			refused++
		default:
			t.Fatalf("consume %d on a full disk: got %v, want ErrUnavailable", i, err)
		}
	}
	if l.Err() == nil {
		t.Error("Err is nil on a full disk")
	}
	if err := l.Consume(ctx, "t", before, until); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a consumed state on a full disk: got %v, want ErrUnavailable", err)
	}
	// The ledger tries to reopen itself once a second: with the disk still
	// full it must go on refusing, and never end the process (Pebble ends
	// it when it cannot write its manifest).
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := l.Consume(ctx, "t", sealer.StateID{4}, until); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a consume while the disk stays full: got %v, want ErrUnavailable", err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = l.Consume(ctx, "t", sealer.StateID{3}, until); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("with room again: got %v for 30 s, want the ledger healed (it reopens itself once a second)", err)
	}
	for _, id := range append(won, before) {
		if err := l.Consume(ctx, "t", id, until); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("a state consumed before the refusals: got %v, want ErrConsumed", err)
		}
	}
	t.Logf("on the full disk: %d consumes won in room set aside, then %d refused; healed, every win still consumed", len(won), refused)
}

// On a file system without room the store is not opened: a clear error,
// where Pebble would open it and then end the process when it could not
// write its manifest.
func TestEmbedded_DiskFull_NotOpenedWithoutRoom(t *testing.T) {
	dir := testenv.Tmpfs(t, 16<<20)
	testenv.Fill(t, dir)
	l, err := embedded.Open(filepath.Join(dir, "ledger"), nil)
	if err == nil {
		l.Close()
		t.Fatal("opened on a full disk")
	}
	if !strings.Contains(err.Error(), "needed to open the store") {
		t.Fatalf("on a full disk: got %v, want how much room is needed", err)
	}
}
