package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// The front doors: both authenticate a caller from its headers and TLS peer
// before a byte of its body or message is read, so an unauthenticated caller
// costs a header parse and a hash, never a decode. Refusals write no audit
// event; they are counted in sealer_unauthenticated_total and logged at most
// once a second.

// tap is the gRPC front door (grpc.InTapHandle): grpc-go runs it when a
// stream's headers arrive, before it reads the message. The tenant it finds
// rides in the stream's context to the interceptor.
func (s *service) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !strings.HasPrefix(info.FullMethodName, sealerMethods) {
		return ctx, nil // health and reflection: open to probes
	}
	t, err := s.auth.fromGRPC(ctx, info.Header)
	if err != nil {
		return nil, s.refuse("grpc", err)
	}
	return context.WithValue(ctx, tenantKey{}, t), nil
}

// gateHTTP is the REST front door: it authenticates, then lets next read the
// body, at most concurrent requests at a time (refused at once beyond, before
// authentication).
func (s *service) gateHTTP(next http.Handler, concurrent int, writeErr func(http.ResponseWriter, *http.Request, error)) http.Handler {
	inFlight := make(chan struct{}, concurrent)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
		default:
			writeErr(w, r, errBusy(concurrent))
			return
		}
		ctx, release := hold(r.Context(), func() { <-inFlight })
		defer release()
		t, err := s.auth.fromHTTP(r)
		if err != nil {
			writeErr(w, r, s.refuse("rest", err))
			return
		}
		// No call runs past the time its answer may still be written (a
		// shorter Grpc-Timeout header still applies).
		ctx, cancel := context.WithTimeout(ctx, httpWriteTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, tenantKey{}, t)))
	})
}

// refuse counts and logs (sampled) an unauthenticated call and returns the
// status its caller gets.
func (s *service) refuse(transport string, err error) error {
	s.metrics.Unauthenticated(transport)
	s.refusals.log(s.log, err, "transport", transport)
	st, _ := statusOf(err)
	return st
}

// sampledLog logs one message at most once a second, with how many were
// not logged since.
type sampledLog struct {
	msg    string
	every  *rate.Limiter
	missed atomic.Int64
}

func newSampledLog(msg string) *sampledLog {
	return &sampledLog{msg: msg, every: rate.NewLimiter(rate.Every(time.Second), 1)}
}

func (l *sampledLog) log(log *slog.Logger, err error, attrs ...any) {
	if !l.every.Allow() {
		l.missed.Add(1)
		return
	}
	log.Warn(l.msg, append(attrs, "cause", err.Error(), "not_logged_since_last", l.missed.Swap(0))...)
}

// grpcAuthenticate authenticates a call that reached the interceptor
// without passing the tap (a server built without it, a unit test).
func (s *service) grpcAuthenticate(ctx context.Context) (*tenant.Tenant, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return s.auth.fromGRPC(ctx, md)
}

// sealerMethods prefixes the methods the interceptor guards.
var sealerMethods = "/" + sealerv1.Sealer_ServiceDesc.ServiceName + "/"

// slotsKey holds, in a call's context, the *slots its gates took for it.
type slotsKey struct{}

// slots are the in-flight slots one call holds (the REST door's, the
// server's, the tenant's), each given back once: when the call ends, or
// sooner, when it parks to wait for something that costs the sealer
// nothing (tenant.Limiter.Park, then freeSlots: see replay).
type slots struct {
	mu    sync.Mutex
	frees []func()
}

// hold records in ctx a slot its call took, and returns the function that
// gives it back, at most once however often it is called.
func hold(ctx context.Context, free func()) (context.Context, func()) {
	free = sync.OnceFunc(free)
	held, ok := ctx.Value(slotsKey{}).(*slots)
	if !ok {
		held = &slots{}
		ctx = context.WithValue(ctx, slotsKey{}, held)
	}
	held.mu.Lock()
	held.frees = append(held.frees, free)
	held.mu.Unlock()
	return ctx, free
}

// freeSlots gives back every slot the call of ctx holds.
func freeSlots(ctx context.Context) {
	held, ok := ctx.Value(slotsKey{}).(*slots)
	if !ok {
		return
	}
	held.mu.Lock()
	frees := held.frees
	held.mu.Unlock()
	for _, free := range frees {
		free()
	}
}

// unary is the gRPC door's interceptor: the caller was authenticated by the
// tap before its message was read (a server built without the tap
// authenticates here), then the call passes the gate.
func (s *service) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, sealerMethods) {
		return handler(ctx, req) // health: open to probes, no tenant
	}
	if tenantOf(ctx) == nil {
		t, err := s.grpcAuthenticate(ctx)
		if err != nil {
			return nil, s.refuse("grpc", err)
		}
		ctx = context.WithValue(ctx, tenantKey{}, t)
	}
	return s.gate(ctx, info.FullMethod, req, handler)
}

// gate is the one gate of every Seal and Open, gRPC and REST alike, for a
// caller its front door authenticated (the tenant is in ctx): the server's
// and the tenant's limits, errors to statuses, metrics and the audit event.
func (s *service) gate(ctx context.Context, method string, req any, handler grpc.UnaryHandler) (any, error) {
	t := tenantOf(ctx)
	timer := s.metrics.Start(t.Name, method)
	var resp any
	err := s.admit()
	if err == nil {
		var release func()
		ctx, release = hold(ctx, s.release)
		defer release()
		leave := func() {}
		// Record finishes an open the tenant's limits admitted: refusing
		// it would leave that open's retries waiting for nothing.
		if method != recordMethod {
			leave, err = t.Limiter.Enter()
		}
		if err == nil {
			ctx, leave = hold(ctx, leave)
			resp, err = handler(ctx, req)
			leave()
		}
	}
	err, reason := toStatus(ctx, s.log, t.Name, method, err)
	timer.Done(reason)
	s.audit.Record(ctx, t.Name, method, req, resp, reason)
	return resp, err
}
