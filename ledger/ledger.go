// Package ledger records one-time states as consumed, so that each opens at
// most once (R6).
//
// Backends live in packages of their own, so that a program links only the
// one it uses: ledger/embedded (a Pebble store in a local directory, one
// process) and ledger/redis (single node, Sentinel or Cluster, a fleet).
// ledgertest holds the conformance suite every backend passes. ledger/bolt
// is no backend: it only reads the bbolt file of earlier releases, which
// the embedded ledger imports once.
//
// A [Ledger] has two calls. Consume: the first call for a state id wins,
// every later one gets [ErrConsumed]. Advance, for the flows whose states
// open only at their latest round (FORMAT.md, "Latest round only"): a call
// wins when its round is above every round that won before for that flow,
// and records it; every other gets [ErrConsumed]. Each entry lives at least until the time the
// caller gives and then goes away by itself (R7), so a ledger holds at most
// the live one-time states. A ledger that cannot answer reports
// [ErrUnavailable]; callers must then refuse the open (fail closed), never
// treat the state as unconsumed.
//
// The caller chooses until so that the entry outlives every moment at which
// any replica could still accept the state: its expiry, plus the clock skew
// allowed, plus a margin for the ledger's round trip and for the clocks of
// replicas and ledger disagreeing. A consume that completes after the state's
// acceptance window is the caller's to refuse (the server does), never a win.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/sealer"
)

var (
	// ErrConsumed means the state was consumed before.
	ErrConsumed = errors.New("ledger: state already consumed")
	// ErrUnavailable means the ledger could not answer; the state's fate is
	// unknown and the open must fail.
	ErrUnavailable = errors.New("ledger: unavailable")
)

// ErrTooLate refuses a consume whose entry would expire at once (until is
// not in the future): recording nothing is not a win. It wraps
// ErrUnavailable.
var ErrTooLate = fmt.Errorf("%w: entry would expire at once (until is not in the future)", ErrUnavailable)

// Ledger consumes one-time states.
type Ledger interface {
	// Consume records id of tenant as consumed until at least the given
	// time. It returns nil for the first call, ErrConsumed for every later
	// one, and an error wrapping ErrUnavailable when it cannot tell or until
	// is not in the future.
	Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error
	// Advance records round as the highest round opened of flow of tenant,
	// until at least the given time, if it is above the highest recorded:
	// then it returns nil, and otherwise ErrConsumed. Flows and state ids
	// are apart: a flow id equal to a state id is another entry. Errors are
	// as for Consume.
	Advance(ctx context.Context, tenant string, flow sealer.FlowID, round uint32, until time.Time) error
}

// ErrPending means an entry was claimed for an outcome (Recorder.Claim)
// that is not recorded yet, and its wait is not over: the first open's
// handler may still be running.
var ErrPending = errors.New("ledger: outcome not recorded yet")

// ErrGone means a Recorder has no entry for what it was asked about: it
// was never consumed, or its entry expired.
var ErrGone = errors.New("ledger: no such entry")

// ErrConflict means an entry was claimed for an outcome (Recorder.Claim)
// with other answers than those of the retry asking for it (Entry.Answers,
// one of the two without any included): its outcome answers other
// inputResponses and is not the retry's. It wraps ErrConsumed: the state
// was consumed, by an open that answered otherwise.
var ErrConflict = fmt.Errorf("%w by an open with other answers", ErrConsumed)

// Entry names what Consume or Advance records, and the state asked about:
// the entry is the state ID when Round is 0, otherwise round Round of Flow,
// which any state of that round (a fork among them) may open; ID is always
// the state's. A claim of a flow's round is ID's, the state whose open won
// it, and only that state records its outcome and reads it (FORMAT.md,
// "Recorded outcomes").
type Entry struct {
	ID    sealer.StateID
	Flow  sealer.FlowID
	Round uint32
	// Answers is the answers digest of the open that claims the entry, or
	// of the retry asking for its outcome (FORMAT.md, "Recorded outcomes");
	// nil for none. A claim keeps it, and its outcome is only for a retry
	// with the same answers, or, for a claim without any, a retry without
	// any: ErrConflict for every other. Consume, Advance and Record do not
	// read it.
	Answers *sealer.Digest
}

// Recorder is a Ledger that also keeps the outcome of what it consumed:
// the answer an MCP server sent for a consumed state, sealed by the caller
// (FORMAT.md, "Recorded outcomes"), so that a retry of that state gets the
// same answer instead of a refusal. An outcome lives as long as its entry.
type Recorder interface {
	Ledger
	// Claim is Consume of e.ID (e.Round 0) or Advance of e.Flow to e.Round,
	// for a caller that will Record the outcome: Outcome answers
	// ErrPending for e until an outcome is recorded or wait has passed
	// since the claim (on the ledger's clock). A flow's round is claimed
	// for e.ID. The claim keeps e.Answers.
	Claim(ctx context.Context, tenant string, e Entry, until time.Time, wait time.Duration) error
	// Record stores outcome for e if e was claimed and nothing was recorded
	// for it since: nil then. It returns ErrConsumed when something was
	// recorded before, e was consumed without a claim, e's flow has moved
	// past e.Round, or e.Round was claimed for another state than e.ID (a
	// fork), whose claim it leaves as it is; ErrGone when e has no entry
	// (it expired); errors wrapping ErrUnavailable otherwise. An empty
	// outcome records that none will come: Outcome then answers
	// ErrConsumed. It keeps the claim's answers, whatever e.Answers is:
	// only the state that claimed e records for it.
	Record(ctx context.Context, tenant string, e Entry, outcome []byte) error
	// Outcome returns the outcome recorded for e. It returns ErrPending
	// while e is claimed, nothing is recorded and its wait is not over;
	// ErrConsumed when e was consumed without a claim, with no outcome
	// recorded in its wait, with an empty one, when e's flow has moved
	// past e.Round, or when e.Round was claimed for another state than
	// e.ID (never that state's outcome); ErrConflict when e was claimed
	// with other answers than e.Answers, whatever became of the claim
	// since (never its outcome, and no wait for it); ErrGone when e has
	// no entry.
	Outcome(ctx context.Context, tenant string, e Entry) ([]byte, error)
}

// Remaining returns how long an entry consumed now must live to last until
// until, or ErrTooLate when until is not in the future. Backends call it
// before they record anything.
func Remaining(until time.Time) (time.Duration, error) {
	d := until.Sub(wallclock.Now())
	if d <= 0 {
		return 0, ErrTooLate
	}
	return d, nil
}
