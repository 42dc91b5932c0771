package keys

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
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
	log    *slog.Logger // nil: no log

	ring     atomic.Pointer[Ring]
	lastGood atomic.Int64 // Unix nanoseconds of the last successful load
	errors   atomic.Uint64
	mu       sync.Mutex // one load at a time

	demands singleflight.Group
	// demandEnded is when the last on-demand load ended (Unix nanoseconds):
	// written only by the one demand load in flight, never by a caller.
	demandEnded atomic.Int64
}

// demandTimeout bounds one on-demand load, whoever waits for it.
const demandTimeout = 10 * time.Second

// NewRefresher returns a refresher of source polling at interval. report, if
// not nil, receives every failed load.
func NewRefresher(source Source, interval time.Duration, report func(error)) *Refresher {
	if report == nil {
		report = func(error) {}
	}
	return &Refresher{source: source, interval: interval, minGap: time.Second, report: report}
}

// SetLog makes the refresher log what an operator follows a rotation by:
// each version loaded, the version that starts sealing, each version that
// left the ring (once each, by number, never key bytes), and every failed
// load with what the replica serves meanwhile. Call it before the first
// load.
func (r *Refresher) SetLog(log *slog.Logger) { r.log = log }

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
	ring, err := r.source.Load(ctx)
	if err != nil {
		r.errors.Add(1)
		r.logFailure(err)
		r.report(err)
		return err
	}
	if old := r.ring.Load(); !ring.Same(old) {
		r.ring.Store(ring)
		r.logChanges(old, ring)
	}
	r.lastGood.Store(time.Now().UnixNano())
	return nil
}

// Demand refreshes at once, for an Open that names a version newer than the
// ring, and returns the ring then current, or the current ring when ctx ends
// first. Callers share one load in flight; a new one starts at most once
// per minGap after the last one ended, whatever the callers do, so a flood
// of forged states naming unknown versions can neither flood the source nor
// hold its callers longer than their deadline.
func (r *Refresher) Demand(ctx context.Context) *Ring {
	done := r.demands.DoChan("", func() (any, error) {
		if time.Since(time.Unix(0, r.demandEnded.Load())) < r.minGap {
			return nil, nil
		}
		defer func() { r.demandEnded.Store(time.Now().UnixNano()) }()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), demandTimeout)
		defer cancel()
		return nil, r.Refresh(lctx)
	})
	select {
	case <-done:
	case <-ctx.Done():
	}
	return r.ring.Load()
}

// Run loads the ring every interval until ctx is done, and every second
// while no load has succeeded yet, starting at once when there is no ring.
// It returns nil when ctx is done.
func (r *Refresher) Run(ctx context.Context) error {
	if r.Ring() == nil {
		r.Refresh(ctx)
	}
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

// logFailure says that a load failed and what this replica serves instead.
func (r *Refresher) logFailure(err error) {
	if r.log == nil {
		return
	}
	ring := r.ring.Load()
	if ring == nil {
		r.log.Error("key refresh failed; no keys loaded yet: seals and opens fail (KEYS_UNAVAILABLE) until one succeeds", "cause", err.Error())
		return
	}
	r.log.Warn("key refresh failed; serving with the last good keys", "versions", ring.Versions(), "sealing", ring.SealingVersion(),
		"loaded_at", r.LastGood().UTC().Format(time.RFC3339), "cause", err.Error())
}

// logChanges logs how next differs from old (nil before the first load).
func (r *Refresher) logChanges(old, next *Ring) {
	if r.log == nil {
		return
	}
	for _, id := range next.ids {
		switch was := old.version(id); {
		case was == nil:
			r.log.Info("key version loaded", "version", id, "created", next.created(id))
		case was.key.material != next.versions[id].key.material:
			r.log.Warn("key version replaced: its material changed, so states sealed with the old material no longer open", "version", id)
		}
	}
	var previous uint32
	if old != nil {
		previous = old.SealingVersion()
	}
	if next.SealingVersion() != previous {
		r.log.Info("key version activated: it seals from now on", "version", next.SealingVersion(), "previous", previous)
	}
	if old == nil {
		return
	}
	for _, id := range old.ids {
		if next.version(id) == nil {
			r.log.Info("key version retired: states sealed with it no longer open", "version", id)
		}
	}
}
