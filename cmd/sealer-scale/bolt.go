package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/bolt"
	"github.com/mcp-sealer/sealer/sealer"
)

const scaleTenant = "default"

// randomIDs returns n random state ids in ascending order.
func randomIDs(n int) []sealer.StateID {
	ids := make([]sealer.StateID, n)
	for i := range ids {
		rand.Read(ids[i][:])
	}
	slices.SortFunc(ids, func(a, b sealer.StateID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// consumeLoad consumes fresh random ids from c goroutines for d and returns
// the sorted latencies and the failures.
func consumeLoad(l ledger.Ledger, c int, d time.Duration) ([]time.Duration, int) {
	var mu sync.Mutex
	var all []time.Duration
	failed := 0
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			var lat []time.Duration
			bad := 0
			for time.Now().Before(end) {
				var id sealer.StateID
				rand.Read(id[:])
				start := time.Now()
				if err := l.Consume(context.Background(), scaleTenant, id, start.Add(time.Hour)); err != nil {
					bad++
					continue
				}
				lat = append(lat, time.Since(start))
			}
			mu.Lock()
			all, failed = append(all, lat...), failed+bad
			mu.Unlock()
		})
	}
	wg.Wait()
	return sorted(all), failed
}

// boltScale prints consume latency and bytes on disk per state of the
// embedded ledger by the live states it holds, then the consume latency
// while a sweep deletes sweep expired states beside the same without one.
func boltScale(dir string, levels []int, sweep, c int, d time.Duration) error {
	if dir == "" {
		return errors.New("bolt: -dir is required")
	}
	fmt.Println("| live states | consumes/s | consume p50 | consume p99 | errors | file bytes per state | preload took | reopen took |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, n := range levels {
		path := filepath.Join(dir, fmt.Sprintf("scale-%d.db", n))
		os.Remove(path)
		l, err := bolt.Open(path)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := preloadBolt(l, n, time.Now().Add(24*time.Hour)); err != nil {
			return err
		}
		took := time.Since(start)
		lat, failed := consumeLoad(l, c, d)
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		perState := "-"
		if n > 0 {
			perState = fmt.Sprintf("%.0f B", float64(fi.Size())/float64(n))
		}
		// Reopening rebuilds the free page list from the file (it is not
		// written on commit): what a restart costs at this size.
		l.Close()
		start = time.Now()
		if l, err = bolt.Open(path); err != nil {
			return err
		}
		reopen := time.Since(start)
		fmt.Printf("| %d | %.0f | %s | %s | %d | %s | %v | %v |\n", n, float64(len(lat))/d.Seconds(), micro(quantile(lat, 0.5)), micro(quantile(lat, 0.99)), failed, perState, took.Round(time.Second), reopen.Round(time.Millisecond))
		if n != levels[len(levels)-1] {
			l.Close()
			os.Remove(path)
			continue
		}
		// The sweep, on the largest ledger: sweep states expire now, then
		// consumes are measured idle, then while Sweep deletes them.
		expiry := time.Now().Add(time.Second)
		if err := preloadBolt(l, sweep, expiry); err != nil {
			return err
		}
		time.Sleep(time.Until(expiry) + 10*time.Millisecond)
		idle, _ := consumeLoad(l, c, d)
		var swept int
		var sweepErr error
		var sweepTook time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			s := time.Now()
			swept, sweepErr = l.Sweep(time.Now())
			sweepTook = time.Since(s)
		}()
		during, failed := consumeWhile(l, c, done)
		if sweepErr != nil {
			return sweepErr
		}
		fmt.Printf("\nSweep of %d expired states in a ledger of %d live ones: %v.\n\n", swept, n, sweepTook.Round(time.Millisecond))
		fmt.Println("| consumes | p50 | p99 | errors |")
		fmt.Println("|---|---|---|---|")
		fmt.Printf("| idle (no sweep) | %s | %s | 0 |\n", micro(quantile(idle, 0.5)), micro(quantile(idle, 0.99)))
		fmt.Printf("| during the sweep | %s | %s | %d |\n", micro(quantile(during, 0.5)), micro(quantile(during, 0.99)), failed)
		fmt.Printf("\nDuring the sweep p99 is %.1fx the idle p99.\n", float64(quantile(during, 0.99))/float64(max(1, quantile(idle, 0.99))))
		l.Close()
		os.Remove(path)
	}
	return nil
}

// consumeWhile consumes from c goroutines until done is closed.
func consumeWhile(l ledger.Ledger, c int, done <-chan struct{}) ([]time.Duration, int) {
	var mu sync.Mutex
	var all []time.Duration
	failed := 0
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var id sealer.StateID
				rand.Read(id[:])
				start := time.Now()
				err := l.Consume(context.Background(), scaleTenant, id, start.Add(time.Hour))
				took := time.Since(start)
				mu.Lock()
				if err != nil {
					failed++
				} else {
					all = append(all, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sorted(all), failed
}

// preloadBolt preloads n random states in transactions of 200,000.
func preloadBolt(l *bolt.Ledger, n int, until time.Time) error {
	ids := randomIDs(n)
	for len(ids) > 0 {
		k := min(len(ids), 200000)
		if err := l.Preload(scaleTenant, ids[:k], until); err != nil {
			return err
		}
		ids = ids[k:]
	}
	return nil
}
