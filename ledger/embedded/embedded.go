// Package embedded is the embedded one-time ledger: a Pebble store in a
// directory on local disk, for a single sealer process.
//
// A consume is one sequential append to Pebble's write-ahead log and one
// fdatasync, shared with every consume committing at the same moment
// (Pebble's commit pipeline groups synced batches), so a consumed state
// stays consumed across a crash, a kill or a restart. Bloom filters answer
// "never consumed" without reading a table from disk.
package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// The store's keys: one entry per consumed state and per flow, the random
// id first, so that keys differ from their first bytes on.
//
//	'i' || id || tenant -> u64 until (Unix ms) || outcome state
//	'f' || id || tenant -> u64 until || u32 highest round opened || outcome state
//	"mcut"              -> u64 the highest sweep cut (Unix ms)
//
// The outcome state (Recorder) follows the fixed part, so that a sweep
// reads every entry's until from its first 8 bytes, and an entry an
// earlier release wrote, without one, reads as consumed without a claim:
//
//	(nothing)              consumed without a claim: no outcome will come
//	'p' || u64 deadline    claimed, outcome pending until deadline (Unix ms)
//	'o' || outcome         the outcome recorded, non-empty
//	'n'                    recorded that none will come
//
// A flow's claimed round names the state it was claimed for, whose open
// won it, before its outcome state: 'c' || id || 'p'... Only that state
// records and reads the outcome. A flow's 'p', 'o' or 'n' without it,
// which a release before it wrote, is no state's: consumed for all of
// them. A release before it reads 'c' as damaged (ErrUnavailable) in
// Outcome, and as consumed in Record: it fails closed.
//
// A claim with answers (ledger.Entry.Answers) keeps them after the
// claimant, if any, and before the outcome state: 'a' || 32 bytes ||
// 'p'... A retry with other answers, or with none, is ErrConflict, and so
// is a retry with answers of a claim without any (written by a caller
// that sent none, or by a release before answers). A release before it
// reads 'a' as it reads 'c' above: it fails closed.
//
// There is no index by expiry: a sweep reads every entry, in chunks, which
// costs a consume nothing, where an index doubled what each consume writes.
const (
	kindID   byte = 'i'
	kindFlow byte = 'f'
)

// The sizes of the fixed part of an entry's value, by kind.
const (
	idFixed   = 8
	flowFixed = 12
)

// The outcome states.
const (
	statePending  byte = 'p'
	stateOutcome  byte = 'o'
	stateNone     byte = 'n'
	stateClaimant byte = 'c' // a flow's: the state id its round was claimed for follows
	stateAnswers  byte = 'a' // a claim's: the answers digest it was claimed with follows
)

// cutKey holds the highest cut a sweep used: every entry deleted expired
// before it (see [Ledger.Sweep]).
var cutKey = []byte("mcut")

// sweepChunk bounds the entries one step of a sweep reads, and
// flowGroup the flows one of its writes deletes under their stripes; a
// sweep pauses sweepPause between steps, so that it takes a share of the
// machine and never holds consumes behind it.
const (
	sweepChunk = 4096
	flowGroup  = 16
	sweepPause = time.Millisecond
)

// stripes serialise the read and the write of one entry: a consume reads
// whether its key is there and writes it, and two consumes of one key
// must not both read "absent". Many keys share a stripe; a stripe is held
// for one commit.
const stripes = 4096

// Ledger is the embedded ledger. It serves one process; replicas share a
// Redis ledger instead.
//
// A commit that fails (the disk is full, or failing) leaves Pebble unable
// to commit again, so a failure breaks the ledger: every call is refused
// ErrUnavailable, and [Ledger.Err] says why, while a goroutine closes the
// store and opens it again once the disk has room (see [openStore]). Opening
// replays the log, which keeps every consume that was answered and none of
// those refused: the ledger heals itself.
type Ledger struct {
	dir  string
	opts *pebble.Options
	log  *slog.Logger
	seed maphash.Seed

	life   sync.RWMutex // held for reading by every call, for writing to close or swap db
	db     *pebble.DB   // nil while broken and reopening
	closed bool
	stripe [stripes]sync.Mutex

	cut atomic.Int64 // the highest sweep cut, Unix ms: see ClockBehind

	// mend guards broken and reopening, so that a failure always finds
	// either a reopen running or none needed.
	mend      sync.Mutex
	broken    atomic.Pointer[error]
	reopening bool
}

// reopenEvery spaces the attempts to reopen a broken ledger.
const reopenEvery = time.Second

var _ ledger.Ledger = (*Ledger)(nil)

