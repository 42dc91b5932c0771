package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testBudget(limit int64) (*budget, [kinds]prometheus.Gauge) {
	var g [kinds]prometheus.Gauge
	for k := range kinds {
		g[k] = prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	}
	return newBudget(limit, g), g
}

// waitFor polls cond until it holds, failing the test past a bound far
// beyond what it needs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// waiting returns the reservations that wait for room.
func (b *budget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// TestBudget_LargeReservationsLeaveTheLastQuarter: past the small size (a
// 256th of the budget) a reservation may not take the last quarter, which
// small ones may.
func TestBudget_LargeReservationsLeaveTheLastQuarter(t *testing.T) {
	b, g := testBudget(1 << 20) // small: 4 KiB; the last quarter: 256 KiB
	large := b.reserve(kindResponse)
	if !large.tryGrow(768 << 10) {
		t.Fatal("a large reservation of three quarters of an empty budget: refused, want it taken")
	}
	if other := b.reserve(kindResponse); other.tryGrow(8 << 10) {
		t.Error("a second large reservation in the last quarter: taken, want it refused")
	}
	var small []*reservation
	for range 64 {
		r := b.reserve(kindRequest)
		if !r.tryGrow(4 << 10) {
			t.Fatalf("small reservation %d in the last quarter: refused, want it taken", len(small)+1)
		}
		small = append(small, r)
	}
	if r := b.reserve(kindRequest); r.tryGrow(1) {
		t.Error("a reservation in a full budget: taken, want it refused")
	}
	if got, want := testutil.ToFloat64(g[kindRequest]), float64(256<<10); got != want {
		t.Errorf("request gauge: got %v, want %v", got, want)
	}
	if got, want := testutil.ToFloat64(g[kindResponse]), float64(768<<10); got != want {
		t.Errorf("response gauge: got %v, want %v", got, want)
	}
	for _, r := range small {
		r.release()
	}
	large.release()
	if got := b.Load(); got != 0 {
		t.Errorf("released: got %d bytes in use, want 0", got)
	}
}

// TestBudget_WaitsForRoomInTurn: an answer that finds no room waits for it,
// the large ones in turn, while a small one goes ahead; past its wait it
// gets errBufferFull, and at once when it could never fit.
func TestBudget_WaitsForRoomInTurn(t *testing.T) {
	b, _ := testBudget(1 << 20)
	ctx := context.Background()
	holder := b.reserve(kindResponse)
	if err := holder.grow(ctx, 600<<10, 0); err != nil {
		t.Fatal(err)
	}
	first, second := b.reserve(kindResponse), b.reserve(kindResponse)
	admitted := make(chan *reservation, 2)
	go func() {
		if first.grow(ctx, 500<<10, time.Minute) == nil {
			admitted <- first
		}
	}()
	waitFor(t, "the first to wait", func() bool { return b.waiting() == 1 })
	go func() {
		if second.grow(ctx, 100<<10, time.Minute) == nil {
			admitted <- second
		}
	}()
	waitFor(t, "the second to wait", func() bool { return b.waiting() == 2 })
	// The second would fit, but waits for the first: large ones in turn.
	if small := b.reserve(kindRequest); !small.tryGrow(4 << 10) {
		t.Error("a small reservation while large ones wait: refused, want it taken")
	} else {
		small.release()
	}
	if err := b.reserve(kindResponse).grow(ctx, 800<<10, time.Minute); !errors.Is(err, errBufferFull) {
		t.Errorf("a reservation past three quarters of the budget: got %v, want errBufferFull at once", err)
	}
	if err := b.reserve(kindResponse).grow(ctx, 300<<10, time.Millisecond); !errors.Is(err, errBufferFull) {
		t.Errorf("a reservation past its wait: got %v, want errBufferFull", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.reserve(kindResponse).grow(cancelled, 300<<10, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("a reservation whose client left: got %v, want context.Canceled", err)
	}
	if b.waiting() != 2 {
		t.Errorf("%d reservations wait, want the two large ones", b.waiting())
	}
	holder.release()
	got := map[*reservation]bool{<-admitted: true, <-admitted: true}
	if !got[first] || !got[second] {
		t.Error("the large reservations were not both admitted once there was room")
	}
	if got, want := b.Load(), int64(600<<10); got != want {
		t.Errorf("got %d bytes in use, want %d", got, want)
	}
}

// TestBudget_SmallOnesThatWaitToGrowHoldAnEighthAtMost: reservations that
// grew to the small size and wait to grow past it are let wait only while
// they hold at most an eighth of the budget, so that small ones keep room.
func TestBudget_SmallOnesThatWaitToGrowHoldAnEighthAtMost(t *testing.T) {
	b, _ := testBudget(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	full := b.reserve(kindResponse)
	if err := full.grow(ctx, 768<<10, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 64)
	parked := 0
	for range 64 {
		r := b.reserve(kindResponse)
		if err := r.grow(ctx, 4<<10, 0); err != nil {
			break // the last quarter is full
		}
		go func() { done <- r.grow(ctx, 4<<10, time.Minute) }()
		parked++
		waitFor(t, "a reservation to wait or be refused", func() bool { return b.waiting() == parked || len(done) > 0 })
		if len(done) > 0 {
			break // refused at once: an eighth is parked
		}
	}
	if err := <-done; !errors.Is(err, errBufferFull) {
		t.Fatalf("got %v, want errBufferFull", err)
	}
	if got, max := b.waiting(), (128<<10)/(4<<10); got > max {
		t.Errorf("%d reservations of 4 KiB wait to grow, want at most %d (an eighth of the budget)", got, max)
	}
	if r := b.reserve(kindRequest); !r.tryGrow(4 << 10) {
		t.Error("a small reservation beside those that wait: refused, want it taken")
	}
}
