package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
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
	auditLog, closeAudit, err := openAudit(cfg.AuditLog, log)
	if err != nil {
		return err
	}
	defer closeAudit()

	svc := &service{keys: ks, ledger: led, auth: auth, auditLog: auditLog, cfg: cfg, now: time.Now, log: log,
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
	internal, _ := svc.grpcServer()
	conn, err := grpc.NewClient(ls.gateway.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(maxRequest)))
	if err != nil {
		return fmt.Errorf("gateway client: %v", err)
	}
	defer conn.Close()
	notReady := newSampledLog("not ready: ledger unreachable")
	hsrv, err := svc.httpServer(ctx, conn, tf, func(ctx context.Context) error {
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
		func(context.Context) error { return internal.Serve(ls.gateway) },
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
		drain(hsrv, []*grpc.Server{public, internal}, cfg.ShutdownGrace, log)
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
}

// listeners are the sockets of a sealer, all opened before anything serves.
type listeners struct {
	grpc, http net.Listener
	gateway    net.Listener // the gateway's own way in: plaintext on loopback
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
		{"grpc", cfg.GRPCAddr, &ls.grpc}, {"http", cfg.HTTPAddr, &ls.http},
		{"gateway", "127.0.0.1:0", &ls.gateway}, {"pprof", cfg.PprofAddr, &ls.pprof},
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
func (s *service) httpServer(ctx context.Context, conn *grpc.ClientConn, tf *tlsFiles, ready func(context.Context) error) (*http.Server, error) {
	handler, err := s.httpHandler(ctx, conn, ready)
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
	var secret [32]byte
	rand.Read(secret[:])
	auth := &authenticator{secret: hex.EncodeToString(secret[:])}
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

// openAudit returns the audit logger: the service log, or a JSON-lines file
// written through a buffer flushed every 200 ms and on close, so that an event
// costs no write of its own. A crash loses at most the last 200 ms.
func openAudit(path string, log *slog.Logger) (*slog.Logger, func() error, error) {
	if path == "" {
		return log, func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("audit log: %v", err)
	}
	w := &flushWriter{bw: bufio.NewWriterSize(f, 64<<10)}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				w.Flush()
			}
		}
	}()
	return slog.New(slog.NewJSONHandler(w, nil)), func() error {
		close(stop)
		<-done
		return errors.Join(w.Flush(), f.Close())
	}, nil
}

// flushWriter is a buffered writer safe for a writer and a flusher at once.
type flushWriter struct {
	mu sync.Mutex
	bw *bufio.Writer
}

func (w *flushWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Write(p)
}

func (w *flushWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Flush()
}

// drain stops the HTTP server first (REST calls need the gRPC server to
// finish), then the gRPC server, each finishing in-flight calls within grace.
func drain(hsrv *http.Server, servers []*grpc.Server, grace time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hsrv.Shutdown(ctx); err != nil {
		log.Warn("http drain cut short", "cause", err.Error())
		hsrv.Close()
	}
	for _, gs := range servers {
		done := make(chan struct{})
		go func() { gs.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			log.Warn("grpc drain cut short")
			gs.Stop()
		}
	}
}
