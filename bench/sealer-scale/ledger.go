package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/embedded"
	"github.com/mcp-sealer/sealer/sealer"
)

// store is a ledger under measurement: how to open it in dir and fill it.
// The embedded ledger is the one store measured on disk; Redis has its own
// measurement (redis.go).
type store struct {
	name    string
	sub     string // its directory under the level's
	open    func(dir string) (ledger.Ledger, func() error, error)
	preload func(l ledger.Ledger, n int, until time.Time) error
}

var stores = []store{
	{
		name: "embedded (Pebble)",
		sub:  "embedded",
		open: func(dir string) (ledger.Ledger, func() error, error) {
			l, err := embedded.Open(filepath.Join(dir, "embedded"), nil)
			if err != nil {
				return nil, nil, err
			}
			return l, l.Close, nil
		},
		preload: func(l ledger.Ledger, n int, until time.Time) error {
			if err := preloadEmbedded(l.(*embedded.Ledger), n, until); err != nil {
				return err
			}
			// As a ledger that took its states over time would be: its
			// compactions done, not owed.
			return l.(*embedded.Ledger).Compact()
		},
	},
}

// ledgerScale prints, for each level of live states, the durable-append
// floor beside each store's Consume and Advance at 1 and c callers, the
// cells measured in turns (rounds times each for d) so that the machine's
// noise falls on all alike; then the bytes on disk per live state and the
// time to reopen; then, on the largest level, consumes while a sweep
// deletes sweep expired states beside the same without one.
func ledgerScale(dir string, levels []int, sweep, c, rounds int, d time.Duration) error {
	if dir == "" {
		return errors.New("ledger: -dir is required")
	}
	for _, n := range levels {
		if err := ledgerLevel(dir, n, c, rounds, d, n == levels[len(levels)-1] && sweep > 0, sweep); err != nil {
			return err
		}
	}
	return nil
}

// cell is one measured row: a name, callers and the load it runs.
type cell struct {
	name    string
	callers int
	run     func(c int, d time.Duration) ([]time.Duration, int)
	lat     []time.Duration
	failed  int
	took    time.Duration
}

func ledgerLevel(dir string, n, c, rounds int, d time.Duration, sweep bool, expiring int) error {
	base := filepath.Join(dir, fmt.Sprintf("ledger-%d", n))
	os.RemoveAll(base)
	defer os.RemoveAll(base)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return err
	}
	floor, err := os.OpenFile(filepath.Join(base, "floor.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer floor.Close()
	var cells []*cell
	for _, callers := range []int{1, c} {
		cells = append(cells, &cell{name: "durable-append floor", callers: callers, run: func(c int, d time.Duration) ([]time.Duration, int) { return appendFloor(floor, c, d) }})
	}
	opened := make([]ledger.Ledger, len(stores))
	fmt.Printf("\n### %d live states\n\n", n)
	for i, s := range stores {
		l, closeFn, err := s.open(base)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := s.preload(l, n, time.Now().Add(24*time.Hour)); err != nil {
			return err
		}
		fmt.Printf("%s: preloaded in %v.\n", s.name, time.Since(start).Round(time.Second))
		// Reopen: what a restart costs at this size.
		closeFn()
		start = time.Now()
		if l, closeFn, err = s.open(base); err != nil {
			return err
		}
		defer closeFn()
		fmt.Printf("%s: reopened in %v; %s per live state on disk.\n", s.name, time.Since(start).Round(time.Millisecond), perState(filepath.Join(base, s.sub), n))
		opened[i] = l
		for _, callers := range []int{1, c} {
			cells = append(cells,
				&cell{name: s.name + " Consume", callers: callers, run: func(c int, d time.Duration) ([]time.Duration, int) { return load(l.Consume, c, d) }},
				&cell{name: s.name + " Advance", callers: callers, run: func(c int, d time.Duration) ([]time.Duration, int) { return load(advanceAsConsume(l), c, d) }})
		}
	}
	for range rounds {
		for _, x := range cells {
			lat, failed := x.run(x.callers, d)
			x.lat, x.failed, x.took = append(x.lat, lat...), x.failed+failed, x.took+d
		}
	}
	fmt.Printf("\n| %d live states | callers | records/s | p50 | p99 | errors |\n|---|---|---|---|---|---|\n", n)
	for _, x := range cells {
		sorted(x.lat)
		fmt.Printf("| %s | %d | %.0f | %s | %s | %d |\n", x.name, x.callers, float64(len(x.lat))/x.took.Seconds(), micro(quantile(x.lat, 0.5)), micro(quantile(x.lat, 0.99)), x.failed)
	}
	if sweep {
		return sweepUnderLoad(opened[0].(*embedded.Ledger), expiring, c, d)
	}
	return nil
}

// perState is the bytes under dir per live state.
func perState(dir string, n int) string {
	var total int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	if n == 0 {
		return fmt.Sprintf("%d B in all", total)
	}
	return fmt.Sprintf("%.0f B", float64(total)/float64(n))
}

// appendFloor is the durable-append floor: c goroutines append 64-byte
// records to f and wait until they are on disk; one writer takes whatever
// is waiting, writes it in one call and syncs it with one fdatasync. With
// one goroutine that is one fdatasync per record.
func appendFloor(f *os.File, c int, d time.Duration) ([]time.Duration, int) {
	type rec struct {
		b    [64]byte
		done chan error
	}
	queue := make(chan *rec, 4096)
	stop := make(chan struct{})
	go func() {
		buf := make([]byte, 0, 64*4096)
		var group []*rec
		for {
			select {
			case <-stop:
				return
			case r := <-queue:
				group = append(group[:0], r)
			}
		fill:
			for {
				select {
				case r := <-queue:
					group = append(group, r)
				default:
					break fill
				}
			}
			buf = buf[:0]
			for _, r := range group {
				buf = append(buf, r.b[:]...)
			}
			_, err := f.Write(buf)
			if err == nil {
				err = unix.Fdatasync(int(f.Fd()))
			}
			for _, r := range group {
				r.done <- err
			}
		}
	}()
	defer close(stop)
	return loadFunc(func() error {
		r := &rec{done: make(chan error, 1)}
		rand.Read(r.b[:])
		queue <- r
		return <-r.done
	}, c, d)
}

// load calls consume with fresh random ids from c goroutines for d.
func load(consume func(context.Context, string, sealer.StateID, time.Time) error, c int, d time.Duration) ([]time.Duration, int) {
	return loadFunc(fresh(consume), c, d)
}

// loadWhile calls consume with fresh random ids from c goroutines until
// done is closed.
func loadWhile(consume func(context.Context, string, sealer.StateID, time.Time) error, c int, done <-chan struct{}) ([]time.Duration, int) {
	return loadUntil(fresh(consume), c, done)
}

// fresh is a call of consume on a fresh random id, live for an hour.
func fresh(consume func(context.Context, string, sealer.StateID, time.Time) error) func() error {
	return func() error {
		var id sealer.StateID
		rand.Read(id[:])
		return consume(context.Background(), scaleTenant, id, time.Now().Add(time.Hour))
	}
}

// advanceAsConsume advances fresh flows to round 1: a new entry, as a
// consume writes.
func advanceAsConsume(l ledger.Ledger) func(context.Context, string, sealer.StateID, time.Time) error {
	return func(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error {
		return l.Advance(ctx, tenant, sealer.FlowID(id), 1, until)
	}
}

// loadFunc calls op from c goroutines for d and returns the latencies of
// the calls that succeeded, sorted, and the count of those that failed.
func loadFunc(op func() error, c int, d time.Duration) ([]time.Duration, int) {
	done := make(chan struct{})
	t := time.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	return loadUntil(op, c, done)
}

// loadUntil is loadFunc until done is closed.
func loadUntil(op func() error, c int, done <-chan struct{}) ([]time.Duration, int) {
	var mu sync.Mutex
	var all []time.Duration
	failed := 0
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			var lat []time.Duration
			bad := 0
			for {
				select {
				case <-done:
					mu.Lock()
					all, failed = append(all, lat...), failed+bad
					mu.Unlock()
					return
				default:
				}
				start := time.Now()
				if err := op(); err != nil {
					bad++
					continue
				}
				lat = append(lat, time.Since(start))
			}
		})
	}
	wg.Wait()
	return sorted(all), failed
}

