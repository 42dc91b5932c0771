// Package bolt is the embedded one-time ledger of the releases before
// ledger/embedded: a bbolt file on local disk, for a single sealer process.
// The sealer now only reads its file once, to import it (Each); the
// benchmarks measure it beside the ledger that replaced it.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

var (
	idsBucket        = []byte("consumed")    // key -> u64 until (Unix ms)
	expiryBucket     = []byte("expiry")      // u64 until || key -> nothing, in expiry order
	flowsBucket      = []byte("flows")       // key -> u64 until || u32 highest round opened
	flowExpiryBucket = []byte("flow-expiry") // u64 until || key -> nothing, in expiry order
)

// entries are the buckets of one kind of entry: the entries, and their
// index by expiry.
type entries struct{ byKey, byExpiry []byte }

var kinds = []entries{{idsBucket, expiryBucket}, {flowsBucket, flowExpiryBucket}}

// sweepBatch bounds how many entries one sweep write deletes, and
// sweepPause is the pause between two of them, which keeps a long sweep
// from filling every transaction. Each goes through the committer like a
// consume, so consumes never wait for more than one small sweep write,
// whose transaction and fsync they share.
const (
	sweepBatch = 250
	sweepPause = 2 * time.Millisecond
)

// Ledger is the embedded ledger: a bbolt file on local disk. Each consume is
// committed (fsync) before it returns, so a consumed state stays consumed
// across a crash or restart. It serves one process; replicas share a Redis
// ledger instead.
//
// Consumes and advances are committed by one goroutine, the committer:
// each of its transactions takes every write waiting when it starts, and
// starts as soon as the one before it is done. A write thus waits, as a
// rule, for the commit in flight and its own (more only with over maxGroup
// writes waiting, or after a failure), and under load many writes share
// one fsync. A caller that stops waiting (its context done) gets
// ErrUnavailable, though its write may still commit: a consume then fails
// closed. (bbolt's Batch starts a group on a timer, which every consume
// would wait for however idle the ledger was.)
type Ledger struct {
	db      *bbolt.DB
	writes  chan write
	quit    chan struct{} // closed by Close
	stopped chan struct{} // closed when the committer has returned
	close   sync.Once
}

// write is a consume or an advance waiting for the committer: apply runs
// in the transaction (perhaps twice, see commitGroup), the result goes to
// err.
type write struct {
	apply func(*bbolt.Tx) error
	err   chan error
}

// maxGroup bounds the writes one transaction commits.
const maxGroup = 1000

var errClosed = errors.New("ledger: closed")

var _ ledger.Ledger = (*Ledger)(nil)

// Open opens or creates the ledger file at path. It fails within a
// second if another process holds the file.
//
// The free page list is a hash map and is not written on commit (etcd's
// settings): the sweeps free pages all over a large file, and bbolt's
// default, an array written with every commit, made each commit slower as
// the file grew. Open rebuilds the list by reading the file, which costs a
// moment at start for a file of millions of entries; a consume is as
// durable as before (its pages and the meta page are synced). bbolt panics
// on a damaged file as it rebuilds the list: Open returns that as an error.
func Open(path string) (l *Ledger, err error) {
	defer func() {
		if r := recover(); r != nil {
			l, err = nil, fmt.Errorf("ledger: open %s: damaged file: %v", path, r)
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %v", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{idsBucket, expiryBucket, flowsBucket, flowExpiryBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger: init %s: %v", path, err)
	}
	b := &Ledger{db: db, writes: make(chan write, maxGroup), quit: make(chan struct{}), stopped: make(chan struct{})}
	go b.committer()
	return b, nil
}

// Close stops the committer (writes still waiting fail) and closes the file.
func (b *Ledger) Close() error {
	b.close.Do(func() { close(b.quit) })
	<-b.stopped
	return b.db.Close()
}

// commit hands apply to the committer and returns once it is committed, or
// failed, or ctx is done.
func (b *Ledger) commit(ctx context.Context, apply func(*bbolt.Tx) error) error {
	w := write{apply: apply, err: make(chan error, 1)}
	select {
	case b.writes <- w:
	case <-b.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stopped:
		select {
		case err := <-w.err: // committed as the committer stopped
			return err
		default: // left in the queue: never applied
			return errClosed
		}
	}
}

// committer commits the writes, each transaction all those waiting when it
// starts, until Close.
func (b *Ledger) committer() {
	defer close(b.stopped)
	group := make([]write, 0, maxGroup)
	for {
		select {
		case <-b.quit:
			return
		case w := <-b.writes:
			group = append(group[:0], w)
		}
	fill:
		for len(group) < maxGroup {
			select {
			case w := <-b.writes:
				group = append(group, w)
			default:
				break fill
			}
		}
		b.commitGroup(group)
	}
}

