package server

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testredis"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/server/internal/audit"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// Recorded outcomes through the gate with the embedded ledger: a retry of a
// consumed state gets the recorded answer, waits for it while the first
// open's handler runs, and is refused as before in every other case.

// outcomeService is a service over an embedded ledger that keeps outcomes.
func outcomeService(t *testing.T) *service {
	t.Helper()
	l := embeddedLedger(t, t.TempDir())
	s := testService(t, l)
	s.recorder = l
	return s
}

// sealPayment seals a one-time state of a tools/call of deploy for alice.
func sealPayment(t *testing.T, s *service) string {
	t.Helper()
	resp, r := flowCall(context.Background(), s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: toolCall(t, prodArgs, ""), Payload: []byte("pay 5"), OneTime: true})
	if r != "OK" {
		t.Fatalf("seal: %s", r)
	}
	return resp.GetRequestState()
}

// openAs opens state as principal with arguments, recording or not.
func openAs(ctx context.Context, t *testing.T, s *service, state, principal, arguments string, record bool) (*sealerv1.OpenResponse, string) {
	t.Helper()
	return flowCall(ctx, s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: state, Principal: principal, Request: toolCall(t, arguments, ""), RecordOutcome: record})
}

func record(s *service, state string, outcome []byte) string {
	_, r := flowCall(context.Background(), s, "Record", s.Record, &sealerv1.RecordRequest{RequestState: state, Outcome: outcome})
	return r
}

func TestOutcomes_R6_ARetryGetsTheRecordedOutcome(t *testing.T) {
	s := outcomeService(t)
	auditOut := &syncBuffer{}
	s.audit = audit.ToLogger(slog.New(slog.NewJSONHandler(auditOut, nil)))
	state := sealPayment(t, s)
	first, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true)
	if r != "OK" || !first.GetRecording() || string(first.GetPayload()) != "pay 5" || first.GetOutcome() != nil {
		t.Fatalf("first open: %s, recording %v, payload %q, outcome %v", r, first.GetRecording(), first.GetPayload(), first.GetOutcome())
	}
	// Retries racing the handler wait for its outcome.
	const n = 8
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Go(func() {
			resp, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true)
			got[i] = r + " " + string(resp.GetOutcome().GetData()) + " " + string(resp.GetPayload())
		})
	}
	if r := record(s, state, []byte(`{"result":"paid"}`)); r != "OK" {
		t.Fatalf("record: %s", r)
	}
	wg.Wait()
	for i, g := range got {
		if g != `OK {"result":"paid"} ` {
			t.Errorf("retry %d racing the handler: got %q, want the outcome and no payload", i, g)
		}
	}
	if resp, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "OK" || string(resp.GetOutcome().GetData()) != `{"result":"paid"}` {
		t.Errorf("retry after the record: %s %v", r, resp.GetOutcome())
	}
	refusals := []struct {
		name, principal, args string
		record                bool
		want                  string
	}{
		{"another principal", "mallory", prodArgs, true, "PRINCIPAL_MISMATCH"},
		{"other arguments", "alice", `{"env":"dev"}`, true, "REQUEST_MISMATCH"},
		{"a retry that does not record", "alice", prodArgs, false, "ALREADY_CONSUMED"},
	}
	for _, c := range refusals {
		if resp, r := openAs(context.Background(), t, s, state, c.principal, c.args, c.record); r != c.want || resp.GetOutcome() != nil {
			t.Errorf("%s: got %s %v, want %s and nothing disclosed", c.name, r, resp.GetOutcome(), c.want)
		}
	}
	if r := record(s, state, []byte("again")); r != "ALREADY_CONSUMED" {
		t.Errorf("second record: got %s, want ALREADY_CONSUMED", r)
	}
	// The audit log tells the replays (n racing, one after) from the open
	// that gave the payload, and never holds the outcome.
	log := auditOut.String()
	if got := strings.Count(log, `"reason":"REPLAYED"`); got != n+1 {
		t.Errorf("audit: %d events REPLAYED, want %d:\n%s", got, n+1, log)
	}
	if strings.Count(log, `"method":"/sealer.v1.Sealer/Open","tenant":"default","principal_hash":`) == 0 || strings.Contains(log, "paid") {
		t.Errorf("audit: no Open events, or the outcome in them:\n%s", log)
	}
}

