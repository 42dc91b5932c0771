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
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// The store's keys: one entry per consumed state and per flow, and an index
// of both by expiry that the sweep walks in order.
//
//	'i' || key            -> u64 until (Unix ms)
//	'f' || key            -> u64 until || u32 highest round opened
//	'x' || u64 until || the entry's key -> empty
const (
	kindID    byte = 'i'
	kindFlow  byte = 'f'
	prefixExp byte = 'x'
)

// sweepBatch bounds the entries one sweep write deletes, and sweepPause is
// the pause between two of them, so that a long sweep never holds many
// consumes behind it.
const (
	sweepBatch = 256
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
// store and opens it again, as often as it takes. Opening replays the log,
// which keeps every consume that was answered and none of those refused,
// and it succeeds once the disk has room again: the ledger heals itself.
type Ledger struct {
	dir  string
	opts *pebble.Options
	log  *slog.Logger
	seed maphash.Seed

	life   sync.RWMutex // held for reading by every call, for writing to close or swap db
	db     *pebble.DB   // nil while broken and reopening
	closed bool
	stripe [stripes]sync.Mutex

	broken    atomic.Pointer[error]
	reopening atomic.Bool
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
		Logger:       pebbleLogger{log},
		MemTableSize: 16 << 20, // a restart replays at most about this much log
		BytesPerSync: 1 << 20,
	}
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10) // and every level below, by default
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %v", dir, err)
	}
	return &Ledger{dir: dir, opts: opts, log: log, db: db, seed: maphash.MakeSeed()}, nil
}

// fail breaks the ledger with err, if it works, and starts reopening it.
func (l *Ledger) fail(err error) {
	if !l.broken.CompareAndSwap(nil, &err) || !l.reopening.CompareAndSwap(false, true) {
		return
	}
	go l.reopen()
}

// reopen closes the store of the broken ledger and opens it again, once
// every reopenEvery until it succeeds or the ledger is closed. Opening may
// wait while the disk is full (Pebble retries the flush of the log it
// replays); calls meanwhile are refused, not held.
func (l *Ledger) reopen() {
	defer l.reopening.Store(false)
	l.life.Lock()
	if !l.closed {
		closeSafely(l.db)
		l.db = nil
	}
	l.life.Unlock()
	for {
		time.Sleep(reopenEvery)
		db, err := pebble.Open(l.dir, l.opts)
		l.life.Lock()
		switch {
		case l.closed:
			if err == nil {
				closeSafely(db)
			}
			l.life.Unlock()
			return
		case err != nil:
			l.life.Unlock()
			l.log.Error("ledger reopen failed", "cause", err.Error())
			continue
		}
		l.db = db
		l.broken.Store(nil)
		l.life.Unlock()
		l.log.Info("ledger reopened after a failure")
		return
	}
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
	return closeSafely(l.db)
}

// closeSafely closes db, a Fatalf of Pebble's (it may end a close after a
// failed commit) returned as an error.
func closeSafely(db *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = f
		}
	}()
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
	k := entryKey(kindID, tenant, id[:])
	return l.write(ctx, k, until, func(old []byte, b *pebble.Batch) (bool, error) {
		if old != nil {
			return false, nil
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(until.UnixMilli()))
		if err := b.Set(k, v[:], nil); err != nil {
			return false, err
		}
		return true, b.Set(expiryKey(v[:], k), nil, nil)
	})
}

// Advance implements ledger.Ledger. The entry keeps the latest until it
// was given, so that it lives as long as the longest-lived call asked.
func (l *Ledger) Advance(ctx context.Context, tenant string, flow sealer.FlowID, round uint32, until time.Time) error {
	k := entryKey(kindFlow, tenant, flow[:])
	return l.write(ctx, k, until, func(old []byte, b *pebble.Batch) (bool, error) {
		var v [12]byte
		binary.BigEndian.PutUint64(v[:8], uint64(until.UnixMilli()))
		binary.BigEndian.PutUint32(v[8:], round)
		if len(old) == len(v) {
			if binary.BigEndian.Uint32(old[8:]) >= round {
				return false, nil
			}
			if binary.BigEndian.Uint64(old[:8]) > binary.BigEndian.Uint64(v[:8]) {
				copy(v[:8], old[:8])
			}
			if err := b.Delete(expiryKey(old[:8], k), nil); err != nil {
				return false, err
			}
		}
		if err := b.Set(k, v[:], nil); err != nil {
			return false, err
		}
		return true, b.Set(expiryKey(v[:8], k), nil, nil)
	})
}

