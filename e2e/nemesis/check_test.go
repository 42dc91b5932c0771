package nemesis

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// op is an operation invoked at from and done at to (milliseconds).
func op(replica int, kind, state string, from, to int, outcome string) Op {
	return Op{Replica: replica, Kind: kind, State: state, Invoked: at(from), Done: at(to), Outcome: outcome}
}

func flowOp(replica int, kind, flow string, round, from, to int, outcome string) Op {
	o := op(replica, kind, "", from, to, outcome)
	o.Flow, o.Round = flow, round
	return o
}

// recorded is o opened with record_outcome and, when answer is set,
// answered with that recorded outcome instead of the payload.
func recorded(o Op, answer string) Op {
	o.RecordOutcome, o.Answer = true, answer
	return o
}

// of is o with its state set (a flow op's, for the recorded rules).
func of(state string, o Op) Op {
	o.State = state
	return o
}

// says is o, a handler run or a Record, with its answer.
func says(answer string, o Op) Op {
	o.Answer = answer
	return o
}

// ran is the handler run of an open of state, which answered answer.
func ran(replica int, state string, from, to int, answer string) Op {
	return says(answer, op(replica, KindHandler, state, from, to, "OK"))
}

// record is the Record of answer for state.
func record(replica int, state string, from, to int, outcome, answer string) Op {
	return says(answer, op(replica, KindRecord, state, from, to, outcome))
}

// clean is a history of a run that kept every promise: a state opened
// once and refused after, a flow whose rounds opened in order and whose
// fork and rewinds were refused, a refusal in a fault, and a transport
// failure. With record_outcome: a state whose handler ran once and whose
// retries (one racing the Record) got its answer, one whose Record failed
// and whose retry got IN_PROGRESS, and a flow whose round 1 was answered
// again and whose fork's twin was refused.
func clean() *History {
	h := &History{Run: Run{Seed: 1, Replicas: 2}}
	for _, o := range []Op{
		op(0, KindSeal, "s1", 0, 5, "OK"),
		op(0, KindOpen, "s1", 10, 15, "OK"),
		op(1, KindReplay, "s1", 1000, 1005, "ALREADY_CONSUMED"),
		op(1, KindReplay, "s1", 5000, 5005, "INDETERMINATE:Unavailable"),
		op(1, KindSeal, "s2", 2000, 2005, "OK"),
		op(1, KindOpen, "s2", 2010, 2015, "LEDGER_UNAVAILABLE"),
		op(0, KindReplay, "s2", 3010, 3015, "OK"), // the first open was refused: this one is the only
		flowOp(0, KindFlowSeal, "f", 1, 0, 5, "OK"),
		flowOp(1, KindFlowOpen, "f", 1, 10, 15, "OK"),
		flowOp(1, KindFlowSeal, "f", 2, 20, 25, "OK"),
		flowOp(1, KindFlowSeal, "f", 2, 20, 25, "OK"), // a fork
		flowOp(0, KindFlowOpen, "f", 2, 30, 35, "OK"),
		flowOp(1, KindFlowReplay, "f", 2, 40, 45, "ALREADY_CONSUMED"), // its twin
		flowOp(1, KindFlowReplay, "f", 1, 1000, 1005, "ALREADY_CONSUMED"),
		flowOp(0, KindFlowOpen, "g", 2, 32, 50, "OK"), // another flow's round 2
		flowOp(1, KindFlowOpen, "g", 1, 33, 40, "OK"), // its round 1, concurrent with round 2: allowed

		op(0, KindSeal, "s4", 100, 105, "OK"),
		recorded(op(0, KindOpen, "s4", 110, 115, "OK"), ""),
		ran(0, "s4", 116, 150, "paid:0:1"),
		recorded(op(1, KindReplay, "s4", 117, 400, "OK"), "paid:0:1"), // raced the Record, waited for it
		record(0, "s4", 150, 160, "OK", "paid:0:1"),
		recorded(op(1, KindReplay, "s4", 1100, 1105, "OK"), "paid:0:1"),
		recorded(op(1, KindReplay, "s4", 3100, 3105, "OK"), "paid:0:1"),
		op(0, KindSeal, "s5", 200, 205, "OK"),
		recorded(op(0, KindOpen, "s5", 210, 215, "OK"), ""),
		ran(0, "s5", 216, 220, "paid:0:2"),
		record(0, "s5", 220, 1220, "LEDGER_UNAVAILABLE", "paid:0:2"),
		recorded(op(1, KindReplay, "s5", 1300, 3100, "IN_PROGRESS"), ""),
		of("h1", flowOp(0, KindFlowSeal, "h", 1, 300, 305, "OK")),
		recorded(of("h1", flowOp(0, KindFlowOpen, "h", 1, 310, 315, "OK")), ""),
		says("paid:0:3", of("h1", flowOp(0, KindHandler, "h", 1, 316, 320, "OK"))),
		says("paid:0:3", of("h1", flowOp(0, KindRecord, "h", 1, 320, 325, "OK"))),
		recorded(of("h1", flowOp(1, KindFlowReplay, "h", 1, 330, 340, "OK")), "paid:0:3"),
		of("h2a", flowOp(0, KindFlowSeal, "h", 2, 350, 355, "OK")),
		of("h2b", flowOp(0, KindFlowSeal, "h", 2, 350, 355, "OK")), // a fork
		recorded(of("h2a", flowOp(1, KindFlowOpen, "h", 2, 360, 365, "OK")), ""),
		says("paid:0:4", of("h2a", flowOp(1, KindHandler, "h", 2, 366, 370, "OK"))),
		says("paid:0:4", of("h2a", flowOp(1, KindRecord, "h", 2, 370, 375, "OK"))),
		recorded(of("h2b", flowOp(0, KindFlowReplay, "h", 2, 380, 385, "ALREADY_CONSUMED")), ""),  // its twin
		recorded(of("h1", flowOp(0, KindFlowReplay, "h", 1, 1000, 1005, "ALREADY_CONSUMED")), ""), // after round 2
	} {
		h.Add(o)
	}
	h.AddFault(Fault{Kind: KillMaster, Start: at(1900), Heal: at(2500)})
	return h
}

