package bolt

import (
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/mcp-sealer/sealer/sealer"
)

// Preload records ids of tenant as consumed until until, in one
// transaction, as that many Consume calls would have: for the scale
// benchmarks, which fill a ledger with millions of live states
// (bench/sealer-scale). Ids in ascending order append to the file's B-trees
// instead of splitting pages all over them.
func (b *Ledger) Preload(tenant string, ids []sealer.StateID, until time.Time) error {
	var exp [8]byte
	binary.BigEndian.PutUint64(exp[:], uint64(until.UnixMilli()))
	err := b.db.Update(func(tx *bbolt.Tx) error {
		idsB, expB := tx.Bucket(idsBucket), tx.Bucket(expiryBucket)
		for _, id := range ids {
			k := key(tenant, id)
			if err := idsB.Put(k, exp[:]); err != nil {
				return err
			}
			if err := expB.Put(append(exp[:], k...), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: preload: %v", err)
	}
	return nil
}
