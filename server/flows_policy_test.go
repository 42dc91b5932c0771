package server

import (
	"testing"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// TestFlows_R9_SealReportsTheSealedDeadline: the deadline Seal answers is
// the one the state carries, to the nanosecond, as Open answers it.
func TestFlows_R9_SealReportsTheSealedDeadline(t *testing.T) {
	s := testService(t, embeddedLedger(t, t.TempDir()))
	for range 20 {
		sealed := mustSealRound(t, s, flowReq("", true, "k1"))
		opened, r := openRound(t, s, sealed.RequestState, "k1")
		if r != "OK" {
			t.Fatalf("open: got %s, want OK", r)
		}
		if got, want := sealed.Flow.Deadline.AsTime(), opened.Flow.Deadline.AsTime(); !got.Equal(want) {
			t.Fatalf("Seal says deadline %v, Open says %v", got, want)
		}
	}
}

// TestFlows_R6_LatestOnlyNeedsTheLedger: a tenant with oneTime: forbidden
// uses no ledger, so a latest-only flow is refused (INVALID_ARGUMENT); a flow
// that any round of opens is sealed.
func TestFlows_R6_LatestOnlyNeedsTheLedger(t *testing.T) {
	s := testService(t, failingLedger{})
	s.auth.tenants.Load().Implicit().OneTime = tenant.OneTimeForbidden
	if _, r := sealRound(t, s, flowReq("", true, "k1")); r != "INVALID_ARGUMENT" {
		t.Fatalf("latest-only under oneTime forbidden: got %s, want INVALID_ARGUMENT", r)
	}
	sealed, r := sealRound(t, s, flowReq("", false, "k1"))
	if r != "OK" {
		t.Fatalf("any-round flow under oneTime forbidden: got %s, want OK", r)
	}
	if _, r := openRound(t, s, sealed.RequestState, "k1"); r != "OK" {
		t.Fatalf("open: got %s, want OK (no ledger call)", r)
	}
}

// TestFlows_R9_NullInputResponsesAreNotKnown: an inputResponses that is null
// or not an object answers no keys a round asked: INPUT_MISMATCH.
func TestFlows_R9_NullInputResponsesAreNotKnown(t *testing.T) {
	s := testService(t, embeddedLedger(t, t.TempDir()))
	for _, members := range []string{`,"inputResponses":null`, `,"inputResponses":["k1"]`, `,"inputResponses":"k1"`} {
		sealed := mustSealRound(t, s, flowReq("", false, "k1"))
		_, r := flowCall(t.Context(), s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: sealed.RequestState, Principal: "alice", Request: toolCall(t, prodArgs, members)})
		if r != "INPUT_MISMATCH" {
			t.Errorf("inputResponses %s: got %s, want INPUT_MISMATCH", members, r)
		}
	}
}