func TestCheck_CleanHistory(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	r := Check(clean())
	if len(r.Violations) != 0 {
		t.Fatalf("got %d violations, want 0: %v", len(r.Violations), r.Violations)
	}
	if r.Indeterminate != 1 {
		t.Errorf("indeterminate: got %d, want 1", r.Indeterminate)
	}
	// Recorded outcomes: s4, s5, h1 and h2a ran their handler; s4's three
	// retries and h1's one got the answer; s5's retry waited in vain.
	if r.HandlerRuns != 4 || r.Answered != 4 || r.InProgress != 1 {
		t.Errorf("handler runs %d, answered %d, IN_PROGRESS %d; want 4, 4, 1", r.HandlerRuns, r.Answered, r.InProgress)
	}
	// Under the fault: the seal of s2 (OK) and its first open (refused).
	if s := r.ByFault[KillMaster]; s == nil || s.Ops != 2 || s.OK != 1 || s.Faults != 1 {
		t.Errorf("kill-master stats: got %+v, want 1 fault, 2 ops, 1 OK", s)
	}
	// No replica opened OK after the heal at 2500 but replica 0 (s2's replay).
	if len(r.Wholes) != 1 || r.Wholes[0] != -1 {
		t.Errorf("time to whole: got %v, want [-1] (replica 1 never opened OK again)", r.Wholes)
	}
}

