package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server/audit"
)

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   string // "" means refused
	}{
		{"bearer", []string{"Bearer abc-._~+/="}, "abc-._~+/="},
		{"scheme in lower case (RFC 7235)", []string{"bearer abc"}, "abc"},
		{"scheme in upper case", []string{"BEARER abc"}, "abc"},
		{"empty token", []string{"Bearer "}, ""},
		{"no token", []string{"Bearer"}, ""},
		{"only padding", []string{"Bearer =="}, ""},
		{"two spaces", []string{"Bearer  abc"}, ""},
		{"space inside", []string{"Bearer a b"}, ""},
		{"other scheme", []string{"Basic YTpi"}, ""},
		{"non-ASCII", []string{"Bearer abc\xff"}, ""},
		{"control character", []string{"Bearer abc\x00"}, ""},
		{"second value, non-ASCII", []string{"Bearer abc", "Bearer \xc3\xa9"}, ""},
		{"second value, valid", []string{"Bearer abc", "Bearer abc"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bearerToken(tc.values)
			switch {
			case tc.want == "" && !errors.Is(err, errUnauthenticated):
				t.Fatalf("got %q, %v; want refused", got, err)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// testCA is a CA made in memory, issuing client certificates with SANs
// encoded exactly as given.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key}
}

// client issues a client certificate whose subjectAltName holds these URIs
// (as raw bytes, not through url.URL) and DNS names.
func (ca *testCA) client(t *testing.T, uris, dns []string) []*x509.Certificate {
	t.Helper()
	var names []asn1.RawValue
	for _, u := range uris {
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(u)})
	}
	for _, d := range dns {
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte(d)})
	}
	san, err := asn1.Marshal(names)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		ExtraExtensions: []pkix.Extension{{Id: oidSubjectAltName, Value: san}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{cert}
}

func TestCertTenant(t *testing.T) {
	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	a := &authenticator{clientCAs: func() *x509.CertPool { return pool }}
	ta, tb := &tenant{name: "a"}, &tenant{name: "b"}
	ts := &tenants{
		byURI: map[string]*tenant{"spiffe://x/a": ta, "spiffe://x/b%20c": tb, "spiffe://x/b": tb},
		byDNS: map[string]*tenant{"a.example": ta, "b.example": tb},
	}
	for _, tc := range []struct {
		name      string
		uris, dns []string
		want      *tenant // nil: refused
	}{
		{"uri", []string{"spiffe://x/a"}, nil, ta},
		{"dns in another case", nil, []string{"A.Example"}, ta},
		{"uri and dns of one tenant", []string{"spiffe://x/a"}, []string{"a.example"}, ta},
		{"uri matched only after re-serialisation", []string{"spiffe://x/b c"}, nil, nil},
		{"uri in another case", []string{"SPIFFE://x/a"}, nil, nil},
		{"two tenants by uri", []string{"spiffe://x/a", "spiffe://x/b"}, nil, nil},
		{"two tenants by uri and dns", []string{"spiffe://x/a"}, []string{"b.example"}, nil},
		{"no tenant", []string{"spiffe://x/z"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.certTenant(ts, ca.client(t, tc.uris, tc.dns))
			switch {
			case tc.want == nil && !errors.Is(err, errUnauthenticated):
				t.Fatalf("got %v, %v; want refused", got, err)
			case tc.want != nil && got != tc.want:
				t.Fatalf("got %v, %v; want tenant %s", got, err, tc.want.name)
			}
		})
	}
}

