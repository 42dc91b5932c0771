package server

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"

	"github.com/mcp-sealer/sealer/internal/reasons"
)

// Limits answer at once, never queue: past them a caller gets a fast
// RESOURCE_EXHAUSTED instead of a timeout. The server's --max-in-flight
// bounds the calls served at once; each tenant's limiter its rate and its
// concurrent calls.

// errExhausted marks a call refused by a tenant's rate or concurrency limit.
var errExhausted = reasons.ErrResourceExhausted

// demandWaiters bounds the calls of one tenant that wait at once for an
// on-demand key refresh (an Open naming a key version the ring lacks), so
// that forged states cannot hold the server's in-flight slots while Vault
// hangs.
const demandWaiters = 4

// outcomeWaiters bounds the retries of one tenant that wait at once for a
// recorded outcome (see park); past it a retry is answered IN_PROGRESS at
// once.
const outcomeWaiters = 64

// limiter enforces one tenant's rate and concurrency limits.
type limiter struct {
	rate   *rate.Limiter // nil: unlimited
	sem    chan struct{} // nil: unlimited
	demand chan struct{} // calls waiting for an on-demand key refresh
	parked chan struct{} // retries waiting for a recorded outcome
}

func newLimiter(t *tenant) *limiter {
	l := &limiter{demand: make(chan struct{}, demandWaiters), parked: make(chan struct{}, outcomeWaiters)}
	if t.ratePerSecond > 0 {
		l.rate = rate.NewLimiter(rate.Limit(t.ratePerSecond), t.burst)
	}
	if t.maxConcurrent > 0 {
		l.sem = make(chan struct{}, t.maxConcurrent)
	}
	return l
}

// enter admits a call at once or refuses it: it never queues, so an
// overloaded tenant gets a fast RESOURCE_EXHAUSTED instead of a timeout.
func (l *limiter) enter() (leave func(), err error) {
	if l.rate != nil && !l.rate.Allow() {
		return nil, fmt.Errorf("%w: more than the tenant's rate of calls per second", errExhausted)
	}
	if l.sem == nil {
		return func() {}, nil
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem }, nil
	default:
		return nil, fmt.Errorf("%w: more than the tenant's concurrent calls", errExhausted)
	}
}

// enterDemand admits a call to wait for an on-demand key refresh, counted
// against the tenant's rate (one more call) and its demandWaiters, or
// refuses at once.
func (l *limiter) enterDemand() (leave func(), ok bool) {
	if l.rate != nil && !l.rate.Allow() {
		return nil, false
	}
	select {
	case l.demand <- struct{}{}:
		return func() { <-l.demand }, true
	default:
		return nil, false
	}
}

// park moves the call of ctx from the slots it holds to one of the tenant's
// outcomeWaiters, for a wait that costs the sealer a timer and a ledger read
// now and then: a retry waiting for a slow handler holds no slot that Seal,
// Open or the Record it waits for needs. ok is false when the tenant has
// outcomeWaiters waiting already.
func (l *limiter) park(ctx context.Context) (leave func(), ok bool) {
	select {
	case l.parked <- struct{}{}:
		freeSlots(ctx)
		return func() { <-l.parked }, true
	default:
		return nil, false
	}
}

// admit takes one of the server's in-flight slots, or refuses at once: past
// its capacity the sealer answers RESOURCE_EXHAUSTED quickly instead of
// letting every caller time out.
func (s *service) admit() error {
	if s.inFlight == nil {
		return nil
	}
	select {
	case s.inFlight <- struct{}{}:
		return nil
	default:
		return errBusy(cap(s.inFlight))
	}
}

func (s *service) release() {
	if s.inFlight != nil {
		<-s.inFlight
	}
}

func errBusy(limit int) error {
	return fmt.Errorf("%w: server busy, more than %d calls in flight", errExhausted, limit)
}
