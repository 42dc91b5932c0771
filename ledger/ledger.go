// Package ledger records one-time states as consumed, so that each opens at
// most once (R6).
//
// A [Ledger] has one call, Consume: the first call for a state id wins, every
// later one gets [ErrConsumed]. Entries live until the state's expiry (plus
// clock skew) and then go away by themselves (R7), so a ledger holds at most
// the live one-time states. A ledger that cannot answer reports
// [ErrUnavailable]; callers must then refuse the open (fail closed), never
// treat the state as unconsumed.
package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-sealer/sealer/sealer"
)

var (
	// ErrConsumed means the state was consumed before.
	ErrConsumed = errors.New("ledger: state already consumed")
	// ErrUnavailable means the ledger could not answer; the state's fate is
	// unknown and the open must fail.
	ErrUnavailable = errors.New("ledger: unavailable")
)

// Ledger consumes one-time states.
type Ledger interface {
	// Consume records id of tenant as consumed until the given time. It
	// returns nil for the first call, ErrConsumed for every later one, and an
	// error wrapping ErrUnavailable when it cannot tell.
	Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error
}

// key is the ledger key of a state: the tenant, length-prefixed, then the id.
func key(tenant string, id sealer.StateID) []byte {
	k := make([]byte, 0, 1+len(tenant)+len(id))
	k = append(k, byte(len(tenant)))
	k = append(k, tenant...)
	return append(k, id[:]...)
}
