package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/internal/pprofserve"
	"github.com/mcp-sealer/sealer/internal/secretfile"
)

// Run dials the sealer, serves the MCP endpoint and the admin endpoints,
// and returns when ctx is done (after draining for up to 10 s) or a
// listener fails.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, err := dialSealer(cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	p, err := New(cfg, client.New(conn))
	if err != nil {
		return err
	}
	tlsConfig, err := serverTLS(cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	servers := []*http.Server{srv}
	listeners := []net.Listener{l}
	// serveAlso listens on addr for s, or closes what listens already.
	serveAlso := func(addr string, s *http.Server) (net.Listener, error) {
		sl, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, err
		}
		servers, listeners = append(servers, s), append(listeners, sl)
		return sl, nil
	}
	admin := ""
	if cfg.AdminAddr != "" {
		al, err := serveAlso(cfg.AdminAddr, &http.Server{Handler: adminHandler(p, conn), ReadHeaderTimeout: 10 * time.Second})
		if err != nil {
			return err
		}
		admin = al.Addr().String()
	}
	if cfg.PprofAddr != "" {
		if _, err := serveAlso(cfg.PprofAddr, pprofserve.Server()); err != nil {
			return err
		}
	}
	if u, _ := url.Parse(cfg.Upstream); cfg.Audience == "" && isLoopback(u.Hostname()) {
		log.Warn("no audience: the states of this proxy open at every proxy of its tenant in front of the same upstream URL; give --audience the server's name",
			"upstream", cfg.Upstream)
	}
	if need := answerRoom(cfg.MaxResponseBytes, cfg.MaxStateBytes); need > cfg.MaxBufferedBytes-cfg.MaxBufferedBytes/4 {
		log.Warn("max-buffered-bytes is under 15 times max-response-bytes: the largest answers may fail for want of room even when the proxy is idle",
			"max_buffered_bytes", cfg.MaxBufferedBytes, "max_response_bytes", cfg.MaxResponseBytes, "largest_answer_needs", need)
	}
	log.Info("listening", "addr", l.Addr().String(), "admin", admin, "upstream", cfg.Upstream, "principal", cfg.Principal)
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range servers {
		g.Go(func() error {
			if err := s.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		drain, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, s := range servers {
			s.Shutdown(drain)
		}
		return nil
	})
	return g.Wait()
}

// adminHandler serves /healthz (the process runs), /readyz (the sealer
// answers its health check) and /metrics.
func adminHandler(p *Proxy, conn *grpc.ClientConn) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			http.Error(w, "sealer not serving", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("/metrics", p.Metrics())
	return mux
}

// dialSealer connects to the sealer as a tenant: TLS when SealerCA is set,
// with the proxy's client certificate and bearer token when given.
func dialSealer(cfg Config) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if cfg.SealerCA != "" {
		pem, err := os.ReadFile(cfg.SealerCA)
		if err != nil {
			return nil, fmt.Errorf("sealer-ca: %v", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("sealer-ca %s: no certificate", cfg.SealerCA)
		}
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cfg.SealerCert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.SealerCert, cfg.SealerKey)
			if err != nil {
				return nil, fmt.Errorf("sealer-cert: %v", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts[0] = grpc.WithTransportCredentials(credentials.NewTLS(tc))
	} else if cfg.SealerCert != "" {
		return nil, errors.New("sealer-cert needs sealer-ca (TLS)")
	}
	if cfg.SealerTokenFile != "" {
		token, err := secretfile.ReadToken(cfg.SealerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("sealer-token-file: %w", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken{token: token, secure: cfg.SealerCA != ""}))
	}
	return grpc.NewClient(cfg.Sealer, opts...)
}

// bearerToken sends the proxy's token with every call to the sealer. With
// TLS (secure) grpc refuses to send it over a plaintext connection; without
// TLS Config.Validate has refused any sealer address but loopback.
type bearerToken struct {
	token  string
	secure bool
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearerToken) RequireTransportSecurity() bool { return b.secure }

// serverTLS is the TLS configuration of the MCP endpoint, nil for plaintext.
func serverTLS(cfg Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls-cert: %v", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls-client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-client-ca %s: no certificate", cfg.TLSClientCA)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// isLoopback reports whether host names the loopback interface, as a
// sidecar's upstream does in every pod alike.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
