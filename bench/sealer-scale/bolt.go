package main

import (
	"bytes"
	"crypto/rand"
	"slices"
	"time"

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
