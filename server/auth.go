package server

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Metadata the gateway adds to the calls it forwards: the client certificate
// chain the HTTP server received, vouched for by the process's gateway
// secret. Callers cannot set them: the gateway forwards no header but
// Authorization, and a call without the secret is judged by its own TLS peer.
const (
	mdGatewaySecret = "x-sealer-gateway"
	mdClientCert    = "x-sealer-client-cert"
)

// errUnauthenticated marks a caller without valid credentials.
var errUnauthenticated = errors.New("sealer: unauthenticated")

type tenantKey struct{}

// tenantOf returns the authenticated tenant of a call.
func tenantOf(ctx context.Context) *tenant {
	t, _ := ctx.Value(tenantKey{}).(*tenant)
	return t
}

// authenticator finds the tenant of a call from its client certificate or
// bearer token, never from the request body.
type authenticator struct {
	tenants   atomic.Pointer[tenants]
	clientCAs func() *x509.CertPool // nil: client certificates are not accepted
	secret    string                // the gateway's secret, per process
}

func (a *authenticator) authenticate(ctx context.Context) (*tenant, error) {
	ts := a.tenants.Load()
	if ts.implicit != nil {
		return ts.implicit, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	chain, err := a.peerChain(ctx, md)
	if err != nil {
		return nil, err
	}
	var byCert, byToken *tenant
	if len(chain) > 0 {
		if byCert, err = a.certTenant(ts, chain); err != nil {
			return nil, err
		}
	}
	if auth := md.Get("authorization"); len(auth) > 0 {
		token, ok := strings.CutPrefix(auth[0], "Bearer ")
		if byToken = ts.byToken(token); !ok || len(auth) > 1 || byToken == nil {
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

// peerChain returns the client certificate chain of the caller: the one the
// gateway forwarded, when the call carries the gateway's secret, else the
// call's own TLS peer.
func (a *authenticator) peerChain(ctx context.Context, md metadata.MD) ([]*x509.Certificate, error) {
	if s := md.Get(mdGatewaySecret); len(s) == 1 && subtle.ConstantTimeCompare([]byte(s[0]), []byte(a.secret)) == 1 {
		var chain []*x509.Certificate
		for _, enc := range md.Get(mdClientCert) {
			der, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				return nil, unauthenticated("malformed client certificate")
			}
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return nil, unauthenticated("malformed client certificate")
			}
			chain = append(chain, c)
		}
		return chain, nil
	}
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			return info.State.PeerCertificates, nil
		}
	}
	return nil, nil
}

// certTenant verifies a client chain against the client CAs and maps its URI
// SANs, then DNS SANs, to a tenant.
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
	for _, u := range chain[0].URIs {
		if t := ts.byURI[u.String()]; t != nil {
			return t, nil
		}
	}
	for _, d := range chain[0].DNSNames {
		if t := ts.byDNS[strings.ToLower(d)]; t != nil {
			return t, nil
		}
	}
	return nil, unauthenticated("client certificate names no tenant")
}

func unauthenticated(why string) error {
	return &authError{why}
}

// authError is an authentication failure with the reason the caller may see.
type authError struct{ why string }

func (e *authError) Error() string        { return "sealer: unauthenticated: " + e.why }
func (e *authError) Is(target error) bool { return target == errUnauthenticated }

// gatewayMetadata forwards the HTTP caller's client certificates to the gRPC
// service with the gateway's secret.
func (a *authenticator) gatewayMetadata(_ context.Context, r *http.Request) metadata.MD {
	md := metadata.Pairs(mdGatewaySecret, a.secret)
	if r.TLS != nil {
		for _, c := range r.TLS.PeerCertificates {
			md.Append(mdClientCert, base64.StdEncoding.EncodeToString(c.Raw))
		}
	}
	return md
}

// gatewayHeader forwards no HTTP header to gRPC metadata (the gateway
// passes Authorization on by itself), so that no caller can smuggle the
// gateway's own metadata in with Grpc-Metadata-* headers.
func gatewayHeader(string) (string, bool) { return "", false }
