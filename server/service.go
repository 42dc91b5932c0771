package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
	// Demand refreshes at once (rate-limited) and returns the ring then.
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
	auditLog *slog.Logger  // nil: no audit
	inFlight chan struct{} // admission slots; nil: unlimited
	cfg      Config
	now      func() time.Time
	log      *slog.Logger
	metrics  *metrics
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
	tenant := tenantOf(ctx).name
	o, err := s.open(ctx, tenant, req.GetRequestState(), want)
	if err != nil {
		return nil, err
	}
	if o.OneTime {
		t := time.Now()
		err := s.ledger.Consume(ctx, tenant, o.ID, o.ExpiresAt.Add(s.cfg.Skew))
		reason := ledgerReason(err)
		s.metrics.ledger.WithLabelValues(reason).Observe(time.Since(t).Seconds())
		if reason == reasonLedgerUnavailable {
			s.metrics.ledgerErr.Inc()
		}
		if err != nil {
			return nil, err
		}
	}
	return &sealerv1.OpenResponse{
		Payload:   o.Payload,
		IssuedAt:  timestamppb.New(o.IssuedAt),
		ExpiresAt: timestamppb.New(o.ExpiresAt),
	}, nil
}

// open opens a state with the current ring. A state that names a key version
// newer than the ring (a rotation this replica has not seen yet) makes the
// ring refresh at once, and the open is tried again with the new ring.
func (s *service) open(ctx context.Context, tenant, state string, want sealer.Expect) (*sealer.Opened, error) {
	ring := s.keys.Ring()
	if ring == nil {
		return nil, errNoKeys
	}
	o, err := sealer.Open(ring, tenant, state, want, s.now())
	if !errors.Is(err, sealer.ErrInvalid) {
		return o, err
	}
	if h, herr := sealer.Inspect(state); herr != nil || h.KeyVersion <= ring.Newest() {
		return nil, err
	}
	if fresh := s.keys.Demand(ctx); fresh != nil && fresh != ring {
		return sealer.Open(fresh, tenant, state, want, s.now())
	}
	return nil, err
}

func ledgerReason(err error) string {
	switch {
	case err == nil:
		return reasonOK
	case errors.Is(err, ledger.ErrConsumed):
		return reasonAlreadyConsumed
	}
	return reasonLedgerUnavailable
}