var errClosed = errors.New("ledger: closed")

// Open opens or creates the ledger in dir. Pebble's own messages go to log
// (nil: discarded). It fails if another process holds the directory.
func Open(dir string, log *slog.Logger) (*Ledger, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := &pebble.Options{
		FS:           vfs.Default,
		Logger:       pebbleLogger{log},
		MemTableSize: 64 << 20, // fewer flushes under load; a restart replays at most this much log
		BytesPerSync: 1 << 20,
		CacheSize:    32 << 20, // the filter and index blocks of about 10 M entries
	}
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10) // and every level below, by default
	db, err := openStore(dir, opts)
	if err != nil {
		return nil, err
	}
	l := &Ledger{dir: dir, opts: opts, log: log, db: db, seed: maphash.MakeSeed()}
	if err := l.loadCut(); err != nil {
		closeSafely(db, false)
		return nil, err
	}
	return l, nil
}

// loadCut reads the highest sweep cut from the store; the caller holds
// life or is Open.
func (l *Ledger) loadCut() error {
	v, err := l.get(cutKey)
	switch {
	case err != nil:
		return fmt.Errorf("ledger: read the sweep cut: %v", err)
	case v == nil:
		return nil
	case len(v) != 8:
		return fmt.Errorf("ledger: sweep cut of %d bytes, want 8", len(v))
	}
	l.cut.Store(int64(binary.BigEndian.Uint64(v)))
	return nil
}

// fail breaks the ledger with err, if it works, and starts reopening it
// unless a reopen is running: that one then reopens the store again.
func (l *Ledger) fail(err error) {
	if !l.broken.CompareAndSwap(nil, &err) {
		return
	}
	l.mend.Lock()
	defer l.mend.Unlock()
	if !l.reopening {
		l.reopening = true
		go l.reopen()
	}
}

// testHookReopened, when set, runs after a reopen has healed the ledger and
// before the reopen loop ends: the tests fail the ledger there.
var testHookReopened atomic.Pointer[func()]

// reopen closes the store of the broken ledger and opens it again, once
// there is room, trying every reopenEvery until it succeeds or the ledger
// is closed; calls meanwhile are refused, not held. A failure after it
// healed the ledger and before it ended finds it still running
// (l.reopening): it then goes round again rather than end.
func (l *Ledger) reopen() {
	for l.reopenOnce() {
	}
}

// reopenOnce reopens the broken ledger and reports whether it broke again
// meanwhile, when the loop must go on.
func (l *Ledger) reopenOnce() (again bool) {
	defer func() {
		if hook := testHookReopened.Load(); hook != nil {
			(*hook)()
		}
		l.mend.Lock()
		defer l.mend.Unlock()
		again = l.Err() != nil && !l.isClosed()
		l.reopening = again
	}()
	l.life.Lock()
	if !l.closed {
		closeSafely(l.db, false)
		l.db = nil
	}
	l.life.Unlock()
	waiting := false
	for {
		time.Sleep(reopenEvery)
		db, err := openStore(l.dir, l.opts)
		l.life.Lock()
		switch {
		case l.closed:
			if err == nil {
				closeSafely(db, false)
			}
			l.life.Unlock()
			return false
		case errors.Is(err, errNoRoom):
			l.life.Unlock()
			if !waiting {
				l.log.Error("ledger waits for room to reopen", "cause", err.Error())
				waiting = true
			}
			continue
		case err != nil:
			l.life.Unlock()
			l.log.Error("ledger reopen failed", "cause", err.Error())
			continue
		}
		l.db = db
		if err := l.loadCut(); err != nil {
			l.db = nil
			closeSafely(db, false)
			l.life.Unlock()
			l.log.Error("ledger reopen failed", "cause", err.Error())
			continue
		}
		l.broken.Store(nil)
		l.life.Unlock()
		l.log.Info("ledger reopened after a failure")
		return
	}
}

// isClosed reports whether Close was called.
func (l *Ledger) isClosed() bool {
	l.life.RLock()
	defer l.life.RUnlock()
	return l.closed
}

// roomMargin is the free space opening the store needs beside its log:
// a new manifest, options file and log.
const roomMargin = 8 << 20

// errNoRoom is a store not opened for want of free space.
var errNoRoom = errors.New("ledger: no room")

