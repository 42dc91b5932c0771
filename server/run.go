package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/netaddr"
	"github.com/mcp-sealer/sealer/internal/pprofserve"
	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/server/internal/audit"
	"github.com/mcp-sealer/sealer/server/internal/metrics"
)

// Server is a sealer, started by New and served by Run. Whoever embeds it
// asks it for the addresses it bound.
type Server struct {
	cfg     Config
	log     *slog.Logger
	svc     *service
	keys    *keySource
	ledger  servedLedger
	audit   *audit.Log
	ls      *listeners
	grpc    *grpc.Server
	health  *health.Server
	ready   *readiness
	trace   *tracing
	http    *http.Server
	withTLS bool
	tasks   []func(context.Context) error

	closeOnce sync.Once
	closeErr  error
}

// New builds a sealer from cfg: it loads keys (a Vault that cannot be
// reached yet is not an error: the sealer is not ready until it can), opens
// the ledger, the tenants and the audit log, and binds its listeners, all
// before anything serves. Run serves it; a Server that is never run must be
// closed with Close.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	s := &Server{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default())}
	if err := s.open(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// open does the work of New; on error, what it opened is for Close.
func (s *Server) open(ctx context.Context) error {
	if s.cfg.Insecure && (!netaddr.IsLoopback(s.cfg.GRPCAddr) || !netaddr.IsLoopback(s.cfg.HTTPAddr)) && (s.cfg.TLSCert == "" || s.cfg.TenantsFile == "") {
		s.log.Warn("INSECURE: listening beyond loopback without TLS and client authentication (--insecure); " +
			"anyone who can connect can seal and open states")
	}
	for _, w := range s.cfg.Warnings() {
		s.log.Warn(w)
	}
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %v", err)
	}
	if err := s.openParts(ctx); err != nil {
		return err
	}
	var err error
	if s.ls, err = listenAll(ctx, s.cfg); err != nil {
		return err
	}
	s.gatherTasks()
	return nil
}

// openParts opens the key source, the ledger, the tenants and the audit
// log, and builds the service over them.
func (s *Server) openParts(ctx context.Context) error {
	var err error
	if s.trace, err = openTracing(ctx); err != nil {
		return err
	}
	if s.keys, err = openKeys(ctx, s.cfg, s.log, s.trace); err != nil {
		return err
	}
	m := metrics.New(s.cfg.LedgerTimeout)
	if s.ledger, err = openLedger(s.cfg, s.log, m.Swept); err != nil {
		return err
	}
	auth, tf, err := newAuthenticator(s.cfg, s.log, m)
	if err != nil {
		return err
	}
	if s.audit, err = openAudit(s.cfg.AuditLog, s.log, m); err != nil {
		return err
	}
	s.svc = &service{keys: s.keys, ledger: s.ledger, auth: auth, audit: s.audit, cfg: s.cfg, now: wallclock.Now, log: s.log,
		metrics: m, refusals: newSampledLog("unauthenticated calls refused"), trace: s.trace, stopping: make(chan struct{})}
	if r, ok := s.ledger.(ledger.Recorder); ok {
		s.svc.recorder = r
	}
	if s.cfg.MaxInFlight > 0 {
		s.svc.inFlight = make(chan struct{}, s.cfg.MaxInFlight)
	}
	if meter, ok := s.ledger.(clockMeter); ok && s.cfg.ClockCheck {
		s.svc.clock = newClockCheck(meter, s.cfg.Skew, s.log)
		s.svc.clock.measure(ctx)
		m.Gauge("sealer_clock_offset_seconds", "This replica's clock offset from the ledger's (the ledger's time minus ours) at the last check (every second).",
			s.svc.clock.offset)
		m.Gauge("sealer_clock_offset_limit_seconds", "The clock offset beyond which this replica refuses one-time and latest-only opens and reports unready.",
			func() float64 { return s.svc.clock.limit.Seconds() })
	}
	m.WatchKeys(s.keys.Refresher)
	var opts []grpc.ServerOption
	if tf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tf.config())))
		s.withTLS = true
	}
	s.grpc, s.health = s.svc.grpcServer(append(opts, s.trace.grpcOptions()...)...)
	var clock clockJudge = noJudge{}
	switch judge, ok := s.ledger.(clockJudge); {
	case ok:
		clock = judge
	case s.svc.clock != nil:
		clock = s.svc.clock
	}
	s.ready = &readiness{keys: s.keys, ledger: s.ledger, clock: clock, ledgerNeeded: s.cfg.ReadyNeedsLedger, health: s.health, log: s.log, ledgerDown: newSampledLog("ledger unreachable")}
	s.ready.evaluate(ctx)
	m.Gauge("sealer_ready", "1 when this replica can seal and open (what /readyz and gRPC health answer), else 0.",
		func() float64 { return bit(s.ready.current() == nil) })
	m.Gauge("sealer_ledger_up", "1 when the ledger answered its last check (every 500ms), else 0.",
		func() float64 { return bit(s.ready.ledgerUp.Load()) })
	m.SeriesFromZero(s.cfg.TenantsFile != "", tf != nil)
	if tf != nil {
		m.TimeGauge("sealer_tls_certificate_expiry_timestamp_seconds", "Unix time at which the serving certificate expires.", tf.notAfter)
	}
	if s.keys.login != nil {
		m.Gauge("sealer_vault_login_ok", "1 while the Vault login holds a token that Vault accepted at the last login or renewal, else 0.",
			func() float64 { return bit(s.keys.login.OK()) })
	}
	s.http, err = s.svc.httpServer(ctx, tf, func(mux *http.ServeMux) { s.ready.handle(mux, s.ledger.String()) })
	return err
}

