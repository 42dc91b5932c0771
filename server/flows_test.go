package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger/embedded"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// Flows (R9) through the gate with the embedded ledger: what the
// service adds to the core's checks (sealer/flow_test.go): the tenant's
// flow TTL and maxRounds, the ledger's Advance for latest-only states, the
// responded keys taken from the request, and the reasons on the wire.

// embeddedLedger is an embedded ledger in dir, closed at the end of the
// test.
func embeddedLedger(t *testing.T, dir string) *embedded.Ledger {
	t.Helper()
	l, err := embedded.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// flowCall runs a Seal or Open through the gate for the tenant in ctx (the
// implicit tenant when none) and returns the response and the reason, "OK"
// for none.
func flowCall[Req, Resp any](ctx context.Context, s *service, method string, h func(context.Context, Req) (Resp, error), req Req) (Resp, string) {
	resp, err := s.unary(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/sealer.v1.Sealer/" + method},
		func(ctx context.Context, r any) (any, error) { return h(ctx, r.(Req)) })
	if err != nil {
		var zero Resp
		return zero, reason(err)
	}
	return resp.(Resp), "OK"
}

// toolCall is the binding of a tools/call of deploy with arguments; with
// members, the params carry them too (a retry's inputResponses).
func toolCall(t *testing.T, arguments, members string) *sealerv1.Binding {
	t.Helper()
	params := &structpb.Struct{}
	if err := params.UnmarshalJSON([]byte(`{"name":"deploy","arguments":` + arguments + members + "}")); err != nil {
		t.Fatal(err)
	}
	return &sealerv1.Binding{Method: "tools/call", Params: params}
}

// responses is an inputResponses member answering keys.
func responses(keys ...string) string {
	var members []string
	for _, k := range keys {
		members = append(members, fmt.Sprintf(`%q:{"action":"accept"}`, k))
	}
	return `,"inputResponses":{` + strings.Join(members, ",") + "}"
}

const prodArgs = `{"env":"prod"}`

// flowReq is a SealRequest.flow.
func flowReq(continues string, latestOnly bool, asked ...string) *sealerv1.FlowRequest {
	f := &sealerv1.FlowRequest{Continues: continues, LatestOnly: latestOnly}
	if asked != nil {
		f.Asked = &sealerv1.InputKeys{Keys: asked}
	}
	return f
}

// sealRound seals a round of deploy for alice in the implicit tenant.
func sealRound(t *testing.T, s *service, f *sealerv1.FlowRequest) (*sealerv1.SealResponse, string) {
	t.Helper()
	return flowCall(context.Background(), s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: toolCall(t, prodArgs, ""), Flow: f})
}

// mustSealRound is sealRound, failing the test on a refusal.
func mustSealRound(t *testing.T, s *service, f *sealerv1.FlowRequest) *sealerv1.SealResponse {
	t.Helper()
	resp, r := sealRound(t, s, f)
	if r != "OK" {
		t.Fatalf("seal %v: got %s, want OK", f, r)
	}
	return resp
}

// openRound opens state for alice as the retry answering keys.
func openRound(t *testing.T, s *service, state string, keys ...string) (*sealerv1.OpenResponse, string) {
	t.Helper()
	return flowCall(context.Background(), s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: state, Principal: "alice", Request: toolCall(t, prodArgs, responses(keys...))})
}

