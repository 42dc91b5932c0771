package embedded

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

var _ ledger.Recorder = (*Ledger)(nil)

// Claim implements ledger.Recorder: Consume or Advance, with the entry
// pending until wait has passed on this host's clock; a flow's round
// claimed for e.ID; e.Answers kept.
func (l *Ledger) Claim(ctx context.Context, tenant string, e ledger.Entry, until time.Time, wait time.Duration) error {
	claim := make([]byte, 0, 1+len(e.ID)+1+len(sealer.Digest{})+9)
	if e.Round != 0 {
		claim = append(append(claim, stateClaimant), e.ID[:]...)
	}
	if e.Answers != nil {
		claim = append(append(claim, stateAnswers), e.Answers[:]...)
	}
	claim = binary.BigEndian.AppendUint64(append(claim, statePending), uint64(wallclock.Now().Add(max(0, wait)).UnixMilli()))
	if e.Round == 0 {
		return l.consume(ctx, tenant, e.ID, until, claim)
	}
	return l.advance(ctx, tenant, e.Flow, e.Round, until, claim)
}

// Record implements ledger.Recorder: the entry keeps its fixed part, so
// its until, its claimant and its answers, and takes the outcome as its
// state, committed durably.
func (l *Ledger) Record(ctx context.Context, tenant string, e ledger.Entry, outcome []byte) error {
	k, fixed := outcomeKey(tenant, e)
	return l.update(ctx, k, func(old []byte) ([]byte, error) {
		keep, _, err := stateAt(old, fixed, e)
		switch {
		case err != nil:
			return nil, err
		case len(old) == keep || old[keep] != statePending:
			return nil, ledger.ErrConsumed
		}
		v := append(make([]byte, 0, keep+1+len(outcome)), old[:keep]...)
		if len(outcome) == 0 {
			return append(v, stateNone), nil
		}
		return append(append(v, stateOutcome), outcome...), nil
	})
}

// Outcome implements ledger.Recorder, with the end of a claim's wait
// judged on this host's clock.
func (l *Ledger) Outcome(ctx context.Context, tenant string, e ledger.Entry) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	k, fixed := outcomeKey(tenant, e)
	l.life.RLock()
	defer l.life.RUnlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	v, err := l.get(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	keep, answers, err := stateAt(v, fixed, e)
	if err != nil {
		return nil, err
	}
	switch state := v[keep:]; {
	case len(state) == 0 && answers == nil:
		return nil, ledger.ErrConsumed // consumed without a claim
	case len(state) == 0 || state[0] != stateNone && state[0] != stateOutcome && state[0] != statePending:
		return nil, errDamaged(v)
	case !sameAnswers(answers, e.Answers):
		return nil, ledger.ErrConflict
	case state[0] == stateNone:
		return nil, ledger.ErrConsumed
	case state[0] == stateOutcome && len(state) > 1:
		return state[1:], nil
	case state[0] == statePending && len(state) == 9:
		if wallclock.Now().UnixMilli() < int64(binary.BigEndian.Uint64(state[1:])) {
			return nil, ledger.ErrPending
		}
		return nil, ledger.ErrConsumed
	}
	return nil, errDamaged(v)
}

// outcomeKey is the store key of e of tenant and the size of its value's
// fixed part.
func outcomeKey(tenant string, e ledger.Entry) ([]byte, int) {
	if e.Round == 0 {
		return entryKey(kindID, e.ID[:], tenant), idFixed
	}
	return entryKey(kindFlow, e.Flow[:], tenant), flowFixed
}

// stateAt returns where the outcome state of v begins, v being the value
// of an entry with a fixed part of fixed bytes, asked about by e: after the
// fixed part of a state's entry, after the claimant of a flow's round, and
// after the answers of the claim, which it returns (nil for none). It
// returns ErrGone when there is no entry or the flow is below e.Round (the
// round's entry expired), and ErrConsumed when the flow moved past it, or
// its round was not claimed for e.ID: advanced without a claim, claimed
// for another state (a fork), or claimed by an earlier release, which
// named no state (fail closed: a retry is refused, never answered with
// another state's outcome).
func stateAt(v []byte, fixed int, e ledger.Entry) (int, []byte, error) {
	switch {
	case v == nil:
		return 0, nil, ledger.ErrGone
	case len(v) < fixed:
		return 0, nil, errDamaged(v)
	case e.Round == 0:
		return answersAt(v, fixed)
	}
	switch held := binary.BigEndian.Uint32(v[8:]); {
	case held < e.Round:
		return 0, nil, ledger.ErrGone
	case held > e.Round:
		return 0, nil, ledger.ErrConsumed
	}
	claimant := v[fixed:]
	switch {
	case len(claimant) == 0, claimant[0] == statePending, claimant[0] == stateOutcome, claimant[0] == stateNone:
		return 0, nil, ledger.ErrConsumed
	case claimant[0] != stateClaimant || len(claimant) < 1+len(e.ID):
		return 0, nil, errDamaged(v)
	case !bytes.Equal(claimant[1:1+len(e.ID)], e.ID[:]):
		return 0, nil, ledger.ErrConsumed
	}
	return answersAt(v, fixed+1+len(e.ID))
}

// answersAt reads the answers of a claim that may begin at i in v, and
// returns where the outcome state begins after them.
func answersAt(v []byte, i int) (int, []byte, error) {
	const n = len(sealer.Digest{})
	switch {
	case i == len(v) || v[i] != stateAnswers:
		return i, nil, nil
	case len(v) < i+1+n:
		return 0, nil, errDamaged(v)
	}
	return i + 1 + n, v[i+1 : i+1+n], nil
}

// sameAnswers reports whether a claim's answers, nil for none, are want:
// none for none, or the same digest.
func sameAnswers(claimed []byte, want *sealer.Digest) bool {
	if claimed == nil || want == nil {
		return claimed == nil && want == nil
	}
	return subtle.ConstantTimeCompare(claimed, want[:]) == 1
}

// errDamaged refuses an entry no release writes.
func errDamaged(v []byte) error {
	return fmt.Errorf("%w: damaged entry of %d bytes", ledger.ErrUnavailable, len(v))
}
