// Package bolt reads the one-time ledger file of the releases before
// ledger/embedded (a bbolt file, dataDir/ledger.db) so that the embedded
// ledger can import it once, at the upgrade. It only reads: the file is
// opened read only, and nothing here writes one.
//
// # The file
//
// Two buckets hold the entries (two more, "expiry" and "flow-expiry",
// indexed them by deadline for the sweeps and are not read):
//
//	consumed: key -> u64 until (Unix ms)
//	flows:    key -> u64 until (Unix ms) || u32 highest round opened
//
// A key is the tenant, prefixed by its length in one byte, then the 16-byte
// state or flow id. Integers are big-endian.
package bolt

import (
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// buckets are the buckets of the entries, and whether each holds flows.
var buckets = []struct {
	name []byte
	flow bool
}{
	{[]byte("consumed"), false},
	{[]byte("flows"), true},
}

// Each calls put with every entry of the ledger file at path: whether it is
// a flow's, its key and its value, as the file holds them (see the package
// doc), the deadline included, expired or not. It opens the file read only,
// waits at most a second for a process that holds it, and closes it before
// returning. An error of put's stops the walk and is returned as it is.
func Each(path string, put func(flow bool, key, value []byte) error) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("ledger: open %s: %v", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		for _, bu := range buckets {
			b := tx.Bucket(bu.name)
			if b == nil {
				continue
			}
			if err := b.ForEach(func(k, v []byte) error { return put(bu.flow, k, v) }); err != nil {
				return err
			}
		}
		return nil
	})
}