// openStore opens the store in dir, created if need be, once its file
// system has room for it: opening replays the log into a table and records
// it in the manifest, and Pebble ends the process when it cannot write its
// manifest, so the store is opened only with room for the table the log
// becomes and a margin. (Nothing keeps another process from filling the
// disk a moment later: Pebble then ends the process, and the log keeps
// every answered consume.)
func openStore(dir string, opts *pebble.Options) (*pebble.DB, error) {
	fs := opts.FS
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: %v", err)
	}
	du, err := fs.GetDiskUsage(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: %v", err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: %v", err)
	}
	need := uint64(roomMargin)
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		if fi, err := fs.Stat(fs.PathJoin(dir, name)); err == nil {
			need += uint64(fi.Size())
		}
	}
	if du.AvailBytes < need {
		return nil, fmt.Errorf("%w: %s: %d KiB free, %d KiB needed to open the store", errNoRoom, dir, du.AvailBytes>>10, need>>10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %v", dir, err)
	}
	return db, nil
}

// Close closes the store; calls after it fail with ErrUnavailable.
func (l *Ledger) Close() error {
	l.life.Lock()
	defer l.life.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.db == nil {
		return nil
	}
	return closeSafely(l.db, l.Err() == nil)
}

// closeSafely closes db, flushed first if flush (then the next open
// replays no log), a Fatalf of Pebble's (it may end a close after a failed
// commit) returned as an error.
func closeSafely(db *pebble.DB, flush bool) (err error) {
	defer recoverFatal(func(f fatal) { err = f })
	if flush {
		if err := db.Flush(); err != nil {
			return errors.Join(err, db.Close())
		}
	}
	return db.Close()
}

// Err returns why the ledger is broken, or nil while it works.
func (l *Ledger) Err() error {
	if p := l.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// Consume implements ledger.Ledger.
func (l *Ledger) Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error {
	return l.consume(ctx, tenant, id, until, nil)
}

// consume records id as consumed, with the outcome state claim (nil: none).
func (l *Ledger) consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time, claim []byte) error {
	return l.write(ctx, entryKey(kindID, id[:], tenant), until, func(old []byte) ([]byte, error) {
		if old != nil {
			return nil, ledger.ErrConsumed
		}
		v := binary.BigEndian.AppendUint64(make([]byte, 0, idFixed+len(claim)), uint64(until.UnixMilli()))
		return append(v, claim...), nil
	})
}

// Advance implements ledger.Ledger. The entry keeps the latest until it
// was given, so that it lives as long as the longest-lived call asked.
func (l *Ledger) Advance(ctx context.Context, tenant string, flow sealer.FlowID, round uint32, until time.Time) error {
	return l.advance(ctx, tenant, flow, round, until, nil)
}

// advance records round as flow's highest, with the outcome state claim
// (nil: none); the state of the round before goes with it.
func (l *Ledger) advance(ctx context.Context, tenant string, flow sealer.FlowID, round uint32, until time.Time, claim []byte) error {
	return l.write(ctx, entryKey(kindFlow, flow[:], tenant), until, func(old []byte) ([]byte, error) {
		v := make([]byte, flowFixed, flowFixed+len(claim))
		binary.BigEndian.PutUint64(v[:8], uint64(until.UnixMilli()))
		binary.BigEndian.PutUint32(v[8:], round)
		if len(old) >= flowFixed {
			if binary.BigEndian.Uint32(old[8:]) >= round {
				return nil, ledger.ErrConsumed
			}
			if binary.BigEndian.Uint64(old[:8]) > binary.BigEndian.Uint64(v[:8]) {
				copy(v[:8], old[:8])
			}
		}
		return append(v, claim...), nil
	})
}

// write is update for a call that consumes: refused when until is not in
// the future or the clock is behind the last sweep (ClockBehind).
func (l *Ledger) write(ctx context.Context, k []byte, until time.Time, decide func(old []byte) ([]byte, error)) error {
	if _, err := ledger.Remaining(until); err != nil {
		return err
	}
	if err := l.ClockBehind(wallclock.Now()); err != nil {
		return err
	}
	return l.update(ctx, k, decide)
}

// update reads the entry k under its stripe, lets decide make its new
// value from the old one (nil: none), and commits it durably. An error of
// decide's refuses the call as it is.
func (l *Ledger) update(ctx context.Context, k []byte, decide func(old []byte) ([]byte, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return err
	}
	s := &l.stripe[l.stripeOf(k)]
	s.Lock()
	defer s.Unlock()
	old, err := l.get(k)
	if err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	v, err := decide(old)
	if err != nil {
		return err
	}
	b := l.db.NewBatch()
	defer b.Close()
	if err := b.Set(k, v, nil); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return l.commit(b, pebble.Sync)
}

// usable returns ErrUnavailable if the ledger is closed or broken; the
// caller holds life.
func (l *Ledger) usable() error {
	if l.closed {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, errClosed)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return nil
}

