package ledgertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// outcomeCases run once for each kind of entry, a state's or a flow's
// round: name is a format for the kind's name, and test gets a fresh
// recorder and an entry of the kind it has not seen.
var outcomeCases = []struct {
	name string
	test func(t *testing.T, r ledger.Recorder, e ledger.Entry)
}{
	{"R6 %s: a claim wins once, pending until recorded, then its outcome", aClaimWinsOncePendingUntilRecorded},
	{"%s: an empty record says none will come", anEmptyRecordSaysNoneWillCome},
	{"%s: consumed without a claim, no outcome comes", consumedWithoutAClaimNoOutcomeComes},
	{"%s: no entry is gone", noEntryIsGone},
	{"%s: a pending claim is consumed once its wait is over, and still recorded", aPendingClaimIsConsumedOnceItsWaitIsOver},
	{"%s: outcomes are per tenant", outcomesArePerTenant},
	{"R6 %s: concurrent claims of one entry: exactly one wins", concurrentClaimsOfOneEntryOneWins},
	{"%s: a 64 KiB outcome comes back whole", aLargeOutcomeComesBackWhole},
	{"%s: a retry with other answers conflicts, never gets the outcome", aRetryWithOtherAnswersConflicts},
	{"%s: a claim without answers conflicts with a retry with answers", aClaimWithoutAnswersConflictsWithAnswers},
}

// runOutcomes is the part of the suite for a ledger.Recorder: recorded
// outcomes of one-time states and of flows' rounds (FORMAT.md, "Recorded
// outcomes"). It runs only for a subject whose Ledger is one.
func runOutcomes(t *testing.T, newSubject func(t *testing.T) Subject) {
	if _, ok := newSubject(t).Ledger.(ledger.Recorder); !ok {
		return
	}
	recorder := func(t *testing.T) ledger.Recorder { return newSubject(t).Ledger.(ledger.Recorder) }
	for _, e := range oneOfEachKind() {
		for _, c := range outcomeCases {
			t.Run(fmt.Sprintf(c.name, e.kind), func(t *testing.T) { c.test(t, recorder(t), e.Entry) })
		}
	}
	t.Run("R7 an outcome lives as long as its entry", func(t *testing.T) {
		anOutcomeLivesAsLongAsItsEntry(t, newSubject(t))
	})
	t.Run("R9 flows: an outcome is its round's, dropped when the flow moves on", func(t *testing.T) {
		anOutcomeIsItsRounds(t, recorder(t))
	})
	t.Run("R9 flows: a claim and a state's entry are apart", func(t *testing.T) {
		aFlowsClaimAndAStatesEntryAreApart(t, recorder(t))
	})
	t.Run("R9 flows: a round's outcome is its claimant's, never a fork's", func(t *testing.T) {
		aRoundsOutcomeIsItsClaimants(t, recorder(t))
	})
}

func aClaimWinsOncePendingUntilRecorded(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	ctx := context.Background()
	wantErr(t, "claim", claim(r, "t", e), nil)
	wantErr(t, "claim again", claim(r, "t", e), ledger.ErrConsumed)
	wantErr(t, "consume of the claimed entry", consumeWithoutClaim(ctx, r, e), ledger.ErrConsumed)
	wantNoOutcome(t, r, "t", e, "outcome before the record", ledger.ErrPending)
	wantErr(t, "record", r.Record(ctx, "t", e, []byte("answer")), nil)
	wantOutcome(t, r, "t", e, "answer")
	wantErr(t, "second record", r.Record(ctx, "t", e, []byte("another")), ledger.ErrConsumed)
	wantErr(t, "empty record after one", r.Record(ctx, "t", e, nil), ledger.ErrConsumed)
	wantOutcome(t, r, "t", e, "answer")
}