// gatherTasks gathers the tasks Run starts: the servers and the background
// work of the parts that have some.
func (s *Server) gatherTasks() {
	s.tasks = append([]func(context.Context) error{
		func(context.Context) error { return s.grpc.Serve(s.ls.grpc) },
		func(context.Context) error { return serveHTTP(s.http, s.ls.http, s.withTLS) },
		s.ready.run,
	}, s.keys.tasks...)
	if r, ok := s.ledger.(runner); ok {
		s.tasks = append(s.tasks, r.run)
	}
	if s.svc.clock != nil {
		s.tasks = append(s.tasks, s.svc.clock.run)
	}
	if s.cfg.TenantsFile != "" {
		s.tasks = append(s.tasks, func(ctx context.Context) error { return reloadOnHangup(ctx, s.cfg, s.svc.auth, s.log, s.svc.metrics) })
	}
	if s.ls.pprof != nil {
		s.tasks = append(s.tasks, func(ctx context.Context) error { return pprofserve.Serve(ctx, s.ls.pprof) })
	}
}

// GRPCAddr returns the address the gRPC server is bound to.
func (s *Server) GRPCAddr() net.Addr { return s.ls.grpc.Addr() }

// HTTPAddr returns the address the HTTP server (REST, metrics, health) is
// bound to.
func (s *Server) HTTPAddr() net.Addr { return s.ls.http.Addr() }

