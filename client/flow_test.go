package client

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server"
)

// A flow through the Go client against a real sealer (R9): three rounds of
// one request share one id and deadline; an off-script answer, a rewind and
// a fork are refused, each with its sentinel and Rejected; the round after
// the tenant's last is refused.
func TestClient_R9_Flow(t *testing.T) {
	sc := startSealer(t, func(c *server.Config) { c.MaxRounds = 3 })
	ctx := context.Background()
	call := ToolCall("book_trip", []byte(`{"city":"Paris"}`))
	retry := func(keys []string) Binding { // nil: keys not known
		b := call
		b.Responded = keys
		return b
	}

	state1, _, err := sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, Payload: []byte("r1"),
		Flow: FlowRequest{LatestOnly: true, Asked: []string{"dates"}}.After(nil)})
	if err != nil {
		t.Fatal(err)
	}
	// Off-script answers are refused before anything opens, and burn
	// nothing: the genuine retry opens afterwards.
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"keys not known", nil},
		{"no answer", []string{}},
		{"an extra key", []string{"dates", "admin"}},
		{"a key in another case", []string{"Dates"}},
		{"another key", []string{"date"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sc.Open(ctx, OpenRequest{State: state1, Principal: "alice", Request: retry(tc.keys)})
			if !errors.Is(err, sealer.ErrInputMismatch) || !Rejected(err) {
				t.Errorf("got %v, want sealer.ErrInputMismatch, rejected", err)
			}
		})
	}
	o1, err := sc.Open(ctx, OpenRequest{State: state1, Principal: "alice", Request: retry([]string{"dates"})})
	if err != nil {
		t.Fatal(err)
	}
	if o1.Flow == nil || o1.Flow.Round != 1 || !o1.Flow.LatestOnly || o1.Flow.Deadline.IsZero() || o1.State != state1 || string(o1.Payload) != "r1" {
		t.Fatalf("round 1 opened as %+v (flow %+v), want round 1, latest-only, with a deadline", o1, o1.Flow)
	}

	state2, _, err := sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, Payload: []byte("r2"),
		Flow: FlowRequest{Asked: []string{"seat", "meal"}}.After(o1)})
	if err != nil {
		t.Fatal(err)
	}
	// 32 parallel retries of round 2: one opens.
	var opened atomic.Int32
	var o2 atomic.Pointer[Opened]
	reasons := map[string]int{}
	errs := make(chan error, 32)
	start := make(chan struct{})
	for range 32 {
		go func() {
			<-start
			o, err := sc.Open(ctx, OpenRequest{State: state2, Principal: "alice", Request: retry([]string{"meal", "seat"})})
			if err == nil {
				opened.Add(1)
				o2.Store(o)
			}
			errs <- err
		}()
	}
	close(start)
	for range 32 {
		switch err := <-errs; {
		case err == nil:
			reasons["OK"]++
		case errors.Is(err, ledger.ErrConsumed) && Rejected(err):
			reasons["ALREADY_CONSUMED"]++
		default:
			t.Errorf("a fork: got %v, want ledger.ErrConsumed", err)
		}
	}
	if opened.Load() != 1 {
		t.Fatalf("32 parallel retries of round 2: %v, want exactly one opened", reasons)
	}
	t.Logf("32 parallel retries of round 2: %v", reasons)
	f1, f2 := o1.Flow, o2.Load().Flow
	if f2.ID != f1.ID || f2.Round != 2 || !f2.Deadline.Equal(f1.Deadline) || !f2.LatestOnly {
		t.Fatalf("round 2's flow %+v, want round 1's %+v one round on, still latest-only", f2, f1)
	}

	// Rewind: round 1 after round 2 opened.
	if _, err := sc.Open(ctx, OpenRequest{State: state1, Principal: "alice", Request: retry([]string{"dates"})}); !errors.Is(err, ledger.ErrConsumed) || !Rejected(err) {
		t.Errorf("round 1 after round 2 opened: got %v, want ledger.ErrConsumed", err)
	}
	// Another principal or request cannot continue the flow.
	if _, _, err := sc.Seal(ctx, SealRequest{Principal: "mallory", Request: call, Flow: FlowRequest{}.After(o2.Load())}); !errors.Is(err, sealer.ErrPrincipalMismatch) {
		t.Errorf("mallory continuing alice's flow: got %v, want sealer.ErrPrincipalMismatch", err)
	}

	state3, _, err := sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, Flow: FlowRequest{Asked: []string{}}.After(o2.Load())})
	if err != nil {
		t.Fatal(err)
	}
	o3, err := sc.Open(ctx, OpenRequest{State: state3, Principal: "alice", Request: retry([]string{})})
	if err != nil || o3.Flow.Round != 3 {
		t.Fatalf("round 3: got %+v, %v", o3, err)
	}
	_, _, err = sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, Flow: FlowRequest{}.After(o3)})
	if !errors.Is(err, sealer.ErrFlowExhausted) || !Rejected(err) {
		t.Errorf("round 4 of a tenant allowing 3: got %v, want sealer.ErrFlowExhausted", err)
	}
}