func anEmptyRecordSaysNoneWillCome(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	ctx := context.Background()
	if err := claim(r, "t", e); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "empty record", r.Record(ctx, "t", e, nil), nil)
	wantNoOutcome(t, r, "t", e, "outcome", ledger.ErrConsumed)
	wantErr(t, "record after the empty one", r.Record(ctx, "t", e, []byte("late")), ledger.ErrConsumed)
}

func consumedWithoutAClaimNoOutcomeComes(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	ctx := context.Background()
	if err := consumeWithoutClaim(ctx, r, e); err != nil {
		t.Fatal(err)
	}
	wantNoOutcome(t, r, "t", e, "outcome", ledger.ErrConsumed)
	wantErr(t, "record", r.Record(ctx, "t", e, []byte("answer")), ledger.ErrConsumed)
	wantErr(t, "claim", claim(r, "t", e), ledger.ErrConsumed)
}

func noEntryIsGone(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	wantNoOutcome(t, r, "t", e, "outcome", ledger.ErrGone)
	wantErr(t, "record", r.Record(context.Background(), "t", e, []byte("answer")), ledger.ErrGone)
	if err := claim(r, "t", e); err != nil {
		t.Fatalf("claim after them: got %v, want nil (they recorded nothing)", err)
	}
}

func aPendingClaimIsConsumedOnceItsWaitIsOver(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	ctx := context.Background()
	if err := r.Claim(ctx, "t", e, inAMinute(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := r.Outcome(ctx, "t", e)
		if errors.Is(err, ledger.ErrConsumed) {
			break
		}
		if !errors.Is(err, ledger.ErrPending) {
			t.Fatalf("outcome while waiting: got %v, want ErrPending, then ErrConsumed", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a claim with a wait of 300 ms was still pending after 30 s")
		}
	}
	wantErr(t, "record after the wait", r.Record(ctx, "t", e, []byte("slow answer")), nil)
	wantOutcome(t, r, "t", e, "slow answer")
}

func outcomesArePerTenant(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	ctx := context.Background()
	claimAndRecord(t, r, "a", e, inAMinute(), []byte("for a"))
	for _, tenant := range []string{"b", "ab"} {
		if got, err := r.Outcome(ctx, tenant, e); !errors.Is(err, ledger.ErrGone) {
			t.Fatalf("tenant %q: got %q, %v, want ErrGone", tenant, got, err)
		}
		wantErr(t, fmt.Sprintf("tenant %q: record", tenant), r.Record(ctx, tenant, e, []byte("forged")), ledger.ErrGone)
	}
	wantErr(t, "tenant b's own claim", claim(r, "b", e), nil)
	if got, err := r.Outcome(ctx, "b", e); !errors.Is(err, ledger.ErrPending) {
		t.Fatalf("tenant b: got %q, %v, want ErrPending", got, err)
	}
	wantOutcome(t, r, "a", e, "for a")
}

func concurrentClaimsOfOneEntryOneWins(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	const n = 32
	for range 5 {
		e := freshLike(e)
		wins, refused := race(t, n, func(int) error { return claim(r, "t", e) })
		if wins != 1 || refused != n-1 {
			t.Fatalf("got %d wins and %d refusals, want 1 and %d", wins, refused, n-1)
		}
	}
}

func aLargeOutcomeComesBackWhole(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i * 7) // every byte value, NUL and digits among them
	}
	claimAndRecord(t, r, "t", e, inAMinute(), big)
	got, err := r.Outcome(context.Background(), "t", e)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("got %d bytes, %v; want the 64 KiB recorded", len(got), err)
	}
}

func anOutcomeLivesAsLongAsItsEntry(t *testing.T, s Subject) {
	r := s.Ledger.(ledger.Recorder)
	short := time.Now().Add(2 * time.Second)
	es := oneOfEachKind()
	for _, e := range es {
		claimAndRecord(t, r, "t", e.Entry, short, []byte("answer"))
		wantOutcome(t, r, "t", e.Entry, "answer")
	}
	s.Expire(t, short)
	for _, e := range es {
		if got, err := r.Outcome(context.Background(), "t", e.Entry); !errors.Is(err, ledger.ErrGone) {
			t.Fatalf("%s after its until: got %q, %v, want ErrGone", e.kind, got, err)
		}
		wantErr(t, e.kind+": record after its until", r.Record(context.Background(), "t", e.Entry, []byte("late")), ledger.ErrGone)
	}
}