// tenantsService is a service with two token tenants, a and b, and an audit
// log kept in memory.
func tenantsService(t *testing.T, l consumer) (*service, *syncBuffer) {
	t.Helper()
	s := testService(t, l)
	ts := &tenants{all: map[string]*tenant{}, tokens: map[[sha256.Size]byte]*tenant{}}
	for _, name := range []string{"a", "b"} {
		tn := &tenant{name: name, defaultTTL: time.Minute, maxTTL: time.Hour, maxPayload: sealer.MaxPayload, oneTime: oneTimeAllowed}
		tn.limiter = newLimiter(tn)
		ts.all[name] = tn
		ts.tokens[sha256Sum("token-"+name)] = tn
	}
	s.auth.tenants.Store(ts)
	auditOut := &syncBuffer{}
	s.audit = audit.ToLogger(slog.New(slog.NewJSONHandler(auditOut, nil)))
	return s, auditOut
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func withToken(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
}

func TestUnauthenticatedCallsAreCountedNotAudited(t *testing.T) {
	s, auditOut := tenantsService(t, failingLedger{})
	state := "AQ" + strings.Repeat("A", 200) // a header the caller chose
	for _, ctx := range []context.Context{context.Background(), withToken("wrong"), withToken("")} {
		_, err := s.unary(ctx, &sealerv1.OpenRequest{RequestState: state, Principal: "p"}, openInfo, echoHandler)
		if status.Code(err) != codes.Unauthenticated || reason(err) != "UNAUTHENTICATED" {
			t.Fatalf("got %v, want UNAUTHENTICATED", err)
		}
	}
	if auditOut.String() != "" {
		t.Errorf("unauthenticated calls wrote audit events:\n%s", auditOut)
	}
	if n := testutil.ToFloat64(s.metrics.unauthenticated.WithLabelValues("grpc")); n != 3 {
		t.Errorf("sealer_unauthenticated_total = %v, want 3", n)
	}
	// An authenticated call is audited.
	s.unary(withToken("token-a"), &sealerv1.OpenRequest{RequestState: state, Principal: "p"}, openInfo, echoHandler)
	if !strings.Contains(auditOut.String(), `"tenant":"a"`) {
		t.Errorf("authenticated call not audited: %q", auditOut)
	}
}

// clockLedger is a fake for the error path: a ledger whose consume takes
// long enough for the state's acceptance window to close meanwhile.
type clockLedger struct {
	now   *time.Time
	took  time.Duration
	until time.Time
}

func (l *clockLedger) Consume(_ context.Context, _ string, _ sealer.StateID, until time.Time) error {
	l.until = until
	*l.now = l.now.Add(l.took)
	return nil
}

func (l *clockLedger) Advance(_ context.Context, _ string, _ sealer.FlowID, _ uint32, until time.Time) error {
	return l.Consume(context.Background(), "", sealer.StateID{}, until)
}

func TestOpen_R6_ConsumeCompletingAfterTheDeadlineIsRefused(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	led := &clockLedger{now: &now, took: time.Millisecond}
	s := testService(t, led)
	s.now = func() time.Time { return now }
	binding := &sealerv1.Binding{Method: "tools/call", Params: &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("x")}}}
	resp, err := call(s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "p", Request: binding, OneTime: true})
	if err != nil {
		t.Fatal(err)
	}
	expires := resp.(*sealerv1.SealResponse).ExpiresAt.AsTime()
	deadline := expires.Add(s.cfg.Skew)
	// The last millisecond of the window: the expiry check passes, the
	// consume completes one millisecond later.
	now = deadline
	_, err = call(s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: resp.(*sealerv1.SealResponse).RequestState, Principal: "p", Request: binding})
	if reason(err) != "EXPIRED" {
		t.Fatalf("consume completed after the deadline: got %v, want EXPIRED", err)
	}
	if want := deadline.Add(s.cfg.Skew + s.cfg.LedgerTimeout); led.until.Before(want) {
		t.Errorf("ledger entry until %v, want at least %v (deadline + skew + ledger timeout)", led.until, want)
	}
}

// stalledKeys is a fake for the error path: a ring source whose on-demand
// refresh hangs, as it does while Vault hangs, until the caller gives up.
type stalledKeys struct {
	fixedRing
	waiting sync.WaitGroup
}

func (s *stalledKeys) Demand(ctx context.Context) *keys.Ring {
	s.waiting.Add(1)
	defer s.waiting.Done()
	<-ctx.Done()
	return s.ring
}

