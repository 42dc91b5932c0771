package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
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

	svc := &service{keys: ks, ledger: led, cfg: cfg, now: time.Now, log: log, metrics: newMetrics()}
	svc.metrics.watchKeys(ks.Refresher)

	var lc net.ListenConfig
	gl, err := lc.Listen(ctx, "tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("grpc listener: %v", err)
	}
	hl, err := lc.Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		gl.Close()
		return fmt.Errorf("http listener: %v", err)
	}

	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(maxGRPCMessage),
		grpc.ChainUnaryInterceptor(svc.unaryErrors),
		// Workers keep their grown stacks; a goroutine per call would copy its
		// stack as it grows on every call (16% of CPU under load, by pprof).
		grpc.NumStreamWorkers(uint32(4*runtime.NumCPU())),
	)
	sealerv1.RegisterSealerServer(gs, svc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus(sealerv1.Sealer_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(gs)

	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(maxGRPCMessage)))
	if err != nil {
		return fmt.Errorf("gateway client: %v", err)
	}
	defer conn.Close()
	handler, err := svc.httpHandler(ctx, conn, func(ctx context.Context) error {
		if ks.Ring() == nil {
			return errors.New("no keys loaded yet")
		}
		return led.Ping(ctx)
	})
	if err != nil {
		return fmt.Errorf("gateway: %v", err)
	}
	hsrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHTTPHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	log.Info("listening", "grpc", gl.Addr().String(), "http", hl.Addr().String(), "data_dir", cfg.DataDir,
		"ledger", led.String(), "keys", ks.name, "key_ring", fmt.Sprint(ks.Ring()))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return gs.Serve(gl) })
	g.Go(func() error {
		if err := hsrv.Serve(hl); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	for _, task := range ks.tasks {
		g.Go(func() error { return task(gctx) })
	}
	if b, ok := led.Ledger.(*ledger.Bolt); ok {
		g.Go(func() error {
			return b.SweepEvery(gctx, cfg.SweepInterval, func(n int, err error) {
				svc.metrics.swept.Add(float64(n))
				if err != nil {
					log.Error("ledger sweep failed", "cause", err.Error())
				}
			})
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		log.Info("draining", "grace", cfg.ShutdownGrace.String())
		hs.Shutdown()
		drain(hsrv, gs, cfg.ShutdownGrace, log)
		return nil
	})
	err = g.Wait()
	log.Info("stopped")
	return err
}

// drain stops the HTTP server first (REST calls need the gRPC server to
// finish), then the gRPC server, each finishing in-flight calls within grace.
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
