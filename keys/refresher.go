package keys

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Refresher keeps the current ring of a Source: it loads at an interval,
// publishes each changed ring atomically, and keeps the last good ring when
// the source fails, so that a source outage costs freshness, not service.
// Readers call Ring, which never blocks.
type Refresher struct {
	source   Source
	interval time.Duration
	// minGap rate-limits Demand.
	minGap time.Duration
	report func(error)

	ring      atomic.Pointer[Ring]
	lastGood  atomic.Int64 // Unix nanoseconds of the last successful load
	errors    atomic.Uint64
	mu        sync.Mutex // one load at a time
	lastTried time.Time  // guarded by mu
}

// NewRefresher returns a refresher of source polling at interval. report, if
// not nil, receives every failed load.
func NewRefresher(source Source, interval time.Duration, report func(error)) *Refresher {
	if report == nil {
		report = func(error) {}
	}
	return &Refresher{source: source, interval: interval, minGap: time.Second, report: report}
}

// Ring returns the current ring, or nil before the first successful load.
func (r *Refresher) Ring() *Ring { return r.ring.Load() }

// LastGood returns when the ring was last loaded successfully (zero before).
func (r *Refresher) LastGood() time.Time {
	if n := r.lastGood.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Errors returns how many loads failed.
func (r *Refresher) Errors() uint64 { return r.errors.Load() }

// Refresh loads the ring now and publishes it if it changed.
func (r *Refresher) Refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refreshLocked(ctx)
}

func (r *Refresher) refreshLocked(ctx context.Context) error {
	r.lastTried = time.Now()
	ring, err := r.source.Load(ctx)
	if err != nil {
		r.errors.Add(1)
		r.report(err)
		return err
	}
	if !ring.Same(r.ring.Load()) {
		r.ring.Store(ring)
	}
	r.lastGood.Store(time.Now().UnixNano())
	return nil
}

// Demand refreshes at once, for an Open that names a version newer than the
// ring, and returns the ring then current. Calls are serialized and at most
// one load per second is made for them, so a flood of forged states naming
// unknown versions cannot flood the source.
func (r *Refresher) Demand(ctx context.Context) *Ring {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastTried) >= r.minGap {
		r.refreshLocked(ctx)
	}
	return r.ring.Load()
}

// Run loads the ring every interval until ctx is done, and every second
// while no load has succeeded yet. It returns nil when ctx is done. Call
// Refresh first to start with a ring.
func (r *Refresher) Run(ctx context.Context) error {
	for {
		wait := r.interval
		if r.Ring() == nil {
			wait = min(wait, time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
			r.Refresh(ctx)
		}
	}
}