func TestOpen_KeyMissDuringAVaultStallLeavesOtherTenantsAlone(t *testing.T) {
	s, _ := tenantsService(t, failingLedger{})
	stalled := &stalledKeys{fixedRing: s.keys.(fixedRing)}
	s.keys = stalled
	s.inFlight = make(chan struct{}, 16)
	binding := &sealerv1.Binding{Digest: make([]byte, 32)}
	resp, err := s.unary(withToken("token-a"), &sealerv1.SealRequest{Principal: "p", Request: binding}, sealInfo, handlerOf(s.Seal))
	if err != nil {
		t.Fatal(err)
	}
	forged := forgeKeyVersion(t, resp.(*sealerv1.SealResponse).RequestState, 0xFFFFFFFF)

	// Tenant a floods opens of forged states naming an unknown key version.
	ctx, cancel := context.WithCancel(withToken("token-a"))
	var flood sync.WaitGroup
	refused := make(chan string, 64)
	for range 64 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			_, err := s.unary(ctx, &sealerv1.OpenRequest{RequestState: forged, Principal: "p", Request: binding}, openInfo, handlerOf(s.Open))
			refused <- reason(err)
		}()
	}
	// Once the flood is in place, tenant b calls as usual. The opens beyond
	// the waiters are refused without waiting: INVALID_STATE, or
	// RESOURCE_EXHAUSTED when more of them than the 16 slots overlap.
	for i := 0; i < 64-demandWaiters; i++ {
		if r := <-refused; r != "INVALID_STATE" && r != "RESOURCE_EXHAUSTED" {
			t.Fatalf("forged state beyond the waiters: got %s, want INVALID_STATE or RESOURCE_EXHAUSTED at once", r)
		}
	}
	failed := 0
	for range 100 {
		if _, err := s.unary(withToken("token-b"), &sealerv1.SealRequest{Principal: "p", Request: binding}, sealInfo, handlerOf(s.Seal)); err != nil {
			failed++
		}
	}
	cancel()
	flood.Wait()
	if failed > 0 {
		t.Fatalf("tenant b: %d of 100 seals failed while tenant a's key misses waited on a stalled refresh", failed)
	}
}

// forgeKeyVersion rewrites the key version of a state's public header.
func forgeKeyVersion(t *testing.T, state string, version uint32) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(state) // FORMAT.md: unpadded base64url
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(raw[1:5], version)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func unaryInfo(method string) *grpc.UnaryServerInfo {
	return &grpc.UnaryServerInfo{FullMethod: "/sealer.v1.Sealer/" + method}
}

func sha256Sum(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

var (
	sealInfo = unaryInfo("Seal")
	openInfo = unaryInfo("Open")
)

func echoHandler(_ context.Context, req any) (any, error) { return req, nil }

func handlerOf[Req, Resp any](h func(context.Context, Req) (Resp, error)) func(context.Context, any) (any, error) {
	return func(ctx context.Context, r any) (any, error) { return h(ctx, r.(Req)) }
}

func TestConsume_PayloadZeroedWhenTheLedgerRefuses(t *testing.T) {
	now := time.Now()
	for name, l := range map[string]consumer{
		"ledger unavailable":          failingLedger{},
		"consumed after the deadline": &clockLedger{now: &now, took: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			s := testService(t, l)
			s.now = func() time.Time { return now }
			payload := []byte("the secret the caller must not get")
			o := &sealer.Opened{Claims: sealer.Claims{ExpiresAt: now.Add(time.Second), OneTime: true}, Payload: payload}
			if err := s.consume(context.Background(), "t", o, false); err == nil {
				t.Fatal("got nil, want the ledger's refusal")
			}
			if !bytes.Equal(payload, make([]byte, len(payload))) {
				t.Fatalf("payload after a refused consume: %q, want zeroes", payload)
			}
		})
	}
}

func TestGateHTTP_ACallEndsBeforeItsAnswerCanNoLongerBeWritten(t *testing.T) {
	s := testService(t, nil)
	var deadline time.Time
	var held int
	h := s.gateHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ok bool
		if deadline, ok = r.Context().Deadline(); !ok {
			t.Error("a REST call runs with no deadline")
		}
		held = len(r.Context().Value(slotsKey{}).(*slots).frees)
	}), 1, func(w http.ResponseWriter, r *http.Request, err error) { t.Errorf("refused: %v", err) })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/open", nil))
	if end := time.Now(); deadline.After(end.Add(httpWriteTimeout)) {
		t.Errorf("deadline %v after the call, past the write timeout %v", deadline.Sub(end), httpWriteTimeout)
	}
	if held != 1 {
		t.Errorf("the call holds %d slots, want the REST door's one", held)
	}
}
