package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server/internal/metrics"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// failingLedger is a fake for the error path: a ledger that cannot answer.
type failingLedger struct{}

func (failingLedger) Consume(context.Context, string, sealer.StateID, time.Time) error {
	return fmt.Errorf("%w: connection refused", ledger.ErrUnavailable)
}

func (failingLedger) Advance(context.Context, string, sealer.FlowID, uint32, time.Time) error {
	return fmt.Errorf("%w: connection refused", ledger.ErrUnavailable)
}

// fixedRing is a ring source that never changes.
type fixedRing struct{ ring *keys.Ring }

func (f fixedRing) Ring() *keys.Ring                  { return f.ring }
func (f fixedRing) Demand(context.Context) *keys.Ring { return f.ring }

func testService(t *testing.T, l consumer) *service {
	t.Helper()
	k, err := keys.NewKey(1, bytes.Repeat([]byte{1}, keys.Size), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keys.NewRing([]keys.Key{k}, 1)
	if err != nil {
		t.Fatal(err)
	}
	auth := &authenticator{}
	auth.tenants.Store(tenant.Single(Defaults().tenantBounds()))
	return &service{keys: fixedRing{ring}, ledger: l, auth: auth, cfg: Defaults(), now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		metrics: metrics.New(time.Second), refusals: newSampledLog("refused"), trace: tracingOff()}
}

// call runs a method through the service's interceptor, as gRPC does.
func call[Req, Resp any](s *service, method string, h func(context.Context, Req) (Resp, error), req Req) (any, error) {
	return s.unary(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: "/sealer.v1.Sealer/" + method},
		func(ctx context.Context, r any) (any, error) { return h(ctx, r.(Req)) })
}

func reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

func TestOpen_R6_LedgerUnavailableFailsClosed(t *testing.T) {
	s := testService(t, failingLedger{})
	binding := &sealerv1.Binding{Method: "tools/call", Params: &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("x")}}}
	resp, err := call(s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "p", Request: binding, OneTime: true})
	if err != nil {
		t.Fatal(err)
	}
	state := resp.(*sealerv1.SealResponse).RequestState
	_, err = call(s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: state, Principal: "p", Request: binding})
	if status.Code(err) != codes.Unavailable || reason(err) != "LEDGER_UNAVAILABLE" {
		t.Fatalf("got %v (%s), want Unavailable with LEDGER_UNAVAILABLE", err, reason(err))
	}
	if strings.Contains(status.Convert(err).Message(), "connection refused") {
		t.Errorf("status %q exposes the ledger's internals", status.Convert(err).Message())
	}
	// An ordinary state does not touch the ledger.
	resp, _ = call(s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "p", Request: binding})
	if _, err := call(s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: resp.(*sealerv1.SealResponse).RequestState, Principal: "p", Request: binding}); err != nil {
		t.Fatalf("ordinary open with the ledger down: %v", err)
	}
}

func TestToStatus(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{sealer.ErrInvalid, codes.InvalidArgument, "INVALID_STATE"},
		{sealer.ErrExpired, codes.FailedPrecondition, "EXPIRED"},
		{sealer.ErrPrincipalMismatch, codes.PermissionDenied, "PRINCIPAL_MISMATCH"},
		{sealer.ErrRequestMismatch, codes.FailedPrecondition, "REQUEST_MISMATCH"},
		{ledger.ErrConsumed, codes.AlreadyExists, "ALREADY_CONSUMED"},
		{fmt.Errorf("%w: timeout", ledger.ErrUnavailable), codes.Unavailable, "LEDGER_UNAVAILABLE"},
		{fmt.Errorf("%w: payload too big", sealer.ErrArgument), codes.InvalidArgument, "INVALID_ARGUMENT"},
		{fmt.Errorf("%w: %q", sealer.ErrMethod, "tools/list"), codes.InvalidArgument, "INVALID_ARGUMENT"},
		{errors.New("disk on fire"), codes.Internal, "INTERNAL"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			err, r := toStatus(context.Background(), log, "t", "m", tc.err)
			if status.Code(err) != tc.code || reason(err) != tc.reason || r != tc.reason {
				t.Fatalf("got %v %q %q, want %v %q", status.Code(err), reason(err), r, tc.code, tc.reason)
			}
			if tc.code == codes.Internal && strings.Contains(err.Error(), "fire") {
				t.Errorf("internal cause %q reached the caller", err)
			}
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := (&Config{}).Validate(); err == nil {
		t.Error("zero config: got nil, want errors")
	}
	d := Defaults()
	if err := d.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"max below min":         func(c *Config) { c.MaxTTL = c.MinTTL / 2 },
		"default above max":     func(c *Config) { c.DefaultTTL = 2 * c.MaxTTL },
		"negative skew":         func(c *Config) { c.Skew = -time.Second },
		"address without port":  func(c *Config) { c.GRPCAddr = "localhost" },
		"no data dir":           func(c *Config) { c.DataDir = "" },
		"unknown key source":    func(c *Config) { c.Keys = "hsm" },
		"transit without a key": func(c *Config) { c.Keys = "vault-transit" },
		"kv without a path":     func(c *Config) { c.Keys = "vault-kv" },
		"ledger not a URL":      func(c *Config) { c.Ledger = "redisx://h" },
	} {
		c := Defaults()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: got nil, want an error", name)
		}
	}
}

// TestConsume_CallerGoneIsNotALedgerError: a caller that hangs up is
// refused LEDGER_UNAVAILABLE as before, but not counted in
// sealer_ledger_errors_total, whose alert pages on real ledger failures.
func TestConsume_CallerGoneIsNotALedgerError(t *testing.T) {
	s := testService(t, failingLedger{})
	opened := func() *sealer.Opened {
		return &sealer.Opened{Claims: sealer.Claims{ExpiresAt: time.Now().Add(time.Minute)}, ID: sealer.StateID{1}, Payload: []byte("p")}
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.consume(gone, "t", opened(), nil, false); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("caller gone: got %v, want ErrUnavailable", err)
	}
	if n := counter(t, s.metrics, "sealer_ledger_errors_total"); n != 0 {
		t.Fatalf("caller gone: sealer_ledger_errors_total = %v, want 0", n)
	}
	if err := s.consume(context.Background(), "t", opened(), nil, false); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("ledger down: got %v, want ErrUnavailable", err)
	}
	if n := counter(t, s.metrics, "sealer_ledger_errors_total"); n != 1 {
		t.Fatalf("ledger down: sealer_ledger_errors_total = %v, want 1", n)
	}
}

// counter reads a counter as a scrape would: the value of the series of
// name whose labels include these name and value pairs.
func counter(t *testing.T, m *metrics.Set, name string, labels ...string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			matched := 0
			for _, l := range s.GetLabel() {
				for i := 0; i+1 < len(labels); i += 2 {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						matched++
					}
				}
			}
			if matched == len(labels)/2 {
				return s.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}
