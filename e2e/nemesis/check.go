package nemesis

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

// Outcome names what a call returned, for Op.Outcome: OK, the reason of
// the error's ErrorInfo, INDETERMINATE:<code> for a transport failure
// (the call may or may not have reached the sealer), or UNTYPED:<code>.
func Outcome(err error) string {
	if err == nil {
		return "OK"
	}
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return "INDETERMINATE:" + st.Code().String()
	}
	return "UNTYPED:" + st.Code().String()
}

// typed reports whether reason is a value of sealer.v1.Reason (the wire
// drops the REASON_ prefix; UNSPECIFIED is never sent).
func typed(reason string) bool { return sealerv1.Reason_value["REASON_"+reason] > 0 }

// unexpected are typed refusals an honest client of a healthy or faulty
// fleet never gets: its states are authentic, bound right and sealed
// within the limits, so each is a bug.
var unexpected = []string{"INVALID_STATE", "PRINCIPAL_MISMATCH", "REQUEST_MISMATCH", "INVALID_ARGUMENT",
	"INTERNAL", "UNAUTHENTICATED", "INPUT_MISMATCH"}

// Violation is one breach of the rules the checker holds a history to.
type Violation struct {
	// Rule is "one-time opened twice", "round opened twice" (a handler
	// ran twice), "round opened after a later one", "refusal", "answer
	// not the handler's", "answer with no handler run" or "record
	// refused".
	Rule  string
	What  string
	Ops   []Op
	Fault string // the fault during or last before the first operation: where the loss began
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (%s)", v.Rule, v.What, v.Fault)
	for _, op := range v.Ops {
		fmt.Fprintf(&b, "\n\t%s replica %d client %d %s..%s %s", op.Kind, op.Replica, op.Client,
			op.Invoked.Format("15:04:05.000"), op.Done.Format("15:04:05.000"), op.Outcome)
		if op.Answer != "" {
			fmt.Fprintf(&b, " answer %q", op.Answer)
		}
	}
	return b.String()
}

// KindStats is availability under one kind of fault.
type KindStats struct {
	Faults     int
	Ops, OK    int           // seals and first opens invoked while a fault of the kind was active
	MaxWhole   time.Duration // the longest time from a heal until every replica opened OK again
	NeverWhole int           // faults after which some replica never opened OK again
}

// Result is what the checker found in a history.
type Result struct {
	Ops           int
	Outcomes      map[string]int // outcome -> operations
	Kinds         map[string]int // op kind -> operations
	Indeterminate int
	OneTimeDouble int // one-time states opened OK with their payload more than once
	RoundDouble   int // flow rounds opened OK with their payload more than once
	StaleRounds   int // rounds opened OK after a later round's OK open completed
	BadRefusals   int
	// Recorded outcomes: the handler runs, the opens answered with a
	// recorded outcome instead (their handler did not run), the opens
	// refused IN_PROGRESS, the answers that were not the one handler
	// run's, and the Records refused for a claim that was gone.
	HandlerRuns    int
	Answered       int
	InProgress     int
	WrongAnswers   int
	RecordsRefused int
	Violations     []Violation
	LossesBy       map[string]int        // fault kind -> violations that began during or after it
	ByFault        map[string]*KindStats // fault kind ("" for the quiet times) -> stats
	Wholes         []time.Duration       // per fault, time to whole (-1: never)
}