func anOutcomeIsItsRounds(t *testing.T, r ledger.Recorder) {
	ctx := context.Background()
	f := newFlow()
	at := func(round uint32) ledger.Entry { return ledger.Entry{Flow: f, Round: round} }
	if err := r.Advance(ctx, "t", f, 1, inAMinute()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "claim of the round opened", claim(r, "t", at(1)), ledger.ErrConsumed)
	wantErr(t, "claim of round 2", claim(r, "t", at(2)), nil)
	if err := r.Record(ctx, "t", at(2), []byte("round 2")); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, r, "t", at(2), "round 2")
	wantNoOutcome(t, r, "t", at(1), "round 1 after round 2", ledger.ErrConsumed)
	wantErr(t, "record of round 1 after round 2", r.Record(ctx, "t", at(1), []byte("round 1")), ledger.ErrConsumed)
	if err := r.Advance(ctx, "t", f, 3, inAMinute()); err != nil {
		t.Fatal(err)
	}
	wantNoOutcome(t, r, "t", at(2), "round 2 after round 3", ledger.ErrConsumed)
	wantErr(t, "record of round 2 after round 3", r.Record(ctx, "t", at(2), []byte("round 2")), ledger.ErrConsumed)
	wantNoOutcome(t, r, "t", at(3), "round 3, advanced without a claim", ledger.ErrConsumed)
	wantNoOutcome(t, r, "t", at(4), "round 4, above the flow's", ledger.ErrGone)
	wantErr(t, "claim of round 4", claim(r, "t", at(4)), nil)
	wantNoOutcome(t, r, "t", at(4), "round 4 claimed", ledger.ErrPending)
	wantErr(t, "advance to the claimed round", r.Advance(ctx, "t", f, 4, inAMinute()), ledger.ErrConsumed)
}

func aFlowsClaimAndAStatesEntryAreApart(t *testing.T, r ledger.Recorder) {
	f := newFlow()
	flow, state := ledger.Entry{Flow: f, Round: 1}, ledger.Entry{ID: sealer.StateID(f)}
	for _, e := range []ledger.Entry{flow, state} {
		wantErr(t, fmt.Sprintf("claim %+v", e), claim(r, "t", e), nil)
	}
	if err := r.Record(context.Background(), "t", flow, []byte("flow")); err != nil {
		t.Fatal(err)
	}
	wantNoOutcome(t, r, "t", state, "the state whose id is the flow's", ledger.ErrPending)
	wantOutcome(t, r, "t", flow, "flow")
}

// aRoundsOutcomeIsItsClaimants (issue 50): f1 and f2 are two states of
// round 2 of one flow, which opens one of them (a fork). f1 claims the
// round; f2 records nothing for it, empty or not, and leaves f1's claim as
// it is, which f1 then records; f2 never reads f1's outcome, and never
// waits for it.
func aRoundsOutcomeIsItsClaimants(t *testing.T, r ledger.Recorder) {
	ctx := context.Background()
	f := newFlow()
	f1, f2 := ledger.Entry{ID: newID(), Flow: f, Round: 2}, ledger.Entry{ID: newID(), Flow: f, Round: 2}
	wantErr(t, "f1's claim", claim(r, "t", f1), nil)
	wantErr(t, "f2's claim", claim(r, "t", f2), ledger.ErrConsumed)
	wantNoOutcome(t, r, "t", f2, "f2's outcome while f1's is pending", ledger.ErrConsumed)
	wantErr(t, "f2's record", r.Record(ctx, "t", f2, []byte("fork")), ledger.ErrConsumed)
	wantErr(t, "f2's empty record", r.Record(ctx, "t", f2, nil), ledger.ErrConsumed)
	wantNoOutcome(t, r, "t", f1, "f1's outcome after f2's records", ledger.ErrPending)
	wantErr(t, "f1's record", r.Record(ctx, "t", f1, []byte("real")), nil)
	wantOutcome(t, r, "t", f1, "real")
	wantNoOutcome(t, r, "t", f2, "f2's outcome after f1's record", ledger.ErrConsumed)
	wantErr(t, "f2's record after f1's", r.Record(ctx, "t", f2, []byte("fork")), ledger.ErrConsumed)
	wantOutcome(t, r, "t", f1, "real")
}

