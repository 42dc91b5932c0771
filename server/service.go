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
	"github.com/mcp-sealer/sealer/internal/reasons"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server/internal/audit"
	"github.com/mcp-sealer/sealer/server/internal/metrics"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// consumer is what the service needs of a ledger.
type consumer interface {
	Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error
	Advance(ctx context.Context, tenant string, flow sealer.FlowID, round uint32, until time.Time) error
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
var errNoKeys = reasons.ErrKeysUnavailable

// service implements sealerv1.SealerServer over the core.
type service struct {
	sealerv1.UnimplementedSealerServer
	keys     ringSource
	ledger   consumer
	recorder ledger.Recorder // nil: the ledger keeps no outcomes
	auth     *authenticator
	audit    *audit.Log    // nil: no audit
	inFlight chan struct{} // admission slots; nil: unlimited
	cfg      Config
	now      func() time.Time
	clock    *clockCheck // nil: no check
	log      *slog.Logger
	metrics  *metrics.Set
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
	ttl := t.DefaultTTL
	if req.Ttl != nil {
		if err := req.Ttl.CheckValid(); err != nil {
			return nil, fmt.Errorf("%w: ttl: %v", errBadRequest, err)
		}
		ttl = req.Ttl.AsDuration()
		if ttl < s.cfg.MinTTL || ttl > t.MaxTTL {
			return nil, fmt.Errorf("%w: ttl %v outside [%v, %v]", errBadRequest, ttl, s.cfg.MinTTL, t.MaxTTL)
		}
	}
	if len(req.GetPayload()) > t.MaxPayload {
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds the tenant's %d", errBadRequest, len(req.GetPayload()), t.MaxPayload)
	}
	oneTime := req.GetOneTime()
	switch t.OneTime {
	case tenant.OneTimeForced:
		oneTime = true
	case tenant.OneTimeForbidden:
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
	if req.Flow != nil {
		if c.Flow, err = s.flowOf(ctx, t, req.Flow, c); err != nil {
			return nil, err
		}
		if c.ExpiresAt.After(c.Flow.Deadline) {
			c.ExpiresAt = c.Flow.Deadline // no state of a flow outlives it
		}
	}
	ring := s.keys.Ring()
	if ring == nil {
		return nil, errNoKeys
	}
	state, err := sealer.Seal(ring, t.Name, c, req.GetPayload())
	if err != nil {
		return nil, err
	}
	return &sealerv1.SealResponse{
		RequestState: state,
		ExpiresAt:    timestamppb.New(c.ExpiresAt.Truncate(time.Millisecond)),
		Flow:         flowProto(c.Flow),
	}, nil
}

// flowOf returns the flow a new state of claims c carries: round 1 of a new
// flow, or the round after the state the request continues, which must be
// an authentic flow state of this tenant for c's principal and request.
func (s *service) flowOf(ctx context.Context, t *tenant.Tenant, req *sealerv1.FlowRequest, c sealer.Claims) (*sealer.Flow, error) {
	var f sealer.Flow
	if prev := req.GetContinues(); prev == "" {
		f = sealer.NewFlow(c.IssuedAt.Add(t.FlowTTL).Truncate(time.Millisecond)) // the deadline as sealed
	} else {
		want := sealer.Expect{Principal: c.Principal, Request: c.Request, Skew: s.cfg.Skew, MaxRounds: t.MaxRounds}
		err := s.withRing(ctx, t, prev, func(ring *keys.Ring) (err error) {
			f, err = sealer.Continue(ring, t.Name, prev, want, c.IssuedAt)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	f.LatestOnly = f.LatestOnly || req.GetLatestOnly()
	if f.LatestOnly && t.OneTime == tenant.OneTimeForbidden {
		return nil, fmt.Errorf("%w: latest-only flows use the ledger, which is not enabled for this tenant (oneTime: forbidden)", errBadRequest)
	}
	if req.Asked != nil {
		asked, err := sealer.InputsOf(req.Asked.GetKeys())
		if err != nil {
			return nil, err
		}
		f.Asked = asked
	}
	return &f, nil
}

// flowProto is f as the API carries it; nil for nil.
func flowProto(f *sealer.Flow) *sealerv1.Flow {
	if f == nil {
		return nil
	}
	return &sealerv1.Flow{Id: f.ID[:], Round: f.Round, Deadline: timestamppb.New(f.Deadline), LatestOnly: f.LatestOnly}
}

// respondedInputs is the digest of the input keys a retry answers: those
// the caller names, else the member names of the params' inputResponses
// (none when absent). With neither (a digest binding), or keys that have no
// digest, it is zero: not known, which opens no state whose round asked
// input keys.
func respondedInputs(req *sealerv1.OpenRequest) sealer.Inputs {
	var names []string
	switch params := req.GetRequest().GetParams(); {
	case req.Responded != nil:
		names = req.Responded.GetKeys()
	case params != nil:
		v, ok := params.GetFields()["inputResponses"]
		if ok {
			obj := v.GetStructValue()
			if obj == nil || len(obj.GetFields()) > sealer.MaxInputKeys {
				return sealer.Inputs{} // null or not an object: not known; too many: no digest
			}
			for name := range obj.GetFields() {
				names = append(names, name)
			}
		}
	default:
		return sealer.Inputs{}
	}
	in, err := sealer.InputsOf(names)
	if err != nil {
		return sealer.Inputs{}
	}
	return in
}

// Open implements sealerv1.SealerServer. A one-time state is consumed only
// after every other check passed, so a rejected attempt never burns it.
func (s *service) Open(ctx context.Context, req *sealerv1.OpenRequest) (*sealerv1.OpenResponse, error) {
	d, err := bindingDigest(req.GetRequest())
	if err != nil {
		return nil, err
	}
	t := tenantOf(ctx)
	want := sealer.Expect{Principal: req.GetPrincipal(), Request: d, Skew: s.cfg.Skew, MaxRounds: t.MaxRounds}
	if want.Principal == "" {
		return nil, fmt.Errorf("%w: empty principal", errBadRequest)
	}
	answers, err := answersOf(req)
	if err != nil {
		return nil, err
	}
	want.Inputs = respondedInputs(req)
	state := req.GetRequestState()
	var o *sealer.Opened
	err = s.withRing(ctx, t, state, func(ring *keys.Ring) (err error) {
		o, err = sealer.Open(ring, t.Name, state, want, s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	recording := false
	if o.OneTime || o.Flow != nil && o.Flow.LatestOnly {
		recording = s.recording(req)
		if err := s.consume(ctx, t.Name, o, answers, recording); err != nil {
			if recording && errors.Is(err, ledger.ErrConsumed) {
				return s.replay(ctx, t, o, answers)
			}
			return nil, err
		}
	}
	return &sealerv1.OpenResponse{
		Payload:   o.Payload,
		IssuedAt:  timestamppb.New(o.IssuedAt),
		ExpiresAt: timestamppb.New(o.ExpiresAt),
		Flow:      flowProto(o.Flow),
		Recording: recording,
	}, nil
}

// answersOf is the answers digest the caller sent with req, nil for none
// (FORMAT.md, "Recorded outcomes"). The sealer never computes it from the
// params: the caller digests the answers its handler acts on.
func answersOf(req *sealerv1.OpenRequest) (*sealer.Digest, error) {
	a := req.GetAnswers()
	switch len(a) {
	case 0:
		return nil, nil
	case len(sealer.Digest{}):
		return (*sealer.Digest)(a), nil
	}
	return nil, fmt.Errorf("%w: answers of %d bytes, want 32 or none", errBadRequest, len(a))
}

// consume records an opened state in the ledger: a one-time state under its
// id (R6), a latest-round-only state under its flow, as its round (which
// also opens each such state at most once). The entry outlives the last
// moment any replica can accept the state (expiry + that replica's skew on
// its clock; the flow's deadline) by: the clocks' differences the clock
// check allows (ledgerRetention), the ledger's timeout (a consume in
// flight) and a second of scheduling. A consume that
// completes after the acceptance window is refused as expired (or flow
// expired), never counted as a win. On any failure the payload is zeroed:
// the caller gets none of it. With recording, the entry is claimed for the
// outcome the caller will record (see replay), with the open's answers
// (nil for none).
func (s *service) consume(ctx context.Context, tenant string, o *sealer.Opened, answers *sealer.Digest, recording bool) error {
	ctx, span := s.trace.tracer.Start(ctx, "sealer.ledger.consume")
	defer span.End()
	start := time.Now()
	err := s.clock.refusal()
	switch f := o.Flow; {
	case err != nil:
	case recording:
		err = s.recorder.Claim(ctx, tenant, entryOf(o, answers), s.entryUntil(o), s.cfg.OutcomeWait)
	case f != nil && f.LatestOnly:
		err = s.ledger.Advance(ctx, tenant, f.ID, f.Round, s.entryUntil(o))
	default:
		err = s.ledger.Consume(ctx, tenant, o.ID, s.entryUntil(o))
	}
	if err == nil {
		now := s.now()
		switch {
		case o.Expired(now, s.cfg.Skew):
			err = sealer.ErrExpired
		case o.Flow != nil && o.Flow.Expired(now):
			err = sealer.ErrFlowExpired
		}
	}
	reason := ledgerReason(err)
	span.SetAttributes(attribute.String("sealer.ledger.outcome", reason))
	s.metrics.LedgerCall(reason, time.Since(start))
	// A caller that hung up is not a ledger failure: counted, it would page
	// (the ledger-errors alert) for every client that gives up.
	if reason == reasonLedgerUnavailable && !errors.Is(ctx.Err(), context.Canceled) {
		s.metrics.LedgerFailed()
	}
	if err != nil {
		clear(o.Payload)
	}
	return err
}

// withRing runs open, which opens state, with the current ring. A state
// that names a key version newer than the ring (a rotation this replica has
// not seen yet) makes the ring refresh at once, and open runs again with the
// new ring. The wait for that refresh counts against the tenant's limits
// and ends with the caller's deadline.
func (s *service) withRing(ctx context.Context, t *tenant.Tenant, state string, open func(*keys.Ring) error) error {
	ring := s.keys.Ring()
	if ring == nil {
		return errNoKeys
	}
	err := open(ring)
	if !errors.Is(err, sealer.ErrInvalid) {
		return err
	}
	if h, herr := sealer.Inspect(state); herr != nil || h.KeyVersion <= ring.Newest() {
		return err
	}
	leave, ok := t.Limiter.EnterDemand()
	if !ok {
		return err
	}
	fresh := s.keys.Demand(ctx)
	leave()
	if fresh != nil && fresh != ring {
		return open(fresh)
	}
	return err
}

// ledgerRetention is how long past its expiry a consumed state's ledger
// entry lives (see consume). It is computed from MaxSkew, not this
// replica's skew: a replica may accept a state until its expiry plus its
// own skew (up to MaxSkew) on its own clock, which the clock check keeps
// within ClockLimit(MaxSkew) of the ledger's, as it keeps this replica's;
// the entry, timed on this replica's clock, must outlast that.
func (s *service) ledgerRetention() time.Duration {
	return MaxSkew + 2*ClockLimit(MaxSkew) + s.cfg.LedgerTimeout + time.Second
}

func ledgerReason(err error) string {
	switch {
	case err == nil:
		return reasonOK
	case errors.Is(err, ledger.ErrConsumed):
		return reasonAlreadyConsumed
	case errors.Is(err, sealer.ErrExpired):
		return reasonExpired
	case errors.Is(err, sealer.ErrFlowExpired):
		return reasonFlowExpired
	}
	return reasonLedgerUnavailable
}