// printBeside prints consume latencies before some work (idle) and during
// it, and how their p99s compare.
func printBeside(before, while string, idle, during []time.Duration, failed int) {
	fmt.Println("| consumes | p50 | p99 | errors |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| %s | %s | %s | 0 |\n", before, micro(quantile(idle, 0.5)), micro(quantile(idle, 0.99)))
	fmt.Printf("| %s | %s | %s | %d |\n", while, micro(quantile(during, 0.5)), micro(quantile(during, 0.99)), failed)
	fmt.Printf("\nThe p99 %s is %.2fx the p99 %s.\n", while, float64(quantile(during, 0.99))/float64(max(1, quantile(idle, 0.99))), before)
}

// sweepUnderLoad adds expiring states that expire at once, then measures
// consumes idle, then while a sweep deletes them.
func sweepUnderLoad(l *embedded.Ledger, expiring, c int, d time.Duration) error {
	expiry := time.Now().Add(time.Second)
	if err := preloadEmbedded(l, expiring, expiry); err != nil {
		return err
	}
	time.Sleep(time.Until(expiry) + 10*time.Millisecond)
	idle, _ := load(l.Consume, c, d)
	var swept int
	var sweepErr error
	var took time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		swept, sweepErr = l.Sweep(time.Now())
		took = time.Since(start)
	}()
	during, failed := loadWhile(l.Consume, c, done)
	if sweepErr != nil {
		return sweepErr
	}
	fmt.Printf("\nSweep of %d expired states: %v.\n\n", swept, took.Round(time.Millisecond))
	printBeside("idle (no sweep)", "during the sweep", idle, during, failed)
	return nil
}

// preloadEmbedded records n random states as consumed until until, in
// batches, through the embedded ledger's import.
func preloadEmbedded(l *embedded.Ledger, n int, until time.Time) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(until.UnixMilli()))
	_, err := l.Import(func(put func(bool, []byte, []byte) error) error {
		k := make([]byte, 1+len(scaleTenant)+len(sealer.StateID{}))
		k[0] = byte(len(scaleTenant))
		copy(k[1:], scaleTenant)
		for range n {
			rand.Read(k[1+len(scaleTenant):])
			if err := put(false, k, v[:]); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}