// TestCheck_FindsViolations: each breach, added to the clean history, is
// found and counted under its rule.
func TestCheck_FindsViolations(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, tc := range []struct {
		name string
		add  Op
		rule string
	}{
		{"one-time double open", op(1, KindReplay, "s1", 12000, 12005, "OK"), "one-time opened twice"},
		{"fork twins both opened", flowOp(1, KindFlowReplay, "f", 2, 40, 45, "OK"), "round opened twice"},
		{"rewind after a later round", flowOp(1, KindFlowReplay, "f", 1, 1000, 1005, "OK"), "round opened twice"},
		{"handler ran twice", recorded(op(1, KindReplay, "s4", 12000, 12005, "OK"), ""), "one-time opened twice"},
		{"round's handler ran twice", recorded(of("h2b", flowOp(1, KindFlowReplay, "h", 2, 390, 395, "OK")), ""), "round opened twice"},
		{"another answer", recorded(op(1, KindReplay, "s4", 12000, 12005, "OK"), "paid:0:9"), "answer not the handler's"},
		{"another state's answer", recorded(op(1, KindReplay, "s4", 12000, 12005, "OK"), "paid:0:2"), "answer not the handler's"},
		{"an earlier round's answer", recorded(of("h2a", flowOp(0, KindFlowReplay, "h", 2, 390, 395, "OK")), "paid:0:3"), "answer not the handler's"},
		{"answer, no handler ran", recorded(op(1, KindReplay, "s1", 12000, 12005, "OK"), "paid:0:1"), "answer with no handler run"},
		{"answer for the fork's twin", recorded(of("h2b", flowOp(1, KindFlowReplay, "h", 2, 390, 395, "OK")), "paid:0:4"), "answer with no handler run"},
		{"record of a lost claim", record(0, "s2", 12000, 12005, "INVALID_ARGUMENT", "paid:1:1"), "record refused"},
		{"record claimed again", record(0, "s2", 12000, 12005, "ALREADY_CONSUMED", "paid:1:1"), "record refused"},
		{"IN_PROGRESS, not recording", op(1, KindReplay, "s1", 12000, 12005, "IN_PROGRESS"), "refusal"},
		{"untyped refusal", op(0, KindOpen, "s3", 100, 105, "UNTYPED:Internal"), "refusal"},
		{"unknown reason", op(0, KindOpen, "s3", 100, 105, "NOT_A_REASON"), "refusal"},
		{"unexpected reason", op(0, KindOpen, "s3", 100, 105, "INVALID_STATE"), "refusal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean()
			h.Add(tc.add)
			r := Check(h)
			if len(r.Violations) == 0 || r.Violations[0].Rule != tc.rule {
				t.Fatalf("got %v, want a violation of %q", r.Violations, tc.rule)
			}
			if len(r.Violations) != r.LossesBy[KillMaster]+r.LossesBy["(no fault)"] {
				t.Errorf("losses by fault %v do not add up to %d violations", r.LossesBy, len(r.Violations))
			}
		})
	}
}

// TestCheck_StaleRound: a round opened OK by a call invoked after a later
// round's OK open completed breaks latest-only even when it is that
// round's only OK.
// TestCheck_Around: a violation is put down to the fault active at its
// first open, or else the last one healed before it.
func TestCheck_Around(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	faults := []Fault{{Kind: KillMaster, Start: at(1000), Heal: at(2000)}, {Kind: HalfSplit, Start: at(5000), Heal: at(6000)}}
	for _, tc := range []struct {
		ms   int
		want string
	}{{500, "(no fault)"}, {1000, KillMaster}, {3000, KillMaster}, {5500, HalfSplit}, {9000, HalfSplit}} {
		if got, _ := around(faults, at(tc.ms)); got != tc.want {
			t.Errorf("around +%dms: got %s, want %s", tc.ms, got, tc.want)
		}
	}
}

func TestCheck_StaleRound(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	h := &History{Run: Run{Replicas: 1}}
	h.Add(flowOp(0, KindFlowOpen, "f", 2, 10, 20, "OK"))
	h.Add(flowOp(0, KindFlowReplay, "f", 1, 25, 30, "OK"))
	r := Check(h)
	if r.StaleRounds != 1 || len(r.Violations) != 1 {
		t.Fatalf("got %d stale rounds, violations %v; want 1", r.StaleRounds, r.Violations)
	}
}