// aRetryWithOtherAnswersConflicts (issue 50, 5b): e is claimed by an open
// whose inputResponses were seat 12A. A retry with seat 1A, or with no
// answers, gets ErrConflict whatever became of the claim (pending,
// recorded), at once, and never the outcome; a retry with seat 12A waits
// for it and then gets it. Record keeps the claim's answers.
func aRetryWithOtherAnswersConflicts(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	ctx := context.Background()
	ran, other := answers("12A"), answers("1A")
	with := func(a *sealer.Digest) ledger.Entry { e := e; e.Answers = a; return e }
	wantErr(t, "claim with seat 12A", claim(r, "t", with(ran)), nil)
	wantNoOutcome(t, r, "t", with(other), "a retry with seat 1A while pending", ledger.ErrConflict)
	wantNoOutcome(t, r, "t", with(nil), "a retry without answers while pending", ledger.ErrConflict)
	wantNoOutcome(t, r, "t", with(ran), "a retry with seat 12A while pending", ledger.ErrPending)
	wantErr(t, "record, asked without answers", r.Record(ctx, "t", with(nil), []byte("booked 12A")), nil)
	wantNoOutcome(t, r, "t", with(other), "a retry with seat 1A", ledger.ErrConflict)
	wantNoOutcome(t, r, "t", with(nil), "a retry without answers", ledger.ErrConflict)
	wantOutcome(t, r, "t", with(ran), "booked 12A")
	wantErr(t, "record again", r.Record(ctx, "t", with(ran), []byte("another")), ledger.ErrConsumed)
	wantOutcome(t, r, "t", with(ran), "booked 12A")

	// Recorded as none: the same answers are refused as consumed, others
	// as a conflict.
	none := freshLike(e)
	none.Answers = ran
	wantErr(t, "claim of another entry with seat 12A", claim(r, "t", none), nil)
	wantErr(t, "empty record", r.Record(ctx, "t", none, nil), nil)
	none.Answers = other
	wantNoOutcome(t, r, "t", none, "a retry with seat 1A after an empty record", ledger.ErrConflict)
	none.Answers = ran
	if _, err := r.Outcome(ctx, "t", none); !errors.Is(err, ledger.ErrConsumed) || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("a retry with seat 12A after an empty record: got %v, want ErrConsumed, no conflict", err)
	}
}

// aClaimWithoutAnswersConflictsWithAnswers: a claim kept without answers
// (a caller that sent none, or a release before answers) gives its outcome
// to a retry without answers, as before, and a conflict to one with
// answers (fail closed: they cannot be shown to be the claim's). A state
// consumed without a claim has no outcome for either.
func aClaimWithoutAnswersConflictsWithAnswers(t *testing.T, r ledger.Recorder, e ledger.Entry) {
	e.Answers = nil
	claimAndRecord(t, r, "t", e, inAMinute(), []byte("answer"))
	wantOutcome(t, r, "t", e, "answer")
	e.Answers = answers("12A")
	wantNoOutcome(t, r, "t", e, "a retry with answers", ledger.ErrConflict)

	consumed := freshLike(e)
	if err := consumeWithoutClaim(context.Background(), r, consumed); err != nil {
		t.Fatal(err)
	}
	consumed.Answers = answers("12A")
	if _, err := r.Outcome(context.Background(), "t", consumed); !errors.Is(err, ledger.ErrConsumed) || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("consumed without a claim, a retry with answers: got %v, want ErrConsumed, no conflict", err)
	}
}