// get returns a copy of the value of k, or nil if there is none.
func (l *Ledger) get(k []byte) ([]byte, error) {
	v, closer, err := l.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// commit commits b. Pebble ends a commit it could not write with its
// logger's Fatalf, which panics here with fatal: the ledger is then broken
// and the write refused, never answered as a win.
func (l *Ledger) commit(b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	defer recoverFatal(func(f fatal) {
		l.fail(f)
		err = fmt.Errorf("%w: %v", ledger.ErrUnavailable, f)
	})
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return nil
}

func (l *Ledger) stripeOf(k []byte) int {
	return int(maphash.Bytes(l.seed, k) % stripes)
}

// ErrClockBehind refuses a consume while this host's clock reads before the
// cut of a sweep the ledger made: the clock stepped back, and a state whose
// entry that sweep deleted may be acceptable again on it. It wraps
// ErrUnavailable (fail closed).
var ErrClockBehind = fmt.Errorf("%w: this host's clock reads before the ledger's last sweep (it stepped back)", ledger.ErrUnavailable)

// sweepTolerance is how far behind the clock SweepEvery sweeps: a clock
// stepped back by less after a sweep refuses nothing.
const sweepTolerance = time.Second

// ClockBehind returns ErrClockBehind if now is before the highest cut a
// sweep of this ledger used, kept in the store across restarts. A sweep
// deletes only entries whose until is before its cut, and a state is
// accepted only before its entry's until, so while the clock reads at or
// after every cut, no state whose entry was deleted is accepted: a consume
// then needs no entry to have survived.
func (l *Ledger) ClockBehind(now time.Time) error {
	if now.UnixMilli() < l.cut.Load() {
		return ErrClockBehind
	}
	return nil
}

// Sweep deletes the entries that expired before now and returns how many.
// Its cut, now, is recorded durably first, and never goes down: a clock
// stepped back below it refuses every consume (ClockBehind) instead of
// reopening what was swept.
func (l *Ledger) Sweep(now time.Time) (int, error) {
	cut := now.UnixMilli()
	if cut <= l.cut.Load() {
		cut = l.cut.Load()
	} else if err := l.recordCut(cut); err != nil {
		return 0, err
	}
	total := 0
	for _, kind := range []byte{kindID, kindFlow} {
		for lower := []byte{kind}; lower != nil; time.Sleep(sweepPause) {
			n, next, err := l.sweepStep(kind, lower, uint64(cut))
			total += n
			if err != nil {
				return total, err
			}
			lower = next
		}
	}
	return total, nil
}

// recordCut stores cut as the highest sweep cut, durably, before the sweep
// deletes anything by it.
func (l *Ledger) recordCut(cut int64) error {
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return err
	}
	b := l.db.NewBatch()
	defer b.Close()
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(cut))
	if err := b.Set(cutKey, v[:], nil); err != nil {
		return fmt.Errorf("ledger: sweep: %v", err)
	}
	if err := l.commit(b, pebble.Sync); err != nil {
		return err
	}
	l.cut.Store(cut)
	return nil
}

// sweepStep reads up to sweepChunk entries of kind from lower on, deletes
// those that expired before cut, and returns how many, and where the next
// step starts (nil: the kind is done).
func (l *Ledger) sweepStep(kind byte, lower []byte, cut uint64) (int, []byte, error) {
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return 0, nil, err
	}
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{kind + 1}})
	if err != nil {
		return 0, nil, fmt.Errorf("ledger: sweep: %v", err)
	}
	var expired [][]byte
	var next []byte
	read := 0
	for ok := it.First(); ok; ok = it.Next() {
		if read == sweepChunk {
			next = slices.Clone(it.Key())
			break
		}
		read++
		if v := it.Value(); len(v) >= 8 && binary.BigEndian.Uint64(v) < cut {
			expired = append(expired, slices.Clone(it.Key()))
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, nil, fmt.Errorf("ledger: sweep: %v", err)
	}
	if kind == kindID {
		// A consumed state's until never changes once written (Record
		// keeps it), so its entry goes without taking its stripe; a
		// Record racing the deletion may write it back, still expired,
		// for the next sweep.
		return len(expired), next, l.deleteAll(expired)
	}
	n := 0
	for len(expired) > 0 {
		group := expired[:min(flowGroup, len(expired))]
		expired = expired[len(group):]
		d, err := l.deleteExpiredFlows(group, cut)
		n += d
		if err != nil {
			return n, nil, err
		}
	}
	return n, next, nil
}