// write reads the entry k under its stripe, lets decide fill a batch from
// the old value (nil: none), and commits the batch durably if decide says
// the call wins. A call that does not win is ErrConsumed.
func (l *Ledger) write(ctx context.Context, k []byte, until time.Time, decide func(old []byte, b *pebble.Batch) (bool, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	if _, err := ledger.Remaining(until); err != nil {
		return err
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
	b := l.db.NewBatch()
	defer b.Close()
	wins, err := decide(old, b)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	case !wins:
		return ledger.ErrConsumed
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
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			l.fail(f)
			err = fmt.Errorf("%w: %v", ledger.ErrUnavailable, f)
		}
	}()
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return nil
}

func (l *Ledger) stripeOf(k []byte) int {
	return int(maphash.Bytes(l.seed, k) % stripes)
}

// Sweep deletes the entries that expired before now and returns how many.
func (l *Ledger) Sweep(now time.Time) (int, error) {
	var cut [8]byte
	binary.BigEndian.PutUint64(cut[:], uint64(now.UnixMilli()))
	upper := append([]byte{prefixExp}, cut[:]...)
	lower := []byte{prefixExp}
	total := 0
	for {
		n, next, err := l.sweepBatch(lower, upper, cut[:])
		total += n
		if err != nil || next == nil {
			return total, err
		}
		lower = next
		time.Sleep(sweepPause)
	}
}

// sweepBatch deletes the expired entries of up to sweepBatch index keys in
// [lower, upper) and returns how many, and where the next batch starts
// (nil: the range is done).
func (l *Ledger) sweepBatch(lower, upper, cut []byte) (int, []byte, error) {
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return 0, nil, err
	}
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, nil, fmt.Errorf("ledger: sweep: %v", err)
	}
	var idx [][]byte
	for ok := it.First(); ok && len(idx) < sweepBatch; ok = it.Next() {
		idx = append(idx, slices.Clone(it.Key()))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, nil, fmt.Errorf("ledger: sweep: %v", err)
	}
	if len(idx) == 0 {
		return 0, nil, nil
	}
	// Lock the entries' stripes in ascending order, so that an Advance
	// between the scan and this write cannot have its entry deleted: under
	// the lock each entry's own until is read again.
	locked := make([]int, 0, len(idx))
	for _, x := range idx {
		locked = append(locked, l.stripeOf(x[1+8:]))
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
	b := l.db.NewBatch()
	defer b.Close()
	n := 0
	for _, x := range idx {
		k := x[1+8:]
		if err := b.Delete(x, nil); err != nil {
			return 0, nil, err
		}
		v, err := l.get(k)
		if err != nil {
			return 0, nil, fmt.Errorf("ledger: sweep: %v", err)
		}
		if len(v) < 8 || string(v[:8]) >= string(cut) {
			continue // gone, or advanced since the scan: its new index key stays
		}
		if err := b.Delete(k, nil); err != nil {
			return 0, nil, err
		}
		n++
	}
	// Without a sync: a deletion lost in a crash is made again by the next
	// sweep, and an expired entry refuses no live state.
	if err := l.commit(b, pebble.NoSync); err != nil {
		return 0, nil, err
	}
	if len(idx) < sweepBatch {
		return n, nil, nil
	}
	return n, append(idx[len(idx)-1], 0), nil
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
		case now := <-t.C:
			report(l.Sweep(now))
		}
	}
}

// entryKey is the store key of an entry: its kind, the tenant
// length-prefixed, then the id.
func entryKey(kind byte, tenant string, id []byte) []byte {
	k := make([]byte, 0, 2+len(tenant)+len(id))
	k = append(k, kind, byte(len(tenant)))
	k = append(k, tenant...)
	return append(k, id...)
}

// expiryKey is the index key of entry k expiring at until (8 bytes).
func expiryKey(until, k []byte) []byte {
	x := make([]byte, 0, 1+8+len(k))
	x = append(x, prefixExp)
	x = append(x, until...)
	return append(x, k...)
}

// fatal is the panic of pebbleLogger.Fatalf.
type fatal string

func (f fatal) Error() string { return "ledger: " + string(f) }

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

// Import records entries of a ledger written by an earlier release
// (ledger/bolt), whose keys (the tenant length-prefixed, then the id) and
// values (until, and a flow's round) have this ledger's layout. each calls
// put once per entry. The entries are durable when Import returns; a
// second import of the same entries changes nothing.
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
		if len(key) == 0 || int(key[0])+1 >= len(key) || len(value) != size {
			return fmt.Errorf("ledger: import: damaged entry of %d bytes", len(key)+len(value))
		}
		k := append([]byte{kind}, key...)
		if err := errors.Join(b.Set(k, value, nil), b.Set(expiryKey(value[:8], k), nil, nil)); err != nil {
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
