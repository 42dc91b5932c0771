package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
)

// Readiness means "this replica can seal and open": keys loaded, not
// shutting down, its clock within its limit from a shared ledger's
// (clockCheck) or not behind the embedded ledger's last sweep, a Redis
// ledger that has not refused this replica since its start (see
// sharedLedger.Ping), and, only when the operator asks for it
// (Config.ReadyNeedsLedger), the ledger reachable. A Redis outage fails
// one-time opens only; seals and ordinary opens still work, so by default it
// does not take every replica out of rotation at once. Liveness means the
// process answers at all.
//
// One evaluation, repeated every readyEvery, gives the one answer that both
// /readyz and gRPC health report; draining changes it at once.
const readyEvery = 500 * time.Millisecond

// probe answers are fixed words: the probes are unauthenticated, and the
// causes go to the log.
var (
	errNotLoaded      = errors.New("no keys loaded yet")
	errShuttingDown   = errors.New("shutting down")
	errLedgerNotReady = errors.New("ledger unreachable")
)

// readiness holds the current answer and keeps gRPC health in step with it.
type readiness struct {
	keys         interface{ Ring() *keys.Ring } // nil ring: none loaded yet
	ledger       interface{ Ping(context.Context) error }
	clock        clockJudge
	ledgerNeeded bool
	health       *health.Server
	log          *slog.Logger
	ledgerDown   *sampledLog

	draining atomic.Bool
	ledgerUp atomic.Bool
	answer   atomic.Pointer[error] // nil pointer: not evaluated yet
}

func (r *readiness) current() error {
	if r.draining.Load() {
		return errShuttingDown // whatever an evaluation in flight stores
	}
	if p := r.answer.Load(); p != nil {
		return *p
	}
	return errNotLoaded
}

// evaluate computes the answer now and publishes it to gRPC health.
func (r *readiness) evaluate(ctx context.Context) {
	var refused error // the ledger's refusal, in fixed words
	if !r.draining.Load() {
		pctx, cancel := context.WithTimeout(ctx, readyEvery)
		err := r.ledger.Ping(pctx)
		cancel()
		r.ledgerUp.Store(err == nil)
		if err != nil {
			r.ledgerDown.log(r.log, err)
		}
		for _, fixed := range []error{errLedgerRefused, errLedgerEvicts} {
			if errors.Is(err, fixed) {
				refused = fixed
			}
		}
	}
	var answer error
	clockOff := r.clock.clockOff()
	switch {
	case r.draining.Load():
		answer = errShuttingDown
	case r.keys.Ring() == nil:
		answer = errNotLoaded
	case clockOff != nil:
		answer = clockOff
	case refused != nil:
		answer = refused
	case r.ledgerNeeded && !r.ledgerUp.Load():
		answer = errLedgerNotReady
	}
	r.answer.Store(&answer)
	st := healthpb.HealthCheckResponse_SERVING
	if answer != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for _, name := range []string{"", sealerv1.Sealer_ServiceDesc.ServiceName} {
		r.health.SetServingStatus(name, st)
	}
}

// run evaluates every readyEvery until ctx is done.
func (r *readiness) run(ctx context.Context) error {
	for {
		if r.draining.Load() {
			return nil
		}
		r.evaluate(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(readyEvery):
		}
	}
}

// drain turns the answer to "shutting down" for good, on both probes.
func (r *readiness) drain() {
	r.draining.Store(true)
	r.evaluate(context.Background())
	r.health.Shutdown() // NOT_SERVING for every service, and no more changes
}

// handle adds the probes to mux: /livez (and its older name /healthz),
// /readyz with the ledger's state on a line of its own.
func (r *readiness) handle(mux *http.ServeMux, ledgerName string) {
	live := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /healthz", live)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ledger := "ledger: " + ledgerName + " reachable\n"
		if !r.ledgerUp.Load() {
			ledger = "ledger: " + ledgerName + " unreachable (one-time opens fail)\n"
		}
		if err := r.current(); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready: " + err.Error() + "\n" + ledger))
			return
		}
		w.Write([]byte("ready\n" + ledger))
	})
}

// drainingHealth is the health service, with Watch streams that end when the
// listeners stop: a client watching health (instead of the grpc-go balancer,
// which lets go on GOAWAY) would otherwise hold the graceful stop for the
// whole grace, and in-flight calls would be cut.
type drainingHealth struct {
	*health.Server
	stopping <-chan struct{}
}

func (h drainingHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return h.Server.Watch(req, watchStream{stream, ctx})
}

// watchStream is a Watch stream with a context that ends when the server
// stops.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (s watchStream) Context() context.Context { return s.ctx }