// answers returns an answers digest that stands for a retry whose seat is
// seat.
func answers(seat string) *sealer.Digest {
	d := sealer.Digest(sha256.Sum256([]byte("seat " + seat)))
	return &d
}

func inAMinute() time.Time { return time.Now().Add(time.Minute) }

// claim claims e for tenant with a wait no test outlasts: a claim these
// tests leave pending stays pending.
func claim(r ledger.Recorder, tenant string, e ledger.Entry) error {
	return r.Claim(context.Background(), tenant, e, inAMinute(), time.Minute)
}

// claimAndRecord claims e for tenant, to live until until, and records
// outcome, failing t unless both succeed.
func claimAndRecord(t *testing.T, r ledger.Recorder, tenant string, e ledger.Entry, until time.Time, outcome []byte) {
	t.Helper()
	if err := r.Claim(context.Background(), tenant, e, until, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(context.Background(), tenant, e, outcome); err != nil {
		t.Fatal(err)
	}
}

// kindOfEntry is an entry and the name of its kind, for the subtests' names.
type kindOfEntry struct {
	kind string
	ledger.Entry
}

// oneOfEachKind returns an entry no ledger has seen of each kind a
// recorder keeps outcomes for: a state's, and a flow's round.
func oneOfEachKind() []kindOfEntry {
	return []kindOfEntry{{"state", ledger.Entry{ID: newID()}}, {"flow", ledger.Entry{ID: newID(), Flow: newFlow(), Round: 2}}}
}

// freshLike returns an entry no ledger has seen, of e's kind: a state's,
// or the same round of another flow.
func freshLike(e ledger.Entry) ledger.Entry {
	if e.Round == 0 {
		return ledger.Entry{ID: newID()}
	}
	return ledger.Entry{ID: newID(), Flow: newFlow(), Round: e.Round}
}

// consumeWithoutClaim consumes e without a claim: Consume or Advance.
func consumeWithoutClaim(ctx context.Context, r ledger.Recorder, e ledger.Entry) error {
	until := time.Now().Add(time.Minute)
	if e.Round == 0 {
		return r.Consume(ctx, "t", e.ID, until)
	}
	return r.Advance(ctx, "t", e.Flow, e.Round, until)
}

// wantOutcome fails t unless e of tenant has the outcome want.
func wantOutcome(t *testing.T, r ledger.Recorder, tenant string, e ledger.Entry, want string) {
	t.Helper()
	got, err := r.Outcome(context.Background(), tenant, e)
	if err != nil || string(got) != want {
		t.Fatalf("outcome: got %q, %v, want %q", got, err, want)
	}
}

// wantNoOutcome fails t unless asking for e's outcome is refused with
// want; asked names the question in the failure.
func wantNoOutcome(t *testing.T, r ledger.Recorder, tenant string, e ledger.Entry, asked string, want error) {
	t.Helper()
	_, err := r.Outcome(context.Background(), tenant, e)
	wantErr(t, asked, err, want)
}

// wantErr fails t unless err is want, nil for success; call names the
// call in the failure.
func wantErr(t *testing.T, call string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %s", call, err, errNames[want])
	}
}

// errNames are the names the failures give the errors the suite expects,
// as a reader finds them in package ledger.
var errNames = map[error]string{
	nil:                "nil",
	ledger.ErrConsumed: "ErrConsumed",
	ledger.ErrPending:  "ErrPending",
	ledger.ErrGone:     "ErrGone",
	ledger.ErrConflict: "ErrConflict",
}