// TestFlows_R9_RoundsUpToMaxRounds: a latest-only flow goes through the
// server's 16 rounds; each keeps the flow's id and deadline and expires no
// later than it; after round n opened no round up to n opens again, also
// with the ledger reopened from its file; round 17 is FLOW_EXHAUSTED.
func TestFlows_R9_RoundsUpToMaxRounds(t *testing.T) {
	path := t.TempDir()
	s := testService(t, embeddedLedger(t, path))
	first := mustSealRound(t, s, flowReq("", true, "k1"))
	sealed, states := first, []string{}
	for round := uint32(1); ; round++ {
		f := sealed.GetFlow()
		if f.GetRound() != round || !bytes.Equal(f.GetId(), first.Flow.Id) || !f.GetLatestOnly() ||
			!f.GetDeadline().AsTime().Equal(first.Flow.Deadline.AsTime()) {
			t.Fatalf("round %d: flow %v, want round %d of %v", round, f, round, first.Flow)
		}
		if sealed.ExpiresAt.AsTime().After(f.Deadline.AsTime()) {
			t.Fatalf("round %d expires at %v, after the flow's deadline %v", round, sealed.ExpiresAt.AsTime(), f.Deadline.AsTime())
		}
		if opened, r := openRound(t, s, sealed.RequestState, fmt.Sprintf("k%d", round)); r != "OK" || opened.GetFlow().GetRound() != round {
			t.Fatalf("round %d: got %s %v, want OK", round, r, opened.GetFlow())
		}
		states = append(states, sealed.RequestState)
		for i, st := range states {
			if _, r := openRound(t, s, st, fmt.Sprintf("k%d", i+1)); r != "ALREADY_CONSUMED" {
				t.Fatalf("round %d after round %d opened: got %s, want ALREADY_CONSUMED", i+1, round, r)
			}
		}
		// latest_only false on a continuation: it stays on.
		next, r := sealRound(t, s, flowReq(sealed.RequestState, false, fmt.Sprintf("k%d", round+1)))
		if round == uint32(s.cfg.MaxRounds) {
			if r != "FLOW_EXHAUSTED" {
				t.Fatalf("round %d: got %s, want FLOW_EXHAUSTED", round+1, r)
			}
			break
		}
		if r != "OK" {
			t.Fatalf("round %d: got %s, want OK", round+1, r)
		}
		sealed = next
	}

	s.ledger.(*embedded.Ledger).Close()
	s.ledger = embeddedLedger(t, path)
	for i, st := range states {
		if _, r := openRound(t, s, st, fmt.Sprintf("k%d", i+1)); r != "ALREADY_CONSUMED" {
			t.Errorf("round %d with the ledger reopened: got %s, want ALREADY_CONSUMED", i+1, r)
		}
	}
}

