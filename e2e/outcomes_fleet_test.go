package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// Recorded outcomes across the fleet (README, "Recorded outcomes"): the
// outcome lives in the ledger beside its state's entry, so a retry gets it
// from any replica that shares the ledger, and from a sealer restarted on
// the same embedded ledger.

// outcomesACL is docs/OPERATIONS.md's least-privilege ACL user for the
// Redis ledger, password s3cret-pw: one-time opens, latest-only flows, and
// the outcomes kept in their entries (GET on both kinds of keys).
var outcomesACL = []string{"--user", "sealer", "on", ">s3cret-pw", "~sealer:v1:consumed:*", "~sealer:v1:flow:*",
	"+eval", "+evalsha", "+set", "+get", "+pttl", "+time", "+ping"}

// outcomesCounted sums the samples of p's sealer_outcomes_total whose
// result is result.
func outcomesCounted(t *testing.T, p *proc, result string) float64 {
	t.Helper()
	var n float64
	for _, line := range strings.Split(httpGet(t, "http://"+p.HTTP+"/metrics"), "\n") {
		if strings.HasPrefix(line, "sealer_outcomes_total{") && strings.Contains(line, `result="`+result+`"`) {
			f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			n += f
		}
	}
	return n
}

// TestOutcomes_Fleet_RedisReplicas: two sealers share one Redis (the
// documented ACL user), each behind a proxy in front of the same naive
// server with one audience. The payment's round 2 runs through replica A
// and its answer is lost; the retry through replica B gets the answer A
// recorded, and 16 parallel retries over both get it too, while the server
// paid once. Over gRPC: a retry on B while A's handler runs waits, then
// is IN_PROGRESS; once A records, B answers the outcome, to the same
// principal only.
func TestOutcomes_Fleet_RedisReplicas(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	srv := testredis.Start(t, false, outcomesACL...)
	ps := fleet(t, 2, "redis://sealer:s3cret-pw@"+srv.Addr+"/0")

	t.Run("through the proxy", func(t *testing.T) {
		up := startNaive(t)
		a := startProxy(t, ps[0], up.url, "--principal", "bearer", "--audience", "payments")
		b := startProxy(t, ps[1], up.url, "--principal", "bearer", "--audience", "payments")
		c := cutAnswers(t, hostPort(a), loseLostID)
		round2 := toolCallParams(lostPayment.tool, lostPayment.args, firstPaymentRound(t, c.endpoint()), lostPayment.answers)
		loseAnswer(t, c, up, lostPayment.tool, round2)
		ran := up.calls(t)
		first, err := postToolCall(b, "alice-token", 2, lostPayment.tool, round2)
		if err != nil || first.status != http.StatusOK || first.Error != nil || first.text() != "Paid 42.00" {
			t.Fatalf("the retry on replica B: got %v, %v; want Paid 42.00", first, err)
		}
		sameAnswers(t, []string{a, b}, 16, 100, lostPayment.tool, round2, first)
		if got := up.calls(t); got != ran {
			t.Fatalf("the upstream ran %d more calls for 17 retries, want none", got-ran)
		}
		if n := outcomesCounted(t, ps[0], "recorded"); n != 1 {
			t.Errorf("replica A recorded %v outcomes, want 1", n)
		}
		t.Logf("round 2 on replica A, its answer lost; replica B answered the retry, and 16 more over both: %d upstream calls, unchanged", ran)
	})

	t.Run("over gRPC", func(t *testing.T) {
		ga, gb := sealerv1.NewSealerClient(dialGRPC(t, ps[0].GRPC)), sealerv1.NewSealerClient(dialGRPC(t, ps[1].GRPC))
		state := mustSeal(t, newGRPC(t, ps[0]), sealBody("alice", weatherParams, "pay 42", `,"oneTime":true`))
		open := func(g sealerv1.SealerClient, principal string, wait time.Duration) (*sealerv1.OpenResponse, string) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			req := &sealerv1.OpenRequest{}
			mustUnmarshal(t, openBody(state, principal, weatherParams), req)
			req.RecordOutcome = true
			resp, err := g.Open(ctx, req)
			if err != nil {
				return nil, reasonOf(t, status.Convert(err))
			}
			return resp, "OK"
		}
		if resp, r := open(ga, "alice", 10*time.Second); r != "OK" || !resp.GetRecording() || string(resp.GetPayload()) != "pay 42" {
			t.Fatalf("the first open on A: %s, recording %v; want OK, recording, the payload", r, resp.GetRecording())
		}
		if _, r := open(gb, "alice", time.Second); r != "IN_PROGRESS" {
			t.Fatalf("a retry on B while A's handler runs: got %s, want IN_PROGRESS", r)
		}
		const outcome = `{"result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := ga.Record(ctx, &sealerv1.RecordRequest{RequestState: state, Outcome: []byte(outcome)}); err != nil {
			t.Fatalf("Record on A: %v", err)
		}
		resp, r := open(gb, "alice", 10*time.Second)
		if r != "OK" || string(resp.GetOutcome().GetData()) != outcome || len(resp.GetPayload()) != 0 || resp.GetRecording() {
			t.Fatalf("the retry on B after A recorded: %s, outcome %q, payload %q, recording %v; want the outcome alone",
				r, resp.GetOutcome().GetData(), resp.GetPayload(), resp.GetRecording())
		}
		if resp, r := open(gb, "mallory", 10*time.Second); r != "PRINCIPAL_MISMATCH" || resp.GetOutcome() != nil {
			t.Fatalf("mallory's retry on B: %s, outcome %q; want PRINCIPAL_MISMATCH and nothing", r, resp.GetOutcome().GetData())
		}
	})
}

// TestOutcomes_Fleet_EmbeddedRestart: the payment's round 2 runs through a
// sealer on the embedded ledger and its answer is lost; the sealer stops
// (SIGTERM) and starts again on the same data directory, and the retry,
// through a proxy in front of the restarted sealer, gets the answer
// recorded before the restart, while the server paid once.
func TestOutcomes_Fleet_EmbeddedRestart(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	s := start(t, dir, "--ledger", "embedded")
	up := startNaive(t)
	c := cutAnswers(t, hostPort(startProxy(t, s, up.url, "--principal", "bearer", "--audience", "payments")), loseLostID)
	round2 := toolCallParams(lostPayment.tool, lostPayment.args, firstPaymentRound(t, c.endpoint()), lostPayment.answers)
	loseAnswer(t, c, up, lostPayment.tool, round2)
	ran := up.calls(t)
	// The proxy records once the answer is out: wait for it before the stop.
	waitFor(t, "the sealer to record the outcome", 10*time.Second, func() bool { return outcomesCounted(t, s, "recorded") == 1 })
	if err := s.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want 0", err)
	}

	s2 := start(t, dir, "--ledger", "embedded")
	url := startProxy(t, s2, up.url, "--principal", "bearer", "--audience", "payments")
	r, err := postToolCall(url, "alice-token", 2, lostPayment.tool, round2)
	if err != nil || r.status != http.StatusOK || r.Error != nil || r.text() != "Paid 42.00" || up.calls(t) != ran {
		t.Fatalf("the retry after the restart: got %v, %v, %d more upstream calls; want Paid 42.00, none", r, err, up.calls(t)-ran)
	}
	if n := outcomesCounted(t, s2, "replayed"); n != 1 {
		t.Errorf("the restarted sealer replayed %v outcomes, want 1", n)
	}
}
