package client

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testpki"
)

// tokenSealer records the authorization metadata of each call that reaches it.
type tokenSealer struct {
	sealerv1.UnimplementedSealerServer
	mu   sync.Mutex
	seen [][]string
}

func (s *tokenSealer) saw(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, md.Get("authorization"))
}

func (s *tokenSealer) Seal(ctx context.Context, _ *sealerv1.SealRequest) (*sealerv1.SealResponse, error) {
	s.saw(ctx)
	return &sealerv1.SealResponse{RequestState: "S", ExpiresAt: timestamppb.Now()}, nil
}

func (s *tokenSealer) Open(ctx context.Context, _ *sealerv1.OpenRequest) (*sealerv1.OpenResponse, error) {
	s.saw(ctx)
	return &sealerv1.OpenResponse{IssuedAt: timestamppb.Now(), ExpiresAt: timestamppb.Now()}, nil
}

// farConn is a loopback connection that reports a remote address that is
// not loopback, as a connection to another host would.
type farConn struct{ net.Conn }

func (farConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 7443} }

// Issue 40, finding 8: the client sends a bearer token without TLS only to
// loopback (127.0.0.0/8, ::1, localhost, or a Unix socket), where the
// connection and the :authority it names both are; anywhere else the call
// fails with ErrPlaintextToken before anything is sent. Over TLS, and
// without a token, it goes anywhere.
func TestClient_PlaintextTokenOnlyToLoopback(t *testing.T) {
	fake := &tokenSealer{}
	gs := grpc.NewServer()
	sealerv1.RegisterSealerServer(gs, fake)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unix, err := net.Listen("unix", filepath.Join(t.TempDir(), "sealer.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(tcp)
	go gs.Serve(unix)
	t.Cleanup(gs.Stop)

	ca := testpki.NewCA(t, "token-test")
	pair := ca.Server(t, "sealer")
	serverTLS, err := credentials.NewServerTLSFromFile(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	tlsServer := grpc.NewServer(grpc.Creds(serverTLS))
	sealerv1.RegisterSealerServer(tlsServer, fake)
	tlsListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go tlsServer.Serve(tlsListener)
	t.Cleanup(tlsServer.Stop)
	clientTLS, err := credentials.NewClientTLSFromFile(ca.CertFile, "localhost")
	if err != nil {
		t.Fatal(err)
	}

	// to dials the listener l, the connection reporting a remote address
	// when far.
	to := func(l net.Listener, far bool) grpc.DialOption {
		return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, l.Addr().Network(), l.Addr().String())
			if err != nil || !far {
				return c, err
			}
			return farConn{c}, nil
		})
	}
	plain := grpc.WithTransportCredentials(insecure.NewCredentials())
	withToken := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer team-token")
	}
	// An interceptor that adds the token, as an author's auth middleware would.
	intercepted := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(withToken(ctx), method, req, reply, cc, opts...)
	})

	for _, tc := range []struct {
		name   string
		target string
		opts   []grpc.DialOption
		token  bool
		want   error // nil: the call reaches the sealer, with the token when token
	}{
		{"127.0.0.1, plaintext, token", "passthrough:///127.0.0.1:7443", []grpc.DialOption{plain, to(tcp, false)}, true, nil},
		{"127.0.0.2, plaintext, token", "passthrough:///127.0.0.2:7443", []grpc.DialOption{plain, to(tcp, false)}, true, nil},
		{"localhost, plaintext, token", "passthrough:///localhost:7443", []grpc.DialOption{plain, to(tcp, false)}, true, nil},
		{"[::1], plaintext, token", "passthrough:///[::1]:7443", []grpc.DialOption{plain, to(tcp, false)}, true, nil},
		{"unix socket, plaintext, token", "unix://" + unix.Addr().String(), []grpc.DialOption{plain}, true, nil},
		{"remote, plaintext, token", "passthrough:///sealer.example:7443", []grpc.DialOption{plain, to(tcp, true)}, true, ErrPlaintextToken},
		{"remote address named 127.0.0.1, plaintext, token", "passthrough:///127.0.0.1:7443", []grpc.DialOption{plain, to(tcp, true)}, true, ErrPlaintextToken},
		{"loopback proxy to a remote authority, plaintext, token", "passthrough:///sealer.example:7443", []grpc.DialOption{plain, to(tcp, false)}, true, ErrPlaintextToken},
		{"remote, plaintext, token from an interceptor", "passthrough:///sealer.example:7443", []grpc.DialOption{plain, to(tcp, true), intercepted}, false, ErrPlaintextToken},
		{"remote, plaintext, no token", "passthrough:///sealer.example:7443", []grpc.DialOption{plain, to(tcp, true)}, false, nil},
		{"remote, TLS, token", "passthrough:///sealer.example:7443", []grpc.DialOption{grpc.WithTransportCredentials(clientTLS), to(tlsListener, true)}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Dial(tc.target, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			ctx := context.Background()
			if tc.token {
				ctx = withToken(ctx)
			}
			fake.mu.Lock()
			fake.seen = nil
			fake.mu.Unlock()
			_, _, errSeal := sc.Seal(ctx, SealRequest{Principal: "p", Request: ResourceRead("file:///x")})
			_, errOpen := sc.Open(ctx, OpenRequest{State: "S", Principal: "p", Request: ResourceRead("file:///x")})
			fake.mu.Lock()
			seen := fake.seen
			fake.mu.Unlock()
			for _, err := range []error{errSeal, errOpen} {
				if tc.want == nil && err != nil || !errors.Is(err, tc.want) {
					t.Errorf("got %v, want %v", err, tc.want)
				}
			}
			switch {
			case tc.want != nil && len(seen) != 0:
				t.Errorf("the sealer got %d calls (authorization %q), want none", len(seen), seen)
			case tc.want == nil && len(seen) != 2:
				t.Errorf("the sealer got %d calls, want 2", len(seen))
			case tc.want == nil && tc.token && (len(seen[0]) != 1 || len(seen[1]) != 1):
				t.Errorf("the sealer got authorization %q, want the token in each call", seen)
			}
		})
	}
}
