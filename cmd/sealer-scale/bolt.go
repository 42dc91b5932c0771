package main

import (
	"bytes"
	"context"
	"crypto/rand"
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