// Check judges a history: no one-time state opened OK with its payload
// twice; per flow, no round opened so twice and none opened OK by a call
// invoked after an OK open of a later round completed (latest-only);
// every refusal typed and expected. An open answered with a recorded
// outcome is no open of the payload (no handler ran for it), but its
// answer must be the one the handler run of its state gave (exactly
// once), and a Record must find the claim its open made. It measures
// availability per kind of fault and, after each heal, how long until
// every replica answered an OK open again.
func Check(h *History) *Result {
	ops := h.Ops()
	r := &Result{Ops: len(ops), Outcomes: map[string]int{}, Kinds: map[string]int{}, ByFault: map[string]*KindStats{}}
	onceOK := map[string][]Op{}
	type flowRound struct {
		flow  string
		round int
	}
	roundOK := map[flowRound][]Op{}
	flowOK := map[string][]Op{}
	runs := map[string][]Op{} // state -> the handler runs for it
	var answered []Op
	for _, op := range ops {
		r.Outcomes[op.Outcome]++
		r.Kinds[op.Kind]++
		switch {
		case op.Kind == KindHandler:
			r.HandlerRuns++
			runs[op.State] = append(runs[op.State], op)
		case op.Outcome == "OK" && op.Answer != "" && op.Kind != KindRecord:
			r.Answered++
			answered = append(answered, op)
		case op.Outcome == "OK":
			switch op.Kind {
			case KindOpen, KindReplay:
				onceOK[op.State] = append(onceOK[op.State], op)
			case KindFlowOpen, KindFlowReplay:
				roundOK[flowRound{op.Flow, op.Round}] = append(roundOK[flowRound{op.Flow, op.Round}], op)
				flowOK[op.Flow] = append(flowOK[op.Flow], op)
			}
		case strings.HasPrefix(op.Outcome, "INDETERMINATE:"):
			r.Indeterminate++
		case op.Outcome == "IN_PROGRESS" && op.RecordOutcome:
			r.InProgress++
		case op.Kind == KindRecord && (op.Outcome == "ALREADY_CONSUMED" || op.Outcome == "INVALID_ARGUMENT"):
			// Refused as not claimed, or claimed again: the claim its open
			// made was lost, as a loss of the consume is.
			r.RecordsRefused++
			r.Violations = append(r.Violations, Violation{Rule: "record refused",
				What: fmt.Sprintf("Record of state %s refused %s: the claim of its open is gone", op.State, op.Outcome), Ops: []Op{op}})
		case !typed(op.Outcome) || slices.Contains(unexpected, op.Outcome) || op.Outcome == "IN_PROGRESS":
			r.BadRefusals++
			r.Violations = append(r.Violations, Violation{Rule: "refusal", What: fmt.Sprintf("%s is not a typed, expected reason", op.Outcome), Ops: []Op{op}})
		}
	}
	for _, state := range sortedKeys(onceOK) {
		if oks := onceOK[state]; len(oks) > 1 {
			r.OneTimeDouble++
			r.Violations = append(r.Violations, Violation{Rule: "one-time opened twice", What: fmt.Sprintf("state %s opened OK with its payload %d times", state, len(oks)), Ops: oks})
		}
	}
	for fr, oks := range roundOK {
		if len(oks) > 1 {
			r.RoundDouble++
			r.Violations = append(r.Violations, Violation{Rule: "round opened twice", What: fmt.Sprintf("flow %s round %d opened OK with its payload %d times", fr.flow, fr.round, len(oks)), Ops: oks})
		}
	}
	r.judgeAnswers(answered, runs)
	for flow, oks := range flowOK {
		for _, late := range oks {
			for _, later := range oks {
				if later.Round > late.Round && later.Done.Before(late.Invoked) {
					r.StaleRounds++
					r.Violations = append(r.Violations, Violation{Rule: "round opened after a later one",
						What: fmt.Sprintf("flow %s round %d opened after round %d had", flow, late.Round, later.Round), Ops: []Op{later, late}})
					break
				}
			}
		}
	}
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return a.Ops[0].Invoked.Compare(b.Ops[0].Invoked) })
	faults := h.Faults()
	r.LossesBy = map[string]int{}
	for i, v := range r.Violations {
		kind, when := around(faults, v.Ops[0].Invoked)
		r.Violations[i].Fault = when
		r.LossesBy[kind]++
	}
	r.availability(ops, faults, h.Run.Replicas)
	return r
}

// judgeAnswers holds the opens answered with a recorded outcome to exactly
// once: each got the answer of the handler run of its own state (for a
// flow, of its round, run for that same state and not a fork's twin),
// and none got one for a state no handler ran for. A state's second run
// is a double open, judged as such.
func (r *Result) judgeAnswers(answered []Op, runs map[string][]Op) {
	for _, op := range answered {
		ran := runs[op.State]
		switch {
		case len(ran) == 0:
			r.WrongAnswers++
			r.Violations = append(r.Violations, Violation{Rule: "answer with no handler run",
				What: fmt.Sprintf("state %s answered %q, but no handler ran for it", op.State, op.Answer), Ops: []Op{op}})
		case !slices.ContainsFunc(ran, func(run Op) bool { return run.Answer == op.Answer }):
			r.WrongAnswers++
			r.Violations = append(r.Violations, Violation{Rule: "answer not the handler's",
				What: fmt.Sprintf("state %s answered %q, its handler %q", op.State, op.Answer, ran[0].Answer), Ops: append(slices.Clone(ran), op)})
		}
	}
}

