package server

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/mcp-sealer/sealer/server/internal/metrics"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

type tenantKey struct{}

// tenantOf returns the authenticated tenant of a call.
func tenantOf(ctx context.Context) *tenant.Tenant {
	t, _ := ctx.Value(tenantKey{}).(*tenant.Tenant)
	return t
}

// authenticator finds the tenant of a call from its client certificate or
// bearer token, never from the request body. It runs before any body or
// message is read: it looks at headers and the TLS peer only.
type authenticator struct {
	tenants   atomic.Pointer[tenant.Set]
	clientCAs func() *x509.CertPool // nil: client certificates are not accepted
}

// fromGRPC authenticates a gRPC call from its metadata and TLS peer.
func (a *authenticator) fromGRPC(ctx context.Context, md metadata.MD) (*tenant.Tenant, error) {
	ts := a.tenants.Load()
	if t := ts.Implicit(); t != nil {
		return t, nil
	}
	var chain []*x509.Certificate
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			chain = info.State.PeerCertificates
		}
	}
	return ts.Authenticate(md.Get("authorization"), chain, a.clientCAs)
}

// fromHTTP authenticates a REST call from its headers and TLS peer.
func (a *authenticator) fromHTTP(r *http.Request) (*tenant.Tenant, error) {
	ts := a.tenants.Load()
	if t := ts.Implicit(); t != nil {
		return t, nil
	}
	var chain []*x509.Certificate
	if r.TLS != nil {
		chain = r.TLS.PeerCertificates
	}
	return ts.Authenticate(r.Header.Values("Authorization"), chain, a.clientCAs)
}

// newAuthenticator loads TLS files and tenants.
func newAuthenticator(cfg Config, log *slog.Logger, m *metrics.Set) (*authenticator, *tlsFiles, error) {
	auth := &authenticator{}
	var tf *tlsFiles
	if cfg.TLSCert != "" {
		var err error
		if tf, err = newTLSFiles(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA, log, func(err error) { m.Reloaded("tls", err) }); err != nil {
			return nil, nil, err
		}
		if cfg.TLSClientCA != "" {
			auth.clientCAs = tf.pool
		}
	}
	bounds := cfg.tenantBounds()
	ts := tenant.Single(bounds)
	if cfg.TenantsFile != "" {
		var err error
		if ts, err = tenant.Load(cfg.TenantsFile, bounds, cfg.TLSClientCA != ""); err != nil {
			return nil, nil, err
		}
	}
	auth.tenants.Store(ts)
	return auth, tf, nil
}

// reloadOnHangup reloads the tenants file on SIGHUP. A file that does not
// load is refused and the tenants in force stay.
func reloadOnHangup(ctx context.Context, cfg Config, auth *authenticator, log *slog.Logger, m *metrics.Set) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			ts, err := tenant.Load(cfg.TenantsFile, cfg.tenantBounds(), cfg.TLSClientCA != "")
			m.Reloaded("tenants", err)
			if err != nil {
				log.Error("tenants reload refused; the previous tenants stay in force", "cause", err.Error())
				continue
			}
			auth.tenants.Store(ts)
			log.Info("tenants reloaded", "tenants", ts.Len())
		}
	}
}
