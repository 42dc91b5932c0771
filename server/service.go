package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// defaultTenant is the one implicit tenant of the embedded default.
const defaultTenant = "default"

// consumer is what the service needs of a ledger.
type consumer interface {
	Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error
}

// ringSource is what the service needs of the key refresher.
type ringSource interface {
	// Ring returns the current ring, nil before the first load.
	Ring() *keys.Ring
	// Demand refreshes at once (shared and rate-limited) and returns the
	// ring then, or the current ring when ctx ends first.
	Demand(ctx context.Context) *keys.Ring
}

// errNoKeys means no key ring has been loaded yet.
var errNoKeys = errors.New("sealer: no keys loaded yet")

// service implements sealerv1.SealerServer over the core.
type service struct {
	sealerv1.UnimplementedSealerServer
	keys     ringSource
	ledger   consumer
	auth     *authenticator
	audit    *auditor      // nil: no audit
	inFlight chan struct{} // admission slots; nil: unlimited
	cfg      Config
	now      func() time.Time
	log      *slog.Logger
	metrics  *metrics
	refusals *sampledLog
	trace    *tracing
	stopping chan struct{} // closed when the listeners stop accepting
}

// Seal implements sealerv1.SealerServer.
func (s *service) Seal(ctx context.Context, req *sealerv1.SealRequest) (*sealerv1.SealResponse, error) {
	t := tenantOf(ctx)
	d, err := bindingDigest(req.GetRequest())
	if err != nil {
		return nil, err
	}
	ttl := t.defaultTTL
	if req.Ttl != nil {
		if err := req.Ttl.CheckValid(); err != nil {
			return nil, fmt.Errorf("%w: ttl: %v", errBadRequest, err)
		}
		ttl = req.Ttl.AsDuration()
		if ttl < s.cfg.MinTTL || ttl > t.maxTTL {
			return nil, fmt.Errorf("%w: ttl %v outside [%v, %v]", errBadRequest, ttl, s.cfg.MinTTL, t.maxTTL)
		}
	}
	if len(req.GetPayload()) > t.maxPayload {
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds the tenant's %d", errBadRequest, len(req.GetPayload()), t.maxPayload)
	}
	oneTime := req.GetOneTime()
	switch t.oneTime {
	case oneTimeForced:
		oneTime = true
	case oneTimeForbidden:
		if oneTime {
			return nil, fmt.Errorf("%w: one-time states are not enabled for this tenant", errBadRequest)
		}
	}
	now := s.now()
	c := sealer.Claims{
		Principal: req.GetPrincipal(),
		Request:   d,
		IssuedAt:  now,
		ExpiresAt: now.Add(ttl),
		OneTime:   oneTime,
	}
	ring := s.keys.Ring()
	if ring == nil {
		return nil, errNoKeys
	}
	state, err := sealer.Seal(ring, t.name, c, req.GetPayload())
	if err != nil {
		return nil, err
	}
	return &sealerv1.SealResponse{
		RequestState: state,
		ExpiresAt:    timestamppb.New(c.ExpiresAt.Truncate(time.Millisecond)),
	}, nil
}

// Open implements sealerv1.SealerServer. A one-time state is consumed only
// after every other check passed, so a rejected attempt never burns it.
func (s *service) Open(ctx context.Context, req *sealerv1.OpenRequest) (*sealerv1.OpenResponse, error) {
	d, err := bindingDigest(req.GetRequest())
	if err != nil {
		return nil, err
	}
	want := sealer.Expect{Principal: req.GetPrincipal(), Request: d, Skew: s.cfg.Skew}
	if want.Principal == "" {
		return nil, fmt.Errorf("%w: empty principal", errBadRequest)
	}
	t := tenantOf(ctx)
	o, err := s.open(ctx, t, req.GetRequestState(), want)
	if err != nil {
		return nil, err
	}
	if o.OneTime {
		if err := s.consume(ctx, t.name, o); err != nil {
			return nil, err
		}
	}
	return &sealerv1.OpenResponse{
		Payload:   o.Payload,
		IssuedAt:  timestamppb.New(o.IssuedAt),
		ExpiresAt: timestamppb.New(o.ExpiresAt),
	}, nil
}

// consume records a one-time state in the ledger (R6). The entry outlives
// the last moment any replica can accept the state, expiry + skew on that
// replica's clock, by: another skew (the replicas' clocks may differ by up
// to skew, the documented meaning of --skew), the ledger's timeout (a
// consume in flight) and a second of scheduling. A consume that completes
// after the acceptance window is refused as expired, never counted as a win.
// On any failure the payload is zeroed: the caller gets none of it.
func (s *service) consume(ctx context.Context, tenant string, o *sealer.Opened) error {
	ctx, span := s.trace.tracer.Start(ctx, "sealer.ledger.consume")
	defer span.End()
	start := time.Now()
	until := o.ExpiresAt.Add(s.ledgerRetention())
	err := s.ledger.Consume(ctx, tenant, o.ID, until)
	if err == nil && o.Expired(s.now(), s.cfg.Skew) {
		err = sealer.ErrExpired
	}
	reason := ledgerReason(err)
	span.SetAttributes(attribute.String("sealer.ledger.outcome", reason))
	s.metrics.ledger.WithLabelValues(reason).Observe(time.Since(start).Seconds())
	if reason == reasonLedgerUnavailable {
		s.metrics.ledgerErr.Inc()
	}
	if err != nil {
		clear(o.Payload)
	}
	return err
}

// open opens a state with the current ring. A state that names a key version
// newer than the ring (a rotation this replica has not seen yet) makes the
// ring refresh at once, and the open is tried again with the new ring. The
// wait for that refresh counts against the tenant's limits and ends with the
// caller's deadline.
func (s *service) open(ctx context.Context, t *tenant, state string, want sealer.Expect) (*sealer.Opened, error) {
	ring := s.keys.Ring()
	if ring == nil {
		return nil, errNoKeys
	}
	o, err := sealer.Open(ring, t.name, state, want, s.now())
	if !errors.Is(err, sealer.ErrInvalid) {
		return o, err
	}
	if h, herr := sealer.Inspect(state); herr != nil || h.KeyVersion <= ring.Newest() {
		return nil, err
	}
	leave, ok := t.limiter.enterDemand()
	if !ok {
		return nil, err
	}
	fresh := s.keys.Demand(ctx)
	leave()
	if fresh != nil && fresh != ring {
		return sealer.Open(fresh, t.name, state, want, s.now())
	}
	return nil, err
}

// ledgerRetention is how long past its expiry a consumed state's ledger
// entry lives (see consume).
func (s *service) ledgerRetention() time.Duration {
	return 2*s.cfg.Skew + s.cfg.LedgerTimeout + time.Second
}

func ledgerReason(err error) string {
	switch {
	case err == nil:
		return reasonOK
	case errors.Is(err, ledger.ErrConsumed):
		return reasonAlreadyConsumed
	case errors.Is(err, sealer.ErrExpired):
		return reasonExpired
	}
	return reasonLedgerUnavailable
}