func TestOutcomes_R6_ARetryWhileTheHandlerRunsIsInProgress(t *testing.T) {
	s := outcomeService(t)
	state := sealPayment(t, s)
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "OK" {
		t.Fatal(r)
	}
	// The retry waits until a tenth of its deadline is left: 5s leaves the
	// ledger's last read half a second before the deadline ends it, enough
	// on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, r := openAs(ctx, t, s, state, "alice", prodArgs, true); r != "IN_PROGRESS" {
		t.Errorf("retry while no outcome is recorded: got %s, want IN_PROGRESS", r)
	}
}

func TestOutcomes_R1_AWaitingRetryHoldsNoSlot(t *testing.T) {
	s := outcomeService(t)
	// One call at a time, for the server and for the tenant.
	s.inFlight = make(chan struct{}, 1)
	tn := s.auth.tenants.Load().Implicit()
	tn.MaxConcurrent = 1
	tn.Limiter = tenant.NewLimiter(tn)
	state := sealPayment(t, s)
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "OK" {
		t.Fatal(r)
	}
	// One retry after the other: each is admitted only if the one before,
	// parked, gave its slots back.
	retried := make(chan string, tenant.OutcomeWaiters)
	for i := range tenant.OutcomeWaiters {
		go func() {
			resp, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true)
			retried <- r + " " + string(resp.GetOutcome().GetData())
		}()
		for deadline := time.Now().Add(2 * time.Minute); ; {
			calls, parked := tn.Limiter.Held()
			if parked > i && len(s.inFlight) == 0 && calls == 0 {
				break
			}
			select {
			case r := <-retried:
				t.Fatalf("retry %d, %d parked before it: %s", i+1, i, r)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("retry %d not parked after 2m", i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Every waiter parked: the slots are free for other work.
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "IN_PROGRESS" {
		t.Errorf("a retry past the tenant's waiters: got %s, want IN_PROGRESS at once", r)
	}
	sealPayment(t, s)
	if r := record(s, state, []byte("paid")); r != "OK" {
		t.Fatalf("record while %d retries wait: %s", tenant.OutcomeWaiters, r)
	}
	for range tenant.OutcomeWaiters {
		if got := <-retried; got != "OK paid" {
			t.Errorf("waiting retry: got %q, want OK paid", got)
		}
	}
	if calls, parked := tn.Limiter.Held(); len(s.inFlight) != 0 || calls != 0 || parked != 0 {
		t.Errorf("slots held after every call ended: server %d, tenant %d, parked %d", len(s.inFlight), calls, parked)
	}
}

func TestOutcomes_R6_NoOutcomeInTheWaitIsAlreadyConsumed(t *testing.T) {
	s := outcomeService(t)
	s.cfg.OutcomeWait = 200 * time.Millisecond
	state := sealPayment(t, s)
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "OK" {
		t.Fatal(r)
	}
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "ALREADY_CONSUMED" {
		t.Errorf("retry after the wait with nothing recorded: got %s, want ALREADY_CONSUMED", r)
	}
	if r := record(s, state, []byte("late")); r != "OK" {
		t.Errorf("record after the wait: got %s, want OK (kept for later retries)", r)
	}
	if resp, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "OK" || string(resp.GetOutcome().GetData()) != "late" {
		t.Errorf("retry after a late record: got %s %v", r, resp.GetOutcome())
	}
}

func TestOutcomes_R6_OverTheLimitIsRefusedAndRecordsNone(t *testing.T) {
	s := outcomeService(t)
	s.cfg.OutcomeLimit = 1024
	state := sealPayment(t, s)
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "OK" {
		t.Fatal(r)
	}
	if r := record(s, state, []byte(strings.Repeat("x", 1025))); r != "INVALID_ARGUMENT" {
		t.Errorf("record over the limit: got %s, want INVALID_ARGUMENT", r)
	}
	start := time.Now()
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "ALREADY_CONSUMED" {
		t.Errorf("retry after an outcome over the limit: got %s, want ALREADY_CONSUMED", r)
	}
	if d := time.Since(start); d > s.cfg.OutcomeWait/2 {
		t.Errorf("retry after an outcome over the limit took %v: it waited for an outcome that cannot come", d)
	}
}

func TestOutcomes_R9_ALatestOnlyRoundGetsItsOutcome(t *testing.T) {
	s := outcomeService(t)
	r1 := mustSealRound(t, s, flowReq("", true))
	open := func(state string) (*sealerv1.OpenResponse, string) {
		return flowCall(context.Background(), s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: state, Principal: "alice", Request: toolCall(t, prodArgs, ""), RecordOutcome: true})
	}
	if resp, r := open(r1.GetRequestState()); r != "OK" || !resp.GetRecording() {
		t.Fatalf("round 1: %s recording %v", r, resp.GetRecording())
	}
	r2 := mustSealRound(t, s, flowReq(r1.GetRequestState(), true))
	if r := record(s, r1.GetRequestState(), []byte(`{"state":"`+r2.GetRequestState()+`"}`)); r != "OK" {
		t.Fatalf("record round 1: %s", r)
	}
	if resp, r := open(r1.GetRequestState()); r != "OK" || !strings.Contains(string(resp.GetOutcome().GetData()), r2.GetRequestState()) {
		t.Errorf("retry of round 1: got %s %v, want round 1's outcome", r, resp.GetOutcome())
	}
	// A second state of round 2 (a fork) is not answered with the outcome
	// of the one that opened.
	fork := mustSealRound(t, s, flowReq(r1.GetRequestState(), true))
	if _, r := open(r2.GetRequestState()); r != "OK" {
		t.Fatalf("round 2: %s", r)
	}
	if r := record(s, r2.GetRequestState(), []byte("round 2 done")); r != "OK" {
		t.Fatalf("record round 2: %s", r)
	}
	if resp, r := open(fork.GetRequestState()); r != "ALREADY_CONSUMED" || resp.GetOutcome() != nil {
		t.Errorf("the fork of round 2: got %s %v, want ALREADY_CONSUMED", r, resp.GetOutcome())
	}
	if resp, r := open(r1.GetRequestState()); r != "ALREADY_CONSUMED" {
		t.Errorf("round 1 after round 2 opened: got %s %v, want ALREADY_CONSUMED", r, resp.GetOutcome())
	}
}

func TestOutcomes_OffKeepsNone(t *testing.T) {
	s := outcomeService(t)
	s.cfg.OutcomeLimit = 0
	state := sealPayment(t, s)
	if resp, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "OK" || resp.GetRecording() {
		t.Fatalf("open: %s recording %v, want OK and not recording", r, resp.GetRecording())
	}
	if r := record(s, state, []byte("x")); r != "INVALID_ARGUMENT" {
		t.Errorf("record with outcome-limit 0: got %s, want INVALID_ARGUMENT", r)
	}
	if _, r := openAs(context.Background(), t, s, state, "alice", prodArgs, true); r != "ALREADY_CONSUMED" {
		t.Errorf("retry: got %s, want ALREADY_CONSUMED", r)
	}
}

func TestOutcomes_RecordNeedsAConsumingState(t *testing.T) {
	s := outcomeService(t)
	resp, r := flowCall(context.Background(), s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: toolCall(t, prodArgs, "")})
	if r != "OK" {
		t.Fatal(r)
	}
	if r := record(s, resp.GetRequestState(), []byte("x")); r != "INVALID_ARGUMENT" {
		t.Errorf("record of a reusable state: got %s, want INVALID_ARGUMENT", r)
	}
	if r := record(s, "AQAAAAE"+strings.Repeat("A", 150), []byte("x")); r != "INVALID_STATE" {
		t.Errorf("record of a forged state: got %s, want INVALID_STATE", r)
	}
	if r := record(s, sealPayment(t, s), []byte("x")); r != "INVALID_ARGUMENT" {
		t.Errorf("record of a state never opened: got %s, want INVALID_ARGUMENT (no entry)", r)
	}
}

// recordingServices are services over each ledger that keeps outcomes:
// the embedded one, and a real Redis (skipped, or failed under CI, where
// redis-server is missing).
var recordingServices = []struct {
	name string
	new  func(t *testing.T) *service
}{
	{"embedded", outcomeService},
	{"redis", func(t *testing.T) *service {
		srv := testredis.Start(t, false)
		l, err := redis.New(redis.Options{URL: srv.URL(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		s := testService(t, l)
		s.recorder = l
		return s
	}},
}

// TestOutcomes_R9_AForkNeverRecordsForTheRoundItsTwinOpened (issue 50):
// F1 and F2 are two states of round 2 of one latest-only flow, which
// opens one of them. F1 opens, recording; F2's Record, whose open never
// claimed the round, is refused, and leaves the claim to F1: F1's Record
// is kept and its retry gets it, and F2's open never gets F1's outcome
// nor its own. The control, F1 of another flow alone, records and
// replays.
func TestOutcomes_R9_AForkNeverRecordsForTheRoundItsTwinOpened(t *testing.T) {
	for _, b := range recordingServices {
		t.Run(b.name, func(t *testing.T) {
			s := b.new(t)
			open := func(state string) (*sealerv1.OpenResponse, string) {
				return flowCall(context.Background(), s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: state, Principal: "alice", Request: toolCall(t, prodArgs, ""), RecordOutcome: true})
			}
			// round2 seals two states of round 2 of a new flow, whose
			// round 1 opened.
			round2 := func() (f1, f2 string) {
				r1 := mustSealRound(t, s, flowReq("", true)).GetRequestState()
				if _, r := open(r1); r != "OK" {
					t.Fatalf("round 1: got %s, want OK", r)
				}
				return mustSealRound(t, s, flowReq(r1, true)).GetRequestState(), mustSealRound(t, s, flowReq(r1, true)).GetRequestState()
			}

			t.Run("control: F1 alone records and replays", func(t *testing.T) {
				f1, _ := round2()
				if resp, r := open(f1); r != "OK" || !resp.GetRecording() {
					t.Fatalf("F1's open: got %s, recording %v; want OK, recording", r, resp.GetRecording())
				}
				if r := record(s, f1, []byte("REAL")); r != "OK" {
					t.Fatalf("F1's record: got %s, want OK", r)
				}
				if resp, r := open(f1); r != "OK" || string(resp.GetOutcome().GetData()) != "REAL" {
					t.Fatalf("F1's retry: got %s %q, want OK REAL", r, resp.GetOutcome().GetData())
				}
			})

			t.Run("the fork F2 records for nothing", func(t *testing.T) {
				f1, f2 := round2()
				if resp, r := open(f1); r != "OK" || !resp.GetRecording() {
					t.Fatalf("F1's open: got %s, recording %v; want OK, recording", r, resp.GetRecording())
				}
				if r := record(s, f2, []byte("FORK")); r != "ALREADY_CONSUMED" {
					t.Errorf("F2's record, its open never claimed the round: got %s, want ALREADY_CONSUMED", r)
				}
				if r := record(s, f1, []byte("REAL")); r != "OK" {
					t.Errorf("F1's record after F2's: got %s, want OK", r)
				}
				if resp, r := open(f1); r != "OK" || string(resp.GetOutcome().GetData()) != "REAL" {
					t.Errorf("F1's retry: got %s %q, want OK REAL", r, resp.GetOutcome().GetData())
				}
				if resp, r := open(f2); r != "ALREADY_CONSUMED" || resp.GetOutcome() != nil {
					t.Errorf("F2's open: got %s %q, want ALREADY_CONSUMED and no outcome", r, resp.GetOutcome().GetData())
				}
			})
		})
	}
}

// TestOutcomes_R9_ARetryWithOtherAnswersNeverGetsTheOutcome (issue 50, 5b):
// a booking's round asks for a seat; its retry answering seat 12A opens the
// state, recording, and its handler books 12A. A retry of that state
// answering seat 1A passes every check of the state (the same principal,
// request and input keys), but its answers are not those the handler ran
// with: OUTCOME_CONFLICT, never "booked 12A", at once while the handler
// still runs, and so is a retry that sends no answers. The control, a
// retry with seat 12A, gets the outcome. A one-time state and a
// latest-only round, on the embedded ledger and a real Redis.
func TestOutcomes_R9_ARetryWithOtherAnswersNeverGetsTheOutcome(t *testing.T) {
	seat := func(s string) string {
		return `{"seat":{"action":"accept","content":{"seat":"` + s + `"}}}`
	}
	digest := func(t *testing.T, inputResponses string) []byte {
		d, err := mcpdigest.Answers([]byte(inputResponses))
		if err != nil {
			t.Fatal(err)
		}
		return d[:]
	}
	for _, b := range recordingServices {
		t.Run(b.name, func(t *testing.T) {
			s := b.new(t)
			open := func(ctx context.Context, state, inputResponses string, answers []byte) (*sealerv1.OpenResponse, string) {
				return flowCall(ctx, s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: state, Principal: "alice",
					Request: toolCall(t, prodArgs, `,"inputResponses":`+inputResponses), RecordOutcome: true, Answers: answers})
			}
			for _, kind := range []struct {
				name string
				seal func() string
			}{
				{"one-time", func() string {
					resp, r := flowCall(context.Background(), s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: toolCall(t, prodArgs, ""), OneTime: true})
					if r != "OK" {
						t.Fatalf("seal: %s", r)
					}
					return resp.GetRequestState()
				}},
				{"latest-only round", func() string { return mustSealRound(t, s, flowReq("", true, "seat")).GetRequestState() }},
			} {
				t.Run(kind.name, func(t *testing.T) {
					state := kind.seal()
					if resp, r := open(context.Background(), state, seat("12A"), digest(t, seat("12A"))); r != "OK" || !resp.GetRecording() {
						t.Fatalf("the open with seat 12A: got %s, recording %v; want OK, recording", r, resp.GetRecording())
					}
					// While the handler runs: a conflict, not a wait for the
					// outcome (which would end IN_PROGRESS at this deadline).
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if resp, r := open(ctx, state, seat("1A"), digest(t, seat("1A"))); r != "OUTCOME_CONFLICT" || resp.GetOutcome() != nil {
						t.Errorf("a retry with seat 1A while the handler runs: got %s %q, want OUTCOME_CONFLICT", r, resp.GetOutcome().GetData())
					}
					if r := record(s, state, []byte("booked 12A")); r != "OK" {
						t.Fatalf("record: got %s, want OK", r)
					}
					for name, answers := range map[string][]byte{"seat 1A": digest(t, seat("1A")), "no answers": nil} {
						if resp, r := open(context.Background(), state, seat("1A"), answers); r != "OUTCOME_CONFLICT" || resp.GetOutcome() != nil {
							t.Errorf("a retry with %s: got %s %q, want OUTCOME_CONFLICT and no outcome", name, r, resp.GetOutcome().GetData())
						}
					}
					if resp, r := open(context.Background(), state, seat("12A"), digest(t, seat("12A"))); r != "OK" || string(resp.GetOutcome().GetData()) != "booked 12A" {
						t.Errorf("control, a retry with seat 12A: got %s %q, want OK, booked 12A", r, resp.GetOutcome().GetData())
					}
				})
			}
			t.Run("answers of another length", func(t *testing.T) {
				state := mustSealRound(t, s, flowReq("", true, "seat")).GetRequestState()
				if _, r := open(context.Background(), state, seat("12A"), make([]byte, 31)); r != "INVALID_ARGUMENT" {
					t.Errorf("answers of 31 bytes: got %s, want INVALID_ARGUMENT", r)
				}
			})
		})
	}
}
