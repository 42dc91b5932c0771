package tenant

import (
	"fmt"

	"golang.org/x/time/rate"

	"github.com/mcp-sealer/sealer/internal/reasons"
)

// Limits answer at once, never queue: past them a caller gets a fast
// RESOURCE_EXHAUSTED instead of a timeout. Each tenant's limiter bounds its
// rate and its concurrent calls (and the server's --max-in-flight all
// calls at once).

// errExhausted marks a call refused by a tenant's rate or concurrency limit.
var errExhausted = reasons.ErrResourceExhausted

// DemandWaiters bounds the calls of one tenant that wait at once for an
// on-demand key refresh (an Open naming a key version the ring lacks), so
// that forged states cannot hold the server's in-flight slots while Vault
// hangs.
const DemandWaiters = 4

// OutcomeWaiters bounds the retries of one tenant that wait at once for a
// recorded outcome (see Park); past it a retry is answered IN_PROGRESS at
// once.
const OutcomeWaiters = 64

// A Limiter enforces one tenant's rate and concurrency limits.
type Limiter struct {
	rate   *rate.Limiter // nil: unlimited
	sem    chan struct{} // nil: unlimited
	demand chan struct{} // calls waiting for an on-demand key refresh
	parked chan struct{} // retries waiting for a recorded outcome
}

// NewLimiter returns a limiter of t's rate and concurrency limits.
func NewLimiter(t *Tenant) *Limiter {
	l := &Limiter{demand: make(chan struct{}, DemandWaiters), parked: make(chan struct{}, OutcomeWaiters)}
	if t.RatePerSecond > 0 {
		l.rate = rate.NewLimiter(rate.Limit(t.RatePerSecond), t.Burst)
	}
	if t.MaxConcurrent > 0 {
		l.sem = make(chan struct{}, t.MaxConcurrent)
	}
	return l
}

// Enter admits a call at once or refuses it: it never queues, so an
// overloaded tenant gets a fast RESOURCE_EXHAUSTED instead of a timeout.
func (l *Limiter) Enter() (leave func(), err error) {
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

// EnterDemand admits a call to wait for an on-demand key refresh, counted
// against the tenant's rate (one more call) and its DemandWaiters, or
// refuses at once.
func (l *Limiter) EnterDemand() (leave func(), ok bool) {
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

// Park takes one of the tenant's OutcomeWaiters, for a retry that waits
// for a recorded outcome, a wait that costs the sealer a timer and a ledger
// read now and then: its caller gives back the slots the call holds, so
// that it holds none that Seal, Open or the Record it waits for needs. ok
// is false when the tenant has OutcomeWaiters waiting already.
func (l *Limiter) Park() (leave func(), ok bool) {
	select {
	case l.parked <- struct{}{}:
		return func() { <-l.parked }, true
	default:
		return nil, false
	}
}

// Held reports what the limiter holds now: calls in the tenant's
// concurrency slots, and retries parked waiting for an outcome.
func (l *Limiter) Held() (calls, parked int) { return len(l.sem), len(l.parked) }