// commitGroup commits the group in one transaction. A write whose apply
// fails gets its error and the others run again without it (as bbolt's
// Batch does), so apply must set its results afresh on every run; a failed
// commit (the disk) fails the whole group at once.
func (b *Ledger) commitGroup(group []write) {
	for len(group) > 0 {
		failed := -1
		err := b.db.Update(func(tx *bbolt.Tx) error {
			for i, w := range group {
				if err := applySafely(w.apply, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, w := range group {
				w.err <- err
			}
			return
		}
		group[failed].err <- err
		group = append(group[:failed:failed], group[failed+1:]...)
	}
}

// applySafely runs apply, a panic (bbolt's on a damaged page) returned as
// the write's error rather than ending the process.
func applySafely(apply func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ledger: %v", r)
		}
	}()
	return apply(tx)
}

// Consume implements ledger.Ledger.
func (b *Ledger) Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	if _, err := ledger.Remaining(until); err != nil {
		return err
	}
	k := key(tenant, id)
	var exp [8]byte
	binary.BigEndian.PutUint64(exp[:], uint64(until.UnixMilli()))
	var consumed bool
	// The function may run more than once, each time in a fresh
	// transaction; only the run that commits sets the result last.
	err := b.commit(ctx, func(tx *bbolt.Tx) error {
		ids := tx.Bucket(idsBucket)
		if consumed = ids.Get(k) != nil; consumed {
			return nil
		}
		if err := ids.Put(k, exp[:]); err != nil {
			return err
		}
		return tx.Bucket(expiryBucket).Put(append(exp[:], k...), nil)
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	case consumed:
		return ledger.ErrConsumed
	}
	return nil
}

// Advance implements ledger.Ledger. The entry keeps the latest until it
// was given, so that it lives as long as the longest-lived call asked.
func (b *Ledger) Advance(ctx context.Context, tenant string, flow sealer.FlowID, round uint32, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	if _, err := ledger.Remaining(until); err != nil {
		return err
	}
	k := key(tenant, sealer.StateID(flow))
	var stale bool
	err := b.commit(ctx, func(tx *bbolt.Tx) error {
		flows, exp := tx.Bucket(flowsBucket), tx.Bucket(flowExpiryBucket)
		stale = false // this may run again after a failed run
		var v [12]byte
		binary.BigEndian.PutUint64(v[:8], uint64(until.UnixMilli()))
		binary.BigEndian.PutUint32(v[8:], round)
		if old := flows.Get(k); len(old) == len(v) {
			if stale = binary.BigEndian.Uint32(old[8:]) >= round; stale {
				return nil
			}
			if bytes.Compare(old[:8], v[:8]) > 0 {
				copy(v[:8], old[:8])
			}
			if err := exp.Delete(append(bytes.Clone(old[:8]), k...)); err != nil {
				return err
			}
		}
		if err := flows.Put(k, v[:]); err != nil {
			return err
		}
		return exp.Put(append(v[:8:8], k...), nil)
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	case stale:
		return ledger.ErrConsumed
	}
	return nil
}

// Sweep deletes the entries that expired before now and returns how many.
func (b *Ledger) Sweep(now time.Time) (int, error) {
	total := 0
	for _, kind := range kinds {
		n, err := b.sweep(kind, now)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// sweep deletes the entries of one kind that expired before now.
func (b *Ledger) sweep(kind entries, now time.Time) (int, error) {
	var cut [8]byte
	binary.BigEndian.PutUint64(cut[:], uint64(now.UnixMilli()))
	total := 0
	for {
		n := 0
		// Through the committer, so that the consumes waiting meanwhile
		// share this transaction and its fsync rather than queue behind it.
		err := b.commit(context.Background(), func(tx *bbolt.Tx) error {
			n = 0 // this may run again after a failed run
			ids, exp := tx.Bucket(kind.byKey), tx.Bucket(kind.byExpiry)
			var done [][]byte
			c := exp.Cursor()
			for k, _ := c.First(); k != nil && len(done) < sweepBatch && bytes.Compare(k[:8], cut[:]) < 0; k, _ = c.Next() {
				done = append(done, bytes.Clone(k))
			}
			for _, k := range done {
				if err := exp.Delete(k); err != nil {
					return err
				}
				if err := ids.Delete(k[8:]); err != nil {
					return err
				}
			}
			n = len(done)
			return nil
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("ledger: sweep: %v", err)
		}
		if n < sweepBatch {
			return total, nil
		}
		time.Sleep(sweepPause)
	}
}

// Len returns the number of entries held: consumed states and flows.
func (b *Ledger) Len() (int, error) {
	n := 0
	err := b.db.View(func(tx *bbolt.Tx) error {
		n = tx.Bucket(idsBucket).Stats().KeyN + tx.Bucket(flowsBucket).Stats().KeyN
		return nil
	})
	return n, err
}

// key is the ledger key of a state: the tenant, length-prefixed, then the id.
func key(tenant string, id sealer.StateID) []byte {
	k := make([]byte, 0, 1+len(tenant)+len(id))
	k = append(k, byte(len(tenant)))
	k = append(k, tenant...)
	return append(k, id[:]...)
}

// Each calls put with every entry of the ledger file at path, opened read
// only: whether it is a flow's, its key (the tenant length-prefixed, then
// the id) and its value (until, and a flow's round). It is how a newer
// ledger imports this one's.
func Each(path string, put func(flow bool, key, value []byte) error) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("ledger: open %s: %v", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		for _, kind := range kinds {
			flow := bytes.Equal(kind.byKey, flowsBucket)
			b := tx.Bucket(kind.byKey)
			if b == nil {
				continue
			}
			if err := b.ForEach(func(k, v []byte) error { return put(flow, k, v) }); err != nil {
				return err
			}
		}
		return nil
	})
}
