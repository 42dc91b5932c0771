package proxy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A budget bounds the bytes the proxy holds at once (MaxBufferedBytes):
// the request bodies it reads, the copies of them it forwards, the answers
// it reads to seal a state and the SSE events it rewrites, with the copies
// made while it judges and seals them (budget_room.go), each reserved
// before it is held and given back as soon as it is written or dropped, so
// that memory is bounded by the budget however many readers are slow.
//
// A reservation of at most small bytes may take any room left. A larger one
// may not take the last quarter of the budget, which thus stays for the
// small answers of other clients while slow readers hold the rest; and a
// reservation that grew to its small size and must wait to grow past it
// waits only while those that wait so hold at most an eighth of the
// budget, so that small ones keep at least that eighth.
//
// Request bodies are reserved without waiting (503 when there is no room);
// an answer waits for room up to a bound, the large ones in turn, and a
// small one may go ahead of large ones that wait.
type budget struct {
	limit, small int64
	gauges       [kinds]prometheus.Gauge // by kind: the bytes in use

	mu      sync.Mutex
	used    int64
	parked  int64 // held by small reservations waiting to grow large
	waiters []*waiter
}

// kind is what a reservation holds, a label of sealer_proxy_buffered_bytes.
type kind int

const (
	kindRequest kind = iota
	kindResponse
	kinds
)

var kindNames = [kinds]string{"request", "response"}

// errBufferFull is an answer that found no room in the budget in time.
var errBufferFull = errors.New("proxy: no room in the buffered-bytes budget (max-buffered-bytes) for the upstream's answer")

func newBudget(limit int64, gauges [kinds]prometheus.Gauge) *budget {
	return &budget{limit: limit, small: limit / 256, gauges: gauges}
}

// Load returns the bytes in use.
func (b *budget) Load() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// A reservation is the bytes one holder holds. Its methods are safe on a
// nil reservation, which counts nothing (the eventReader's unit tests).
type reservation struct {
	b    *budget
	kind kind
	n    int64 // under b.mu
}

type waiter struct {
	r        *reservation
	n        int64
	parked   int64 // r.n while it waits, when small
	ready    chan struct{}
	admitted bool
}

func (b *budget) reserve(k kind) *reservation { return &reservation{b: b, kind: k} }

// large reports whether r, grown by n, may not take the last quarter.
func (b *budget) large(r *reservation, n int64) bool { return r.n+n > b.small }

// fits reports whether n more bytes for r fit now.
func (b *budget) fits(r *reservation, n int64) bool {
	room := b.limit - b.used
	if b.large(r, n) {
		room -= b.limit / 4
	}
	return n <= room
}

// now reports whether r may grow by n at once: it fits, and, when large,
// no large reservation waits before it.
func (b *budget) now(r *reservation, n int64) bool {
	return b.fits(r, n) && (!b.large(r, n) || !b.largeWaiting())
}

func (b *budget) largeWaiting() bool {
	for _, w := range b.waiters {
		if b.large(w.r, w.n) {
			return true
		}
	}
	return false
}

func (b *budget) add(r *reservation, n int64) {
	b.used += n
	r.n += n
	b.gauges[r.kind].Add(float64(n))
}

// tryGrow reserves n more bytes for r if they fit now.
func (r *reservation) tryGrow(n int64) bool {
	if r == nil || n <= 0 {
		return true
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.now(r, n) {
		return false
	}
	b.add(r, n)
	return true
}

// grow reserves n more bytes for r, waiting up to wait for room, or until
// ctx is done. It returns errBufferFull when there was none in time, or at
// once when r grown by n could never fit.
func (r *reservation) grow(ctx context.Context, n int64, wait time.Duration) error {
	if r == nil || n <= 0 {
		return nil
	}
	b := r.b
	b.mu.Lock()
	if b.now(r, n) {
		b.add(r, n)
		b.mu.Unlock()
		return nil
	}
	w := &waiter{r: r, n: n, ready: make(chan struct{})}
	if !b.large(r, 0) {
		w.parked = r.n
	}
	if wait <= 0 || (b.large(r, n) && r.n+n > b.limit-b.limit/4) || b.parked+w.parked > b.limit/8 {
		b.mu.Unlock()
		return errBufferFull
	}
	b.waiters = append(b.waiters, w)
	b.parked += w.parked
	b.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-t.C:
		err = errBufferFull
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.admitted {
		return nil // admitted as it gave up: it holds the bytes all the same
	}
	for i, v := range b.waiters {
		if v == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.parked -= w.parked
	b.wake() // a large one it held back may fit
	return err
}

// wake admits the waiters that fit, the large ones in turn: past the first
// large one that does not fit, only small ones. Called with b.mu held.
func (b *budget) wake() {
	blocked := false
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		large := b.large(w.r, w.n)
		if (large && blocked) || !b.fits(w.r, w.n) {
			blocked = blocked || large
			kept = append(kept, w)
			continue
		}
		b.parked -= w.parked
		b.add(w.r, w.n)
		w.admitted = true
		close(w.ready)
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
}

// shrink gives back n of the bytes r holds (all of them, at most).
func (r *reservation) shrink(n int64) {
	if r == nil || n <= 0 {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, r.n)
	b.used -= n
	r.n -= n
	b.gauges[r.kind].Sub(float64(n))
	if len(b.waiters) > 0 {
		b.wake()
	}
}

// resize makes r hold n bytes: it gives back what it holds beyond them, or
// reserves the difference if it fits now.
func (r *reservation) resize(n int64) bool {
	if r == nil {
		return true
	}
	r.b.mu.Lock()
	held := r.n
	r.b.mu.Unlock()
	if n <= held {
		r.shrink(held - n)
		return true
	}
	return r.tryGrow(n - held)
}

// release gives back every byte r holds.
func (r *reservation) release() {
	if r == nil {
		return
	}
	r.shrink(r.held())
}

// held returns the bytes r holds.
func (r *reservation) held() int64 {
	if r == nil {
		return 0
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.n
}
