package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// Recorded outcomes (README, "Recorded outcomes"): an open with
// record_outcome that consumes a state claims its ledger entry for an
// outcome; the caller runs its handler and records the answer it sent
// (Record), sealed here under the tenant's key and bound to the state
// (FORMAT.md, "Recorded outcomes"). A retry of that state that passes every
// check of Open gets the outcome instead of ALREADY_CONSUMED, and waits for
// it while the handler may still run. The outcome lives as long as the
// entry, so nothing outlives what the ledger keeps anyway.

// Results of sealer_outcomes_total.
const (
	outcomeRecorded    = "recorded"      // Record kept an outcome
	outcomeNone        = "none"          // Record kept that none will come (empty)
	outcomeTooLarge    = "too_large"     // Record refused one over the limit
	outcomeRefused     = "refused"       // Record came second, or after the entry expired
	outcomeFailed      = "record_failed" // the ledger could not keep it (alerted)
	outcomeReplayed    = "replayed"      // a retry got a recorded outcome
	outcomeInProgress  = "in_progress"   // a retry waited for it in vain
	outcomeUnavailable = "unreadable"    // a retry found none it could give
	outcomeConflict    = "conflict"      // a retry answered otherwise than the open that consumed its state
)

// recording reports whether an open of a state with these claims, asking
// for it, claims the state's entry for an outcome.
func (s *service) recording(req *sealerv1.OpenRequest) bool {
	return req.GetRecordOutcome() && s.recorder != nil && s.cfg.OutcomeLimit > 0
}

// entryOf is the ledger entry an open of o consumes, asked about by o with
// answers (nil for none): its flow's round for a latest-only flow,
// otherwise its id (see consume). The ledger keeps a round's outcome for
// the state whose open claimed it, so another state of that round (a fork)
// neither records nor reads it, and gives it only to a retry with the
// answers of that open (ledger.ErrConflict for any other).
func entryOf(o *sealer.Opened, answers *sealer.Digest) ledger.Entry {
	if f := o.Flow; f != nil && f.LatestOnly {
		return ledger.Entry{ID: o.ID, Flow: f.ID, Round: f.Round, Answers: answers}
	}
	return ledger.Entry{ID: o.ID, Answers: answers}
}

// entryUntil is how long the entry of o lives (see consume).
func (s *service) entryUntil(o *sealer.Opened) time.Time {
	if f := o.Flow; f != nil && f.LatestOnly {
		return f.Deadline.Add(s.ledgerRetention())
	}
	return o.ExpiresAt.Add(s.ledgerRetention())
}

// replayPoll bounds the pause between two reads of an outcome a retry waits
// for: short first (a handler that just finished), longer after.
const (
	replayPollFirst = 20 * time.Millisecond
	replayPollMax   = 250 * time.Millisecond
)

// replay answers a retry of o, which a recording open consumed before, with
// the outcome recorded for it, the retry's answers being answers.
// While the ledger says it is pending (the first open's handler may still
// run) it reads again, parked (it holds no in-flight slot meanwhile), until
// the caller's deadline is near: then IN_PROGRESS. A retry whose answers
// are not those of the open that consumed the state is OUTCOME_CONFLICT at
// once. A state consumed with no outcome to give, a fork of the state whose
// open claimed its round, or an outcome that does not open for o is
// ALREADY_CONSUMED.
func (s *service) replay(ctx context.Context, t *tenant.Tenant, o *sealer.Opened, answers *sealer.Digest) (*sealerv1.OpenResponse, error) {
	clear(o.Payload)
	ctx, span := s.trace.tracer.Start(ctx, "sealer.ledger.outcome")
	defer span.End()
	e := entryOf(o, answers)
	// The claim is at most OutcomeWait old, and the ledger says ErrConsumed
	// once it is older with nothing recorded: a wait past that, by two
	// polls, ends in one answer or the other.
	last := time.Now().Add(s.cfg.OutcomeWait + 2*replayPollMax)
	if d, ok := ctx.Deadline(); ok {
		// Leave the answer time to reach the caller: a tenth of what is
		// left, at least 50ms.
		if end := d.Add(-max(time.Until(d)/10, 50*time.Millisecond)); end.Before(last) {
			last = end
		}
	}
	result := outcomeInProgress
	defer func() {
		span.SetAttributes(attribute.String("sealer.outcome", result))
		s.metrics.Outcome(t.Name, result)
	}()
	for pause := replayPollFirst; ; pause = min(2*pause, replayPollMax) {
		blob, err := s.recorder.Outcome(ctx, t.Name, e)
		switch {
		case err == nil:
			resp, err := s.openOutcome(t, o, blob)
			if err != nil {
				result = outcomeUnavailable
				return nil, err
			}
			result = outcomeReplayed
			return resp, nil
		case errors.Is(err, ledger.ErrGone):
			result = outcomeUnavailable
			return nil, ledger.ErrConsumed // consumed a moment ago, so it expired since
		case errors.Is(err, ledger.ErrConflict):
			result = outcomeConflict
			return nil, err
		case !errors.Is(err, ledger.ErrPending) && pause > replayPollFirst && ctx.Err() != nil:
			// A read the caller's deadline cut short, after reads that found
			// it pending (a late timer on a busy machine): still pending.
			return nil, ledger.ErrPending
		case !errors.Is(err, ledger.ErrPending):
			result = outcomeUnavailable
			return nil, err
		}
		if time.Now().Add(pause).After(last) {
			return nil, ledger.ErrPending
		}
		if pause == replayPollFirst {
			leave, ok := t.Limiter.Park()
			if !ok {
				return nil, ledger.ErrPending
			}
			freeSlots(ctx)
			defer leave()
		}
		select {
		case <-ctx.Done():
			return nil, ledger.ErrPending
		case <-time.After(pause):
		}
	}
}

