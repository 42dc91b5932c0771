package server

import (
	"context"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/mcp-sealer/sealer/internal/reasons"
)

// errUnauthenticated marks a caller without valid credentials.
var errUnauthenticated = reasons.ErrUnauthenticated

type tenantKey struct{}

// tenantOf returns the authenticated tenant of a call.
func tenantOf(ctx context.Context) *tenant {
	t, _ := ctx.Value(tenantKey{}).(*tenant)
	return t
}

// authenticator finds the tenant of a call from its client certificate or
// bearer token, never from the request body. It runs before any body or
// message is read: it looks at headers and the TLS peer only.
type authenticator struct {
	tenants   atomic.Pointer[tenants]
	clientCAs func() *x509.CertPool // nil: client certificates are not accepted
}

// fromGRPC authenticates a gRPC call from its metadata and TLS peer.
func (a *authenticator) fromGRPC(ctx context.Context, md metadata.MD) (*tenant, error) {
	ts := a.tenants.Load()
	if ts.implicit != nil {
		return ts.implicit, nil
	}
	var chain []*x509.Certificate
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			chain = info.State.PeerCertificates
		}
	}
	return a.authenticate(ts, md.Get("authorization"), chain)
}

// fromHTTP authenticates a REST call from its headers and TLS peer.
func (a *authenticator) fromHTTP(r *http.Request) (*tenant, error) {
	ts := a.tenants.Load()
	if ts.implicit != nil {
		return ts.implicit, nil
	}
	var chain []*x509.Certificate
	if r.TLS != nil {
		chain = r.TLS.PeerCertificates
	}
	return a.authenticate(ts, r.Header.Values("Authorization"), chain)
}

// authenticate finds the one tenant named by the caller's Authorization
// values and client certificate chain. When both are given they must agree.
func (a *authenticator) authenticate(ts *tenants, authorization []string, chain []*x509.Certificate) (*tenant, error) {
	var byCert, byToken *tenant
	if len(chain) > 0 {
		var err error
		if byCert, err = a.certTenant(ts, chain); err != nil {
			return nil, err
		}
	}
	if len(authorization) > 0 {
		token, err := bearerToken(authorization)
		if err != nil {
			return nil, err
		}
		if byToken = ts.byToken(token); byToken == nil {
			return nil, unauthenticated("bearer token not recognized")
		}
	}
	switch {
	case byCert == nil && byToken == nil:
		return nil, unauthenticated("no credentials: present a client certificate or a bearer token")
	case byCert != nil && byToken != nil && byCert != byToken:
		return nil, unauthenticated("client certificate and bearer token name different tenants")
	case byCert != nil:
		return byCert, nil
	}
	return byToken, nil
}

// bearerToken returns the token of the one Authorization value, which must
// be "Bearer" (in any case, RFC 7235) and a non-empty RFC 6750 b64token.
// Anything else is refused, never skipped: a second value, another scheme,
// bytes outside the token alphabet.
func bearerToken(values []string) (string, error) {
	if len(values) != 1 {
		return "", unauthenticated("more than one Authorization header")
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "bearer") {
		return "", unauthenticated("authorization scheme must be Bearer")
	}
	if !isB64Token(token) {
		return "", unauthenticated("malformed bearer token")
	}
	return token, nil
}

// isB64Token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// certTenant verifies a client chain against the client CAs and maps its
// SANs to a tenant: URI SANs byte for byte as the certificate spells them,
// DNS SANs without regard to case. A certificate that names more than one
// tenant is refused rather than given one of them.
func (a *authenticator) certTenant(ts *tenants, chain []*x509.Certificate) (*tenant, error) {
	if a.clientCAs == nil {
		return nil, unauthenticated("client certificates are not accepted here (no client CA configured)")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: a.clientCAs(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, unauthenticated("client certificate not issued by the client CA")
	}
	uris, err := rawURISANs(chain[0])
	if err != nil {
		return nil, unauthenticated("malformed client certificate")
	}
	var found *tenant
	for _, t := range append(lookup(ts.byURI, uris, false), lookup(ts.byDNS, chain[0].DNSNames, true)...) {
		if found != nil && found != t {
			return nil, unauthenticated("client certificate names more than one tenant")
		}
		found = t
	}
	if found == nil {
		return nil, unauthenticated("client certificate names no tenant")
	}
	return found, nil
}

// lookup returns the tenants that names map to.
func lookup(m map[string]*tenant, names []string, fold bool) []*tenant {
	var out []*tenant
	for _, n := range names {
		if fold {
			n = strings.ToLower(n)
		}
		if t := m[n]; t != nil {
			out = append(out, t)
		}
	}
	return out
}

// oidSubjectAltName is the X.509 subjectAltName extension (RFC 5280, 4.2.1.6).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// rawURISANs returns the uniformResourceIdentifier names of a certificate
// exactly as encoded. crypto/x509 keeps them only as parsed *url.URL values,
// whose String() may differ from what the CA signed.
func rawURISANs(c *x509.Certificate) ([]string, error) {
	var uris []string
	for _, e := range c.Extensions {
		if !e.Id.Equal(oidSubjectAltName) {
			continue
		}
		var names asn1.RawValue
		if rest, err := asn1.Unmarshal(e.Value, &names); err != nil || len(rest) != 0 ||
			names.Class != asn1.ClassUniversal || names.Tag != asn1.TagSequence {
			return nil, errors.New("malformed subjectAltName")
		}
		for rest := names.Bytes; len(rest) > 0; {
			var gn asn1.RawValue
			var err error
			if rest, err = asn1.Unmarshal(rest, &gn); err != nil {
				return nil, errors.New("malformed subjectAltName")
			}
			if gn.Class == asn1.ClassContextSpecific && gn.Tag == 6 { // uniformResourceIdentifier
				uris = append(uris, string(gn.Bytes))
			}
		}
	}
	return uris, nil
}

func unauthenticated(why string) error {
	return &authError{why}
}

// authError is an authentication failure with the reason the caller may see:
// always one of the fixed texts above, never bytes the caller chose.
type authError struct{ why string }

func (e *authError) Error() string        { return "sealer: unauthenticated: " + e.why }
func (e *authError) Is(target error) bool { return target == errUnauthenticated }

// newAuthenticator loads TLS files and tenants.
func newAuthenticator(cfg Config, log *slog.Logger, m *metrics) (*authenticator, *tlsFiles, error) {
	auth := &authenticator{}
	var tf *tlsFiles
	if cfg.TLSCert != "" {
		var err error
		if tf, err = newTLSFiles(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA, log, func(err error) { m.reloaded("tls", err) }); err != nil {
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
func reloadOnHangup(ctx context.Context, cfg Config, auth *authenticator, log *slog.Logger, m *metrics) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			ts, err := loadTenants(cfg.TenantsFile, cfg, cfg.TLSClientCA != "")
			m.reloaded("tenants", err)
			if err != nil {
				log.Error("tenants reload refused; the previous tenants stay in force", "cause", err.Error())
				continue
			}
			auth.tenants.Store(ts)
			log.Info("tenants reloaded", "tenants", len(ts.all))
		}
	}
}
