package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/sealer"
)

// sealerMethods prefixes the methods the interceptor guards.
var sealerMethods = "/" + sealerv1.Sealer_ServiceDesc.ServiceName + "/"

// errExhausted marks a call refused by a tenant's rate or concurrency limit.
var errExhausted = errors.New("sealer: tenant limit exceeded")

// demandWaiters bounds the calls of one tenant that wait at once for an
// on-demand key refresh (an Open naming a key version the ring lacks), so
// that forged states cannot hold the server's in-flight slots while Vault
// hangs.
const demandWaiters = 4

// limiter enforces one tenant's rate and concurrency limits.
type limiter struct {
	rate   *rate.Limiter // nil: unlimited
	sem    chan struct{} // nil: unlimited
	demand chan struct{} // calls waiting for an on-demand key refresh
}

func newLimiter(t *tenant) *limiter {
	l := &limiter{demand: make(chan struct{}, demandWaiters)}
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

// unary is the one interceptor of every Seal and Open, for gRPC and REST
// callers alike: the caller was authenticated by the front door (tap or
// gateHTTP) before its message was read; here the server's and the tenant's
// limits apply, errors become statuses, and metrics and the audit event are
// recorded.
func (s *service) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, sealerMethods) {
		return handler(ctx, req) // health: open to probes, no tenant
	}
	t := tenantOf(ctx)
	if t == nil {
		var err error
		if t, err = s.grpcAuthenticate(ctx); err != nil {
			return nil, s.refuse("grpc", err)
		}
		ctx = context.WithValue(ctx, tenantKey{}, t)
	}
	done := s.metrics.start(info.FullMethod)
	var resp any
	err := s.admit()
	if err == nil {
		defer s.release()
		var leave func()
		if leave, err = t.limiter.enter(); err == nil {
			resp, err = handler(ctx, req)
			leave()
		}
	}
	err, reason := toStatus(ctx, s.log, info.FullMethod, err)
	done(reason)
	s.audit(ctx, t, info.FullMethod, req, resp, reason)
	return resp, err
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

// audit writes the event of one call: the tenant, a hash of the principal,
// the state's public header, the outcome. Never the principal, the state or
// the payload.
func (s *service) audit(ctx context.Context, t *tenant, method string, req, resp any, reason string) {
	if s.auditLog == nil || !s.auditLog.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var principal, state string
	switch r := req.(type) {
	case *sealerv1.SealRequest:
		principal = r.GetPrincipal()
		if out, ok := resp.(*sealerv1.SealResponse); ok {
			state = out.GetRequestState()
		}
	case *sealerv1.OpenRequest:
		principal, state = r.GetPrincipal(), r.GetRequestState()
	default:
		return
	}
	tenantName := t.name
	// Typed attributes: an event per call must not box its values.
	attrs := [6]slog.Attr{
		slog.String("method", method), slog.String("tenant", tenantName),
		slog.String("principal_hash", principalHash(tenantName, principal)), slog.String("reason", reason),
	}
	n := 4
	if h, err := sealer.Inspect(state); err == nil {
		attrs[4], attrs[5] = slog.String("state_id", h.ID.String()), slog.Uint64("key_version", uint64(h.KeyVersion))
		n = 6
	}
	// A record made here carries no caller PC: slog would walk the stack for
	// one on every call (a fifth of the event's cost) and never print it.
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "audit", 0)
	r.AddAttrs(attrs[:n]...)
	s.auditLog.Handler().Handle(ctx, r)
}

// principalHash identifies a principal in the audit log without naming it.
func principalHash(tenant, principal string) string {
	if principal == "" {
		return ""
	}
	h := sha256.New()
	h.Write([]byte("mcp-sealer/v1 audit principal\x00"))
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(principal))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}
