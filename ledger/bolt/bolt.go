// Package bolt is the embedded one-time ledger: a bbolt file on local disk,
// for a single sealer process.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
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

// sweepBatch bounds how many entries one sweep transaction deletes, and
// sweepPause is the pause between two of them, in which the consumes that
// waited for the file's one writer commit: a sweep of a million entries
// then never holds consumes for longer than one small transaction (at
// 10,000 a transaction without a pause, consumes waited 21 times their
// idle p99 during such a sweep; BENCHMARKS.md, "Scale").
const (
	sweepBatch = 1000
	sweepPause = 2 * time.Millisecond
)

// Ledger is the embedded ledger: a bbolt file on local disk. Each consume is
// committed (fsync) before it returns, so a consumed state stays consumed
// across a crash or restart. Concurrent consumes are grouped into one
// transaction. It serves one process; replicas share a Redis ledger instead.
type Ledger struct {
	db *bbolt.DB
}

var _ ledger.Ledger = (*Ledger)(nil)

// Open opens or creates the ledger file at path. It fails within a
// second if another process holds the file.
func Open(path string) (*Ledger, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %v", path, err)
	}
	db.MaxBatchDelay = 2 * time.Millisecond
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
	return &Ledger{db: db}, nil
}

// Close closes the file.
func (b *Ledger) Close() error { return b.db.Close() }

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
	// Batch may run the function more than once, each time in a fresh
	// transaction; only the run that commits sets the result last.
	err := b.db.Batch(func(tx *bbolt.Tx) error {
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
	err := b.db.Batch(func(tx *bbolt.Tx) error {
		flows, exp := tx.Bucket(flowsBucket), tx.Bucket(flowExpiryBucket)
		stale = false // Batch may run this again after a failed run
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
		err := b.db.Update(func(tx *bbolt.Tx) error {
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

// SweepEvery sweeps at the given interval until ctx is done, then returns
// nil. Each sweep's count and error go to report; a failed sweep is retried
// at the next tick.
func (b *Ledger) SweepEvery(ctx context.Context, every time.Duration, report func(swept int, err error)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			report(b.Sweep(now))
		}
	}
}

// key is the ledger key of a state: the tenant, length-prefixed, then the id.
func key(tenant string, id sealer.StateID) []byte {
	k := make([]byte, 0, 1+len(tenant)+len(id))
	k = append(k, byte(len(tenant)))
	k = append(k, tenant...)
	return append(k, id[:]...)
}
