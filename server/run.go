package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger"
)

// Run serves until ctx is done, then drains in-flight calls and returns nil.
// It returns an error if it cannot start or a listener fails.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Insecure && (!isLoopback(cfg.GRPCAddr) || !isLoopback(cfg.HTTPAddr)) && (cfg.TLSCert == "" || cfg.TenantsFile == "") {
		log.Warn("INSECURE: listening beyond loopback without TLS and client authentication (--insecure); " +
			"anyone who can connect can seal and open states")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %v", err)
	}
	ks, err := openKeys(ctx, cfg, log)
	if err != nil {
		return err
	}
	led, err := openLedger(cfg, log)
	if err != nil {
		return err
	}
	defer led.Close()
	auth, tf, err := newAuthenticator(cfg, log)
	if err != nil {
		return err
	}
	audit, err := openAudit(cfg.AuditLog, log)
	if err != nil {
		return err
	}
	defer audit.Close()

	svc := &service{keys: ks, ledger: led, auth: auth, audit: audit, cfg: cfg, now: time.Now, log: log,
		metrics: newMetrics(), refusals: newSampledLog("unauthenticated calls refused")}
	if cfg.MaxInFlight > 0 {
		svc.inFlight = make(chan struct{}, cfg.MaxInFlight)
	}
	svc.metrics.watchKeys(ks.Refresher)

	ls, err := listenAll(ctx, cfg)
	if err != nil {
		return err
	}
	defer ls.close()
	var creds []grpc.ServerOption
	if tf != nil {
		creds = append(creds, grpc.Creds(credentials.NewTLS(tf.config())))
	}
	public, hs := svc.grpcServer(creds...)
	notReady := newSampledLog("not ready: ledger unreachable")
	hsrv, err := svc.httpServer(ctx, tf, func(ctx context.Context) error {
		if ks.Ring() == nil {
			return errors.New("no keys loaded yet")
		}
		if err := led.Ping(ctx); err != nil {
			notReady.log(log, err) // the cause stays in the log: /readyz is unauthenticated
			return errors.New("ledger unreachable")
		}
		return nil
	})
	if err != nil {
		return err
	}

	tasks := append([]func(context.Context) error{
		func(context.Context) error { return public.Serve(ls.grpc) },
		func(context.Context) error { return serveHTTP(hsrv, ls.http, tf != nil) },
	}, ks.tasks...)
	if b, ok := led.Ledger.(*ledger.Bolt); ok {
		tasks = append(tasks, func(ctx context.Context) error {
			return b.SweepEvery(ctx, cfg.SweepInterval, func(n int, err error) {
				svc.metrics.swept.Add(float64(n))
				if err != nil {
					log.Error("ledger sweep failed", "cause", err.Error())
				}
			})
		})
	}
	if cfg.TenantsFile != "" {
		tasks = append(tasks, func(ctx context.Context) error { return reloadOnHangup(ctx, cfg, auth, log) })
	}
	if ls.pprof != nil {
		tasks = append(tasks, func(ctx context.Context) error { return servePprof(ctx, ls.pprof) })
	}

	log.Info("listening", "grpc", ls.grpc.Addr().String(), "http", ls.http.Addr().String(), "tls", tf != nil,
		"tenants", len(auth.tenants.Load().all), "data_dir", cfg.DataDir,
		"ledger", led.String(), "keys", ks.name, "key_ring", fmt.Sprint(ks.Ring()))
	g, gctx := errgroup.WithContext(ctx)
	for _, task := range tasks {
		g.Go(func() error { return task(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		log.Info("draining", "grace", cfg.ShutdownGrace.String())
		hs.Shutdown()
		drain(hsrv, public, cfg.ShutdownGrace, log)
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
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

// httpServer returns the HTTP server of the gateway, metrics and health.
func (s *service) httpServer(ctx context.Context, tf *tlsFiles, ready func(context.Context) error) (*http.Server, error) {
	handler, err := s.httpHandler(ctx, ready)
	if err != nil {
		return nil, fmt.Errorf("gateway: %v", err)
	}
	hsrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
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

// servePprof serves net/http/pprof until ctx is done.
func servePprof(ctx context.Context, l net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	psrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); psrv.Close() }()
	if err := psrv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
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
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus(sealerv1.Sealer_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(gs)
	return gs, hs
}

// newAuthenticator loads TLS files and tenants.
func newAuthenticator(cfg Config, log *slog.Logger) (*authenticator, *tlsFiles, error) {
	auth := &authenticator{}
	var tf *tlsFiles
	if cfg.TLSCert != "" {
		var err error
		if tf, err = newTLSFiles(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA, log); err != nil {
			return nil, nil, err
		}
		if cfg.TLSClientCA != "" {
			auth.clientCAs = tf.pool
		}
	}
	ts := implicitTenants(cfg)
	if cfg.TenantsFile != "" {
		var err error
		if ts, err = loadTenants(cfg.TenantsFile, cfg, cfg.TLSClientCA != ""); err != nil {
			return nil, nil, err
		}
	}
	auth.tenants.Store(ts)
	return auth, tf, nil
}

// reloadOnHangup reloads the tenants file on SIGHUP. A file that does not
// load is refused and the tenants in force stay.
func reloadOnHangup(ctx context.Context, cfg Config, auth *authenticator, log *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			ts, err := loadTenants(cfg.TenantsFile, cfg, cfg.TLSClientCA != "")
			if err != nil {
				log.Error("tenants reload refused; the previous tenants stay in force", "cause", err.Error())
				continue
			}
			auth.tenants.Store(ts)
			log.Info("tenants reloaded", "tenants", len(ts.all))
		}
	}
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