// A flow ends at its deadline, whatever the rounds sealed before it: its
// states do not open, and it does not continue. The skew is the largest, so
// that however late the retries come on a loaded machine their state is
// not yet expired (which Open reports first) when its flow is.
func TestClient_R9_FlowDeadline(t *testing.T) {
	sc := startSealer(t, func(c *server.Config) {
		c.MinTTL, c.FlowTTL, c.Skew = 10*time.Millisecond, 200*time.Millisecond, server.MaxSkew
	})
	ctx := context.Background()
	call := ToolCall("t", nil)
	state, expires, err := sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, TTL: time.Minute, Flow: &FlowRequest{}})
	if err != nil {
		t.Fatal(err)
	}
	if expires.After(time.Now().Add(time.Second)) {
		t.Errorf("a state of a 200 ms flow expires at %v, want no later than the flow's deadline", expires)
	}
	// The state expires with its flow, on the clock this process shares
	// with the sealer: sleep past it.
	time.Sleep(time.Until(expires.Add(time.Millisecond)))
	_, errOpen := sc.Open(ctx, OpenRequest{State: state, Principal: "alice", Request: call})
	_, _, errSeal := sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, Flow: &FlowRequest{Continues: state}})
	for name, err := range map[string]error{"open": errOpen, "continue": errSeal} {
		if !errors.Is(err, sealer.ErrFlowExpired) || !Rejected(err) {
			t.Errorf("%s after the flow's deadline: got %v, want sealer.ErrFlowExpired", name, err)
		}
	}
}

// noFlowSealer is a sealer of a release without flows: it ignores the
// request's flow and seals a state without one.
type noFlowSealer struct {
	sealerv1.UnimplementedSealerServer
}

func (noFlowSealer) Seal(context.Context, *sealerv1.SealRequest) (*sealerv1.SealResponse, error) {
	return &sealerv1.SealResponse{RequestState: "STATE-WITHOUT-A-FLOW", ExpiresAt: timestamppb.Now()}, nil
}

// A Seal that asks for a flow fails closed against a sealer that ignores
// it: no state, ErrNoFlow, which is the sealer's failure, not a refusal.
func TestClient_SealFailsClosedWithoutAFlow(t *testing.T) {
	sc := dialFake(t, noFlowSealer{})
	call := ToolCall("t", nil)
	state, _, err := sc.Seal(context.Background(), SealRequest{Principal: "alice", Request: call, Flow: &FlowRequest{LatestOnly: true}})
	if state != "" || !errors.Is(err, ErrNoFlow) || Rejected(err) {
		t.Errorf("got %q, %v; want no state, ErrNoFlow, not rejected", state, err)
	}
	if state, _, err := sc.Seal(context.Background(), SealRequest{Principal: "alice", Request: call}); err != nil || state == "" {
		t.Errorf("without a flow: got %q, %v; want the state", state, err)
	}
}

func TestInputKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    map[string]int
		want []string
	}{
		{"nil: no inputResponses, the empty set", nil, []string{}},
		{"empty", map[string]int{}, []string{}},
		{"sorted as bytes", map[string]int{"b": 1, "B": 2, "a": 3}, []string{"B", "a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InputKeys(tc.m); got == nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestFlowRequest_After(t *testing.T) {
	base := FlowRequest{LatestOnly: true, Asked: []string{"k"}}
	for _, tc := range []struct {
		name   string
		opened *Opened
		want   string
	}{
		{"nothing opened: a new flow", nil, ""},
		{"a state without a flow: a new flow", &Opened{State: "S"}, ""},
		{"a state of a flow: its next round", &Opened{State: "S", Flow: &Flow{Round: 1}}, "S"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := base.After(tc.opened)
			if got.Continues != tc.want || !got.LatestOnly || !slices.Equal(got.Asked, base.Asked) {
				t.Errorf("got %+v, want continues %q with the rest of %+v", got, tc.want, base)
			}
		})
	}
	if base.Continues != "" {
		t.Error("After changed the request it was called on")
	}
}
