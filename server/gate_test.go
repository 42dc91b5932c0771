package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server/internal/audit"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// tenantsService is a service with two token tenants, a and b, and an audit
// log kept in memory.
func tenantsService(t *testing.T, l consumer) (*service, *syncBuffer) {
	t.Helper()
	s := testService(t, l)
	file := "tenants:\n"
	for _, name := range []string{"a", "b"} {
		sum := sha256.Sum256([]byte("token-" + name))
		file += fmt.Sprintf("  %s:\n    tokens: [sha256:%x]\n    policy: {defaultTTL: 1m, maxTTL: 1h}\n", name, sum)
	}
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := tenant.Load(path, Defaults().tenantBounds(), false)
	if err != nil {
		t.Fatal(err)
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
	if n := counter(t, s.metrics, "sealer_unauthenticated_total", "transport", "grpc"); n != 3 {
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
	for i := 0; i < 64-tenant.DemandWaiters; i++ {
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
			if err := s.consume(context.Background(), "t", o, nil, false); err == nil {
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
