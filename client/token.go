package client

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/mcp-sealer/sealer/internal/netaddr"
)

// ErrPlaintextToken means a call carried a bearer token (any authorization
// metadata) on a connection without transport security to something that
// is not loopback: the client refused it before anything was sent. Give
// the connection TLS (grpc.WithTransportCredentials), or reach the sealer
// on loopback. The sealer itself refuses plaintext off loopback.
var ErrPlaintextToken = errors.New("sealer client: refusing to send a bearer token without TLS to a sealer that is not on loopback (127.0.0.0/8, ::1, localhost): use TLS")

// tokenGuard is the per-call credentials of Seal and Open (grpc.PerRPCCredentials),
// which grpc calls with the connection's security, its peer and the call's
// outgoing metadata, after every interceptor and before it sends the
// headers. It adds nothing; it refuses a token on plaintext off loopback,
// and remembers that it did, so that the call returns ErrPlaintextToken.
type tokenGuard struct{ refused atomic.Bool }

var _ credentials.PerRPCCredentials = (*tokenGuard)(nil)

// GetRequestMetadata refuses the call when its outgoing metadata holds an
// authorization and plaintextOffLoopback says so.
func (g *tokenGuard) GetRequestMetadata(ctx context.Context, audience ...string) (map[string]string, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	if len(md.Get("authorization")) > 0 && plaintextOffLoopback(ctx, audience) {
		g.refused.Store(true)
		return nil, ErrPlaintextToken
	}
	return nil, nil
}

// RequireTransportSecurity is false: tokens over plaintext to loopback are
// allowed, which grpc's own check would refuse.
func (*tokenGuard) RequireTransportSecurity() bool { return false }

// errorOf is the error of a call the guard was given to: ErrPlaintextToken
// when it refused the call, else the sealer's (fromStatus).
func (g *tokenGuard) errorOf(err error) error {
	if g.refused.Load() {
		return ErrPlaintextToken
	}
	return fromStatus(err)
}

// plaintextOffLoopback reports whether the call in ctx goes without
// privacy and integrity (TLS, ALTS) to anything but loopback: the
// connection's peer must be loopback or a Unix socket, and the :authority
// (the audience grpc passes, https://authority/service) must name loopback
// too, since a loopback HTTP proxy would carry the call to that host.
func plaintextOffLoopback(ctx context.Context, audience []string) bool {
	ri, _ := credentials.RequestInfoFromContext(ctx)
	if credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity) == nil {
		return false
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return true
	}
	if _, unix := p.Addr.(*net.UnixAddr); !unix && !netaddr.IsLoopback(p.Addr.String()) {
		return true
	}
	if len(audience) == 0 {
		return true
	}
	for _, a := range audience {
		u, err := url.Parse(a)
		if err != nil || !netaddr.IsLoopback(net.JoinHostPort(u.Hostname(), "0")) {
			return true
		}
	}
	return false
}