// around names the fault active at t, or else the last one healed before
// it: its kind, and a phrase for a person.
func around(faults []Fault, t time.Time) (kind, when string) {
	kind, when = "(no fault)", "before any fault"
	for _, f := range faults {
		switch {
		case f.Start.After(t):
			return kind, when
		case t.Before(f.Heal):
			return f.Kind, fmt.Sprintf("during %s %v", f.Kind, f.Targets)
		default:
			kind, when = f.Kind, fmt.Sprintf("%.1fs after %s %v healed", t.Sub(f.Heal).Seconds(), f.Kind, f.Targets)
		}
	}
	return kind, when
}

// counts reports whether an operation is one a healthy fleet answers OK.
func counts(op Op) bool {
	return op.Kind == KindSeal || op.Kind == KindOpen || op.Kind == KindFlowSeal || op.Kind == KindFlowOpen
}

func (r *Result) availability(ops []Op, faults []Fault, replicas int) {
	stats := func(kind string) *KindStats {
		if r.ByFault[kind] == nil {
			r.ByFault[kind] = &KindStats{}
		}
		return r.ByFault[kind]
	}
	for _, op := range ops {
		if !counts(op) {
			continue
		}
		kind := ""
		for _, f := range faults {
			if !op.Invoked.Before(f.Start) && op.Invoked.Before(f.Heal) {
				kind = f.Kind
				break
			}
		}
		s := stats(kind)
		s.Ops++
		if op.Outcome == "OK" {
			s.OK++
		}
	}
	for _, f := range faults {
		s := stats(f.Kind)
		s.Faults++
		whole := wholeAfter(ops, f.Heal, replicas)
		r.Wholes = append(r.Wholes, whole)
		if whole < 0 {
			s.NeverWhole++
		} else {
			s.MaxWhole = max(s.MaxWhole, whole)
		}
	}
}

// wholeAfter is how long after heal every replica had completed an OK open
// invoked after heal, or -1 if some replica never did.
func wholeAfter(ops []Op, heal time.Time, replicas int) time.Duration {
	var whole time.Duration
	for replica := range replicas {
		first := time.Duration(-1)
		for _, op := range ops {
			if op.Replica == replica && op.Outcome == "OK" && (op.Kind == KindOpen || op.Kind == KindFlowOpen) && !op.Invoked.Before(heal) {
				if d := op.Done.Sub(heal); first < 0 || d < first {
					first = d
				}
			}
		}
		if first < 0 {
			return -1
		}
		whole = max(whole, first)
	}
	return whole
}

// Print writes the summary: operations, outcomes, faults and availability
// by kind, the violations counted.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "operations: %d (%s)\n", r.Ops, joinCounts(r.Kinds))
	fmt.Fprintf(w, "outcomes: %s; indeterminate %d\n", joinCounts(r.Outcomes), r.Indeterminate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault kind\tfaults\tops\tOK\tavailability\tmax to whole\tnot whole\t")
	for _, kind := range sortedKeys(r.ByFault) {
		s := r.ByFault[kind]
		name, whole := kind, fmt.Sprintf("%.1fs", s.MaxWhole.Seconds())
		if kind == "" {
			name, whole = "(no fault)", "-"
		}
		avail := "-"
		if s.Ops > 0 {
			avail = fmt.Sprintf("%.1f%%", 100*float64(s.OK)/float64(s.Ops))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\t\n", name, s.Faults, s.Ops, s.OK, avail, whole, s.NeverWhole)
	}
	tw.Flush()
	fmt.Fprintf(w, "double opens: one-time %d, flow round %d; rounds opened after a later one %d; bad refusals %d\n",
		r.OneTimeDouble, r.RoundDouble, r.StaleRounds, r.BadRefusals)
	fmt.Fprintf(w, "recorded outcomes: handler runs %d, replays answered with the outcome %d, IN_PROGRESS %d; answers not the handler's %d, records refused %d\n",
		r.HandlerRuns, r.Answered, r.InProgress, r.WrongAnswers, r.RecordsRefused)
	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "violations by the fault during or before their first open: %s\n", joinCounts(r.LossesBy))
	}
}

func joinCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