// TestFlows_R9_Forks: 32 concurrent opens of one latest-only round open
// once; of 32 sibling states of round 2 (a server that continued round 1
// 32 times) one opens. Without latest-only all do: the flag is what the
// ledger enforces.
func TestFlows_R9_Forks(t *testing.T) {
	s := testService(t, embeddedLedger(t, t.TempDir()))
	at := func(states []string, keys ...string) map[string]int {
		got := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, st := range states {
			wg.Go(func() {
				_, r := openRound(t, s, st, keys...)
				mu.Lock()
				got[r]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return got
	}
	for _, latestOnly := range []bool{true, false} {
		t.Run(fmt.Sprintf("latest-only %v", latestOnly), func(t *testing.T) {
			want := map[bool]int{true: 1, false: 32}[latestOnly]
			s1 := mustSealRound(t, s, flowReq("", latestOnly, "a")).RequestState
			same := make([]string, 32)
			for i := range same {
				same[i] = s1
			}
			if got := at(same, "a"); got["OK"] != want || got["OK"]+got["ALREADY_CONSUMED"] != 32 {
				t.Errorf("32 opens of one round: got %v, want %d OK, the rest ALREADY_CONSUMED", got, want)
			}
			siblings := make([]string, 32)
			for i := range siblings {
				siblings[i] = mustSealRound(t, s, flowReq(s1, latestOnly, "b")).RequestState
			}
			if got := at(siblings, "b"); got["OK"] != want || got["OK"]+got["ALREADY_CONSUMED"] != 32 {
				t.Errorf("32 sibling states of round 2: got %v, want %d OK, the rest ALREADY_CONSUMED", got, want)
			}
		})
	}
}

// TestFlows_R9_DeadlineEdge: with the server's clock set, a flow's state
// opens up to its deadline's millisecond and not after (FLOW_EXPIRED, then
// EXPIRED once its own expiry, clamped to the deadline, is past the skew);
// no round is sealed from the deadline on.
func TestFlows_R9_DeadlineEdge(t *testing.T) {
	s := testService(t, embeddedLedger(t, t.TempDir()))
	now := time.Now().Truncate(time.Millisecond)
	s.now = func() time.Time { return now }
	// A TTL of an hour, past the flow's 15 minutes: clamped.
	seal := func(continues string) (*sealerv1.SealResponse, string) {
		return flowCall(context.Background(), s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: toolCall(t, prodArgs, ""),
			Ttl: durationpb.New(time.Hour), Flow: flowReq(continues, true)})
	}
	s1, r := seal("")
	deadline := now.Add(s.cfg.FlowTTL)
	if r != "OK" || !s1.Flow.Deadline.AsTime().Equal(deadline) || !s1.ExpiresAt.AsTime().Equal(deadline) {
		t.Fatalf("round 1: got %s, deadline %v, expires %v; want OK, both now + flow TTL %v", r, s1.GetFlow().GetDeadline().AsTime(), s1.GetExpiresAt().AsTime(), deadline)
	}
	if _, r := openRound(t, s, s1.RequestState); r != "OK" {
		t.Fatalf("round 1: %s", r)
	}
	now = deadline.Add(-time.Minute)
	resp, r := seal(s1.RequestState)
	if r != "OK" || !resp.ExpiresAt.AsTime().Equal(deadline) {
		t.Fatalf("round 2: got %s, expires %v; want OK, expiring at the deadline %v", r, resp.GetExpiresAt().AsTime(), deadline)
	}
	s2 := resp.RequestState
	for _, tc := range []struct {
		at         time.Duration // from the deadline
		open, seal string        // of round 2, and of round 3 continuing round 2
	}{
		{-time.Millisecond, "", "OK"},
		{0, "", "FLOW_EXPIRED"},
		{time.Millisecond, "FLOW_EXPIRED", "FLOW_EXPIRED"},
		{s.cfg.Skew, "FLOW_EXPIRED", "FLOW_EXPIRED"},
		{s.cfg.Skew + time.Millisecond, "EXPIRED", "EXPIRED"},
	} {
		now = deadline.Add(tc.at)
		if tc.open != "" {
			if _, r := openRound(t, s, s2); r != tc.open {
				t.Errorf("open of round 2 at the deadline %+v: got %s, want %s", tc.at, r, tc.open)
			}
		}
		if _, r := seal(s2); r != tc.seal {
			t.Errorf("seal of round 3 at the deadline %+v: got %s, want %s", tc.at, r, tc.seal)
		}
	}
	now = deadline
	if _, r := openRound(t, s, s2); r != "OK" {
		t.Errorf("open of round 2 at the deadline's millisecond: got %s, want OK", r)
	}
}

// TestFlows_R9_RespondedKeys: the keys of a round that asked github_login
// and otp, from the params' inputResponses or from responded (which wins),
// as sets compared byte for byte; a refusal does not burn the round.
func TestFlows_R9_RespondedKeys(t *testing.T) {
	s := testService(t, embeddedLedger(t, t.TempDir()))
	state := mustSealRound(t, s, flowReq("", true, "github_login", "otp")).RequestState
	digest := &sealerv1.Binding{Digest: bytes.Repeat([]byte{7}, 32)}
	digestState, _ := flowCall(context.Background(), s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: digest, Flow: flowReq("", true, "otp")})
	keys := func(k ...string) *sealerv1.InputKeys { return &sealerv1.InputKeys{Keys: k} }
	for _, tc := range []struct {
		name      string
		request   *sealerv1.Binding
		responded *sealerv1.InputKeys
		want      string
	}{
		{"params: an extra key", toolCall(t, prodArgs, responses("github_login", "otp", "admin")), nil, "INPUT_MISMATCH"},
		{"params: a missing key", toolCall(t, prodArgs, responses("github_login")), nil, "INPUT_MISMATCH"},
		{"params: a key in another case", toolCall(t, prodArgs, responses("github_login", "OTP")), nil, "INPUT_MISMATCH"},
		{"params: no inputResponses", toolCall(t, prodArgs, ""), nil, "INPUT_MISMATCH"},
		{"params: inputResponses not an object", toolCall(t, prodArgs, `,"inputResponses":["github_login","otp"]`), nil, "INPUT_MISMATCH"},
		{"responded: an extra key", toolCall(t, prodArgs, ""), keys("github_login", "otp", "admin"), "INPUT_MISMATCH"},
		{"responded: a missing key", toolCall(t, prodArgs, ""), keys("otp"), "INPUT_MISMATCH"},
		{"responded: a key in another case", toolCall(t, prodArgs, ""), keys("Github_login", "otp"), "INPUT_MISMATCH"},
		{"responded: none", toolCall(t, prodArgs, ""), keys(), "INPUT_MISMATCH"},
		{"responded: a key twice", toolCall(t, prodArgs, ""), keys("github_login", "otp", "otp"), "INPUT_MISMATCH"},
		{"responded wins over the params", toolCall(t, prodArgs, responses("github_login", "otp")), keys("github_login"), "INPUT_MISMATCH"},
		// Last: the refusals above burnt nothing.
		{"responded: the keys asked, in another order", toolCall(t, prodArgs, responses("admin")), keys("otp", "github_login"), "OK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := flowCall(context.Background(), s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: state, Principal: "alice", Request: tc.request, Responded: tc.responded})
			if r != tc.want {
				t.Errorf("got %s, want %s", r, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name      string
		responded *sealerv1.InputKeys
		want      string
	}{
		{"digest binding, no responded: the keys unknown", nil, "INPUT_MISMATCH"},
		{"digest binding, responded", keys("otp"), "OK"},
	} {
		_, r := flowCall(context.Background(), s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: digestState.GetRequestState(), Principal: "alice", Request: digest, Responded: tc.responded})
		if r != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, r, tc.want)
		}
	}
}

// TestFlows_R9_ContinuationRefusals: Seal continues only an authentic flow
// state of the same tenant, principal and request, and takes valid keys.
func TestFlows_R9_ContinuationRefusals(t *testing.T) {
	s := testService(t, embeddedLedger(t, t.TempDir()))
	s1 := mustSealRound(t, s, flowReq("", true)).RequestState
	plain, _ := flowCall(context.Background(), s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: toolCall(t, prodArgs, "")})
	other := *s.auth.tenants.Load().Implicit()
	other.Name = "other"
	other.Limiter = tenant.NewLimiter(&other)
	inOther := context.WithValue(context.Background(), tenantKey{}, &other)
	long := make([]string, 257)
	for i := range long {
		long[i] = fmt.Sprint(i)
	}
	for _, tc := range []struct {
		name, principal, args string
		ctx                   context.Context
		flow                  *sealerv1.FlowRequest
		want                  string
	}{
		{"another principal", "mallory", prodArgs, context.Background(), flowReq(s1, true), "PRINCIPAL_MISMATCH"},
		{"another request", "alice", `{"env":"staging"}`, context.Background(), flowReq(s1, true), "REQUEST_MISMATCH"},
		{"another tenant", "alice", prodArgs, inOther, flowReq(s1, true), "INVALID_STATE"},
		{"a plain state", "alice", prodArgs, context.Background(), flowReq(plain.GetRequestState(), true), "INVALID_ARGUMENT"},
		{"not a state", "alice", prodArgs, context.Background(), flowReq("garbage", true), "INVALID_STATE"},
		{"an empty key asked", "alice", prodArgs, context.Background(), flowReq(s1, true, ""), "INVALID_ARGUMENT"},
		{"a key asked twice", "alice", prodArgs, context.Background(), flowReq(s1, true, "a", "a"), "INVALID_ARGUMENT"},
		{"257 keys asked", "alice", prodArgs, context.Background(), flowReq(s1, true, long...), "INVALID_ARGUMENT"},
		{"the same principal, request and tenant", "alice", prodArgs, context.Background(), flowReq(s1, true, "a", "A"), "OK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := flowCall(tc.ctx, s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: tc.principal, Request: toolCall(t, tc.args, ""), Flow: tc.flow})
			if r != tc.want {
				t.Errorf("got %s, want %s", r, tc.want)
			}
		})
	}
}

// TestFlows_R6_LatestOnlyFailsClosed: with the ledger down a latest-only
// round is LEDGER_UNAVAILABLE, and opens once it is back; a flow without
// latest-only never touches the ledger.
func TestFlows_R6_LatestOnlyFailsClosed(t *testing.T) {
	s := testService(t, failingLedger{})
	latest := mustSealRound(t, s, flowReq("", true)).RequestState
	if _, r := openRound(t, s, latest); r != "LEDGER_UNAVAILABLE" {
		t.Errorf("latest-only round with the ledger down: got %s, want LEDGER_UNAVAILABLE", r)
	}
	if _, r := openRound(t, s, mustSealRound(t, s, flowReq("", false)).RequestState); r != "OK" {
		t.Errorf("round without latest-only with the ledger down: got %s, want OK", r)
	}
	s.ledger = embeddedLedger(t, t.TempDir())
	if _, r := openRound(t, s, latest); r != "OK" {
		t.Errorf("latest-only round with the ledger back: got %s, want OK", r)
	}
}