// Run serves until ctx is done, then drains in-flight calls, closes what New
// opened, and returns nil. It returns an error if a listener fails.
func (s *Server) Run(ctx context.Context) error {
	defer s.Close()
	s.log.Info("listening", "grpc", s.GRPCAddr().String(), "http", s.HTTPAddr().String(), "tls", s.withTLS, "tracing", s.trace.on,
		"tenants", s.svc.auth.tenants.Load().Len(), "data_dir", s.cfg.DataDir,
		"ledger", s.ledger.String(), "keys", s.keys.name, "key_ring", fmt.Sprint(s.keys.Ring()))
	g, gctx := errgroup.WithContext(ctx)
	for _, task := range s.tasks {
		g.Go(func() error { return task(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		s.shutdown()
		return nil
	})
	err := g.Wait()
	s.log.Info("stopped")
	return err
}

// shutdown takes the replica out of rotation, then stops it: readiness
// fails first (both probes), calls go on being served for ShutdownDelay
// while load balancers and endpoints catch up, then the listeners stop
// accepting and in-flight calls drain within ShutdownGrace.
func (s *Server) shutdown() {
	s.ready.drain()
	s.log.Info("not ready: shutting down", "delay", s.cfg.ShutdownDelay.String())
	time.Sleep(s.cfg.ShutdownDelay)
	s.log.Info("draining", "grace", s.cfg.ShutdownGrace.String())
	close(s.svc.stopping) // health Watch streams end
	drain(s.http, s.grpc, s.cfg.ShutdownGrace, s.log)
}

// openAudit returns where audit events go: the service log, or the file at
// path (--audit-log), its counters registered with m.
func openAudit(path string, log *slog.Logger, m *metrics.Set) (*audit.Log, error) {
	if path == "" {
		return audit.ToLogger(log), nil
	}
	return audit.Open(path, m.Registerer())
}

// Close releases what New opened: listeners, the audit log, the ledger.
// Run calls it when it returns; more calls return the first one's error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.ls != nil {
			s.ls.close()
		}
		errs = append(errs, s.audit.Close())
		if s.ledger != nil {
			errs = append(errs, s.ledger.Close())
		}
		if s.trace != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			errs = append(errs, s.trace.shutdown(ctx)) // the last spans
			cancel()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Run builds a sealer from cfg and serves it until ctx is done: New, then
// Run.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// bit is 1 for true, 0 for false.
func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// listeners are the sockets of a sealer, all opened before anything serves.
type listeners struct {
	grpc, http net.Listener
	pprof      net.Listener // nil unless configured
	all        []net.Listener
}

func listenAll(ctx context.Context, cfg Config) (*listeners, error) {
	ls := &listeners{}
	var lc net.ListenConfig
	for _, l := range []struct {
		name string
		addr string
		to   *net.Listener
	}{
		{"grpc", cfg.GRPCAddr, &ls.grpc}, {"http", cfg.HTTPAddr, &ls.http}, {"pprof", cfg.PprofAddr, &ls.pprof},
	} {
		if l.addr == "" {
			continue
		}
		nl, err := lc.Listen(ctx, "tcp", l.addr)
		if err != nil {
			ls.close()
			return nil, fmt.Errorf("%s listener: %v", l.name, err)
		}
		*l.to = nl
		ls.all = append(ls.all, nl)
	}
	return ls, nil
}

func (ls *listeners) close() {
	for _, l := range ls.all {
		l.Close()
	}
}

// httpWriteTimeout bounds how long the HTTP server writes an answer, counted
// from the end of the request's headers; gateHTTP ends every REST call by it.
const httpWriteTimeout = 30 * time.Second

// httpServer returns the HTTP server of the gateway, metrics and health.
func (s *service) httpServer(ctx context.Context, tf *tlsFiles, probes func(*http.ServeMux)) (*http.Server, error) {
	handler, err := s.httpHandler(ctx, probes)
	if err != nil {
		return nil, fmt.Errorf("gateway: %v", err)
	}
	hsrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if tf != nil {
		hsrv.TLSConfig = tf.config()
	}
	return hsrv, nil
}

func serveHTTP(hsrv *http.Server, l net.Listener, withTLS bool) error {
	var err error
	if withTLS {
		err = hsrv.ServeTLS(l, "", "")
	} else {
		err = hsrv.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// streamWorkers is the number of goroutines that serve calls (see grpcServer).
const streamWorkers = 256

// grpcServer returns a gRPC server of the service with health and reflection.
func (s *service) grpcServer(opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	gs := grpc.NewServer(append(opts,
		grpc.MaxRecvMsgSize(maxRequest),
		grpc.MaxHeaderListSize(maxHeader),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.InTapHandle(s.tap),
		grpc.ChainUnaryInterceptor(s.unary),
		// Workers keep their grown stacks; a goroutine per call would copy its
		// stack as it grows on every call (16% of CPU under load, by pprof).
		// Calls beyond the workers get a goroutine each, so there are as many
		// as the calls a replica serves at once: with 8, 64 callers still
		// spent 11% of the CPU growing stacks; with 256, 3%.
		grpc.NumStreamWorkers(streamWorkers),
	)...)
	sealerv1.RegisterSealerServer(gs, s)
	hs := health.NewServer() // readiness sets its statuses
	healthpb.RegisterHealthServer(gs, drainingHealth{hs, s.stopping})
	reflection.Register(gs)
	return gs, hs
}

// drain stops the HTTP server, then the gRPC server, each finishing
// in-flight calls within grace.
func drain(hsrv *http.Server, gs *grpc.Server, grace time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hsrv.Shutdown(ctx); err != nil {
		log.Warn("http drain cut short", "cause", err.Error())
		hsrv.Close()
	}
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		log.Warn("grpc drain cut short")
		gs.Stop()
	}
}