func TestHistory_JSONLinesRoundTrip(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	h := clean()
	h.Add(op(1, KindReplay, "s1", 12000, 12005, "OK")) // a double open
	var buf bytes.Buffer
	if err := h.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if back.Run != h.Run || len(back.Ops()) != len(h.Ops()) || len(back.Faults()) != 1 {
		t.Fatalf("got run %+v, %d ops, %d faults; want %+v, %d, 1", back.Run, len(back.Ops()), len(back.Faults()), h.Run, len(h.Ops()))
	}
	if !reflect.DeepEqual(back.Ops(), h.Ops()) {
		t.Errorf("the ops read back differ from those written")
	}
	if r := Check(back); r.OneTimeDouble != 1 {
		t.Errorf("replayed history: got %d one-time double opens, want 1", r.OneTimeDouble)
	}
	var out strings.Builder
	Check(back).Print(&out)
	for _, want := range []string{"double opens: one-time 1,", "recorded outcomes: handler runs 4, replays answered with the outcome 4, IN_PROGRESS 1;"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary does not say %q:\n%s", want, out.String())
		}
	}
}

// TestHistory_ReadsHistoriesWithoutOutcomes: a history saved before
// recorded outcomes still reads and judges, and an op that records none
// writes none of their fields.
func TestHistory_ReadsHistoriesWithoutOutcomes(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	old := `{"run":{"seed":34,"replicas":3,"unsafe":false}}
{"op":{"client":0,"replica":0,"kind":"open","state":"s1","invoked":"2026-01-02T03:04:05Z","done":"2026-01-02T03:04:05.01Z","outcome":"OK"}}
{"op":{"client":0,"replica":1,"kind":"replay","state":"s1","invoked":"2026-01-02T03:04:06Z","done":"2026-01-02T03:04:06.01Z","outcome":"OK"}}
`
	h, err := ReadJSONL(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if r := Check(h); r.OneTimeDouble != 1 || r.Answered != 0 || r.HandlerRuns != 0 {
		t.Errorf("got one-time doubles %d, answered %d, handler runs %d; want 1, 0, 0", r.OneTimeDouble, r.Answered, r.HandlerRuns)
	}
	line, err := json.Marshal(op(0, KindOpen, "s1", 0, 5, "OK"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(line), "answer") || strings.Contains(string(line), "record_outcome") {
		t.Errorf("an op without a recorded outcome writes %s", line)
	}
}

func TestOutcome(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	withInfo, _ := status.New(codes.FailedPrecondition, "consumed").WithDetails(&errdetails.ErrorInfo{Reason: "ALREADY_CONSUMED", Domain: "sealer.mcp"})
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "OK"},
		{withInfo.Err(), "ALREADY_CONSUMED"},
		{status.Error(codes.Unavailable, "connection refused"), "INDETERMINATE:Unavailable"},
		{status.Error(codes.DeadlineExceeded, "slow"), "INDETERMINATE:DeadlineExceeded"},
		{status.Error(codes.Internal, "no info"), "UNTYPED:Internal"},
		{errors.New("not a status"), "UNTYPED:Unknown"},
	} {
		if got := Outcome(tc.err); got != tc.want {
			t.Errorf("Outcome(%v): got %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestSchedule_SeededAndEveryKind: a seed gives the same steps every time,
// and any eight steps in a row from the start hold every kind.
func TestSchedule_SeededAndEveryKind(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	a, b := NewSchedule(7, Kinds), NewSchedule(7, Kinds)
	seen := map[string]bool{}
	for i := range 2 * len(Kinds) {
		x, y := a.Next(), b.Next()
		if x != y {
			t.Fatalf("step %d: %+v and %+v from one seed", i, x, y)
		}
		if i < len(Kinds) {
			seen[x.Kind] = true
		}
		if x.Hold < NodeTimeout {
			t.Errorf("step %d holds %v, within cluster-node-timeout %v", i, x.Hold, NodeTimeout)
		}
	}
	if len(seen) != len(Kinds) {
		t.Errorf("the first %d steps hold %d kinds, want all", len(Kinds), len(seen))
	}
}

func TestRunPID(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"snmbeef0a1-3", 0xbeef, true},
		{"snmbeef0a1g", 0xbeef, true},
		{"snm1c0a1h12", 0x1c, true},
		{"snm0a1-3", 0, false},
		{"other-ns", 0, false},
	} {
		pid, ok := runPID(tc.name)
		if pid != tc.pid || ok != tc.ok {
			t.Errorf("runPID(%q): got %d %v, want %d %v", tc.name, pid, ok, tc.pid, tc.ok)
		}
	}
}