// openOutcome opens an outcome blob recorded for o.
func (s *service) openOutcome(t *tenant.Tenant, o *sealer.Opened, blob []byte) (*sealerv1.OpenResponse, error) {
	ring := s.keys.Ring()
	if ring == nil {
		return nil, errNoKeys
	}
	data, at, err := sealer.OpenOutcome(ring, t.Name, o.ID, blob)
	if err != nil {
		return nil, ledger.ErrConsumed
	}
	return &sealerv1.OpenResponse{
		IssuedAt:  timestamppb.New(o.IssuedAt),
		ExpiresAt: timestamppb.New(o.ExpiresAt),
		Flow:      flowProto(o.Flow),
		Outcome:   &sealerv1.Outcome{Data: data, RecordedAt: timestamppb.New(at)},
	}, nil
}

// errNoOutcomes refuses Record on a sealer that keeps no outcomes.
var errNoOutcomes = fmt.Errorf("%w: this sealer keeps no outcomes (outcome-limit 0, or a ledger without them)", errBadRequest)

// errNotClaimed refuses Record of a state whose entry the ledger does not
// hold: never consumed, or expired since.
var errNotClaimed = fmt.Errorf("%w: no open with record_outcome consumed this state, or its ledger entry expired", errBadRequest)

// Record implements sealerv1.SealerServer. The state must be authentic for
// the tenant; it need not be live (the handler may have outlived it), since
// the ledger keeps the outcome only while the entry lives. An outcome over
// the limit is refused and recorded as none, so that retries are refused
// at once instead of waiting for one.
func (s *service) Record(ctx context.Context, req *sealerv1.RecordRequest) (*sealerv1.RecordResponse, error) {
	if s.recorder == nil || s.cfg.OutcomeLimit == 0 {
		return nil, errNoOutcomes
	}
	t := tenantOf(ctx)
	state := req.GetRequestState()
	var o *sealer.Opened
	err := s.withRing(ctx, t, state, func(ring *keys.Ring) (err error) {
		o, err = sealer.Authenticate(ring, t.Name, state)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !o.OneTime && (o.Flow == nil || !o.Flow.LatestOnly) {
		return nil, fmt.Errorf("%w: the state is neither one-time nor latest-only: no open consumed it", errBadRequest)
	}
	e, data := entryOf(o, nil), req.GetOutcome()
	result := outcomeRecorded
	var blob []byte
	switch {
	case len(data) > s.cfg.OutcomeLimit:
		result, err = outcomeTooLarge, fmt.Errorf("%w: outcome of %d bytes over this sealer's limit of %d: not kept, and retries of the state are refused", errBadRequest, len(data), s.cfg.OutcomeLimit)
	case len(data) == 0:
		result = outcomeNone
	default:
		ring := s.keys.Ring()
		if ring == nil {
			return nil, errNoKeys
		}
		if blob, err = sealer.SealOutcome(ring, t.Name, o.ID, data, s.now()); err != nil {
			return nil, err
		}
	}
	rerr := s.recorder.Record(ctx, t.Name, e, blob)
	switch {
	case rerr == nil:
	case errors.Is(rerr, ledger.ErrGone):
		rerr, result = errNotClaimed, outcomeRefused
	case errors.Is(rerr, ledger.ErrConsumed):
		result = outcomeRefused
	default:
		result = outcomeFailed
		if !errors.Is(ctx.Err(), context.Canceled) {
			s.metrics.LedgerFailed()
		}
	}
	s.metrics.Outcome(t.Name, result)
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	return &sealerv1.RecordResponse{KeptUntil: timestamppb.New(s.entryUntil(o))}, nil
}