// deleteAll deletes keys, without a sync: a deletion lost in a crash is
// made again by the next sweep, and an expired entry refuses no live state.
func (l *Ledger) deleteAll(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	b := l.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	return l.commit(b, pebble.NoSync)
}

// deleteExpiredFlows deletes the flows of keys that are still expired
// under their stripes, taken in ascending order: an Advance since the
// sweep read them may have given one a later until, and it stays.
func (l *Ledger) deleteExpiredFlows(keys [][]byte, cut uint64) (int, error) {
	locked := make([]int, 0, len(keys))
	for _, k := range keys {
		locked = append(locked, l.stripeOf(k))
	}
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for _, s := range locked {
		l.stripe[s].Lock()
	}
	defer func() {
		for _, s := range locked {
			l.stripe[s].Unlock()
		}
	}()
	var gone [][]byte
	for _, k := range keys {
		v, err := l.get(k)
		if err != nil {
			return 0, fmt.Errorf("ledger: sweep: %v", err)
		}
		if len(v) >= 8 && binary.BigEndian.Uint64(v) < cut {
			gone = append(gone, k)
		}
	}
	return len(gone), l.deleteAll(gone)
}

// SweepEvery sweeps at the given interval until ctx is done, then returns
// nil. Each sweep's count and error go to report; a failed sweep is retried
// at the next tick.
func (l *Ledger) SweepEvery(ctx context.Context, every time.Duration, report func(swept int, err error)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			report(l.Sweep(wallclock.Now().Add(-sweepTolerance)))
		}
	}
}

// entryKey is the store key of an entry: its kind, its id, its tenant.
func entryKey(kind byte, id []byte, tenant string) []byte {
	k := make([]byte, 0, 1+len(id)+len(tenant))
	k = append(k, kind)
	k = append(k, id...)
	return append(k, tenant...)
}

// fatal is the panic of pebbleLogger.Fatalf.
type fatal string

func (f fatal) Error() string { return "ledger: " + string(f) }

// recoverFatal, deferred, hands a fatal panic to handle; any other panic
// goes on.
func recoverFatal(handle func(fatal)) {
	if r := recover(); r != nil {
		f, ok := r.(fatal)
		if !ok {
			panic(r)
		}
		handle(f)
	}
}

// pebbleLogger sends Pebble's messages to the service's log. Fatalf panics
// rather than exits: a failed commit is recovered by commit, and a failure
// in Pebble's background work ends the process as Pebble intends.
type pebbleLogger struct{ log *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.log.Debug("ledger", "message", fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.log.Error("ledger", "message", fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.log.Error("ledger failed", "message", msg)
	panic(fatal(msg))
}

// Len returns the number of entries held: consumed states and flows. It
// reads every entry: for tests and tools, not for a hot path.
func (l *Ledger) Len() (int, error) {
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	n := 0
	for _, kind := range []byte{kindID, kindFlow} {
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kind}, UpperBound: []byte{kind + 1}})
		if err != nil {
			return 0, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Compact rewrites the whole store into its last level: for tools that
// fill the ledger in bulk, so that it is measured as a ledger that took its
// entries over time would be, not in the middle of compacting them.
func (l *Ledger) Compact() error {
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}

// Import records entries of a ledger written by an earlier release
// (ledger/bolt's Each): each calls put once per entry, with whether it is a
// flow's, its key (the tenant length-prefixed, then the id) and its value
// (until, and a flow's round, as this ledger keeps them). Entries already
// expired are recorded like the others; the next sweep deletes them. The
// entries are durable when Import returns; a second import of the same
// entries changes nothing.
func (l *Ledger) Import(each func(put func(flow bool, key, value []byte) error) error) (int, error) {
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	b := l.db.NewBatch()
	defer func() { b.Close() }()
	n := 0
	err := each(func(flow bool, key, value []byte) error {
		kind, size := kindID, 8
		if flow {
			kind, size = kindFlow, 12
		}
		if len(key) == 0 || len(key) != 1+int(key[0])+len(sealer.StateID{}) || len(value) != size {
			return fmt.Errorf("ledger: import: damaged entry of %d bytes", len(key)+len(value))
		}
		tenant, id := key[1:1+key[0]], key[1+key[0]:]
		if err := b.Set(entryKey(kind, id, string(tenant)), value, nil); err != nil {
			return err
		}
		n++
		if b.Count() < 100_000 {
			return nil
		}
		if err := l.commit(b, pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = l.db.NewBatch()
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := l.commit(b, pebble.Sync); err != nil {
		return 0, err
	}
	return n, nil
}
