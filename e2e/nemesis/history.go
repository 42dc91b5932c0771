// Package nemesis holds the pieces of the end-to-end nemesis test (issue
// 34): the history that clients record while faults are injected, the
// checker that judges it, the seeded schedule of faults, and the network
// namespaces and processes the fleet runs in.
//
// The checker and the history are plain data and are unit tested here; the
// rest needs root and `ip`, and is driven by e2e's TestNemesis_AtMostOnce.
package nemesis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// The kinds of operation a client records. Only seals and first opens are
// expected to succeed on a healthy fleet: they are what availability
// counts. A replay's right answer is a refusal, or, for an open with
// record_outcome, the answer recorded for its state.
const (
	KindSeal       = "seal"        // seal a one-time state
	KindOpen       = "open"        // its first open
	KindReplay     = "replay"      // the same open again, later, on another replica
	KindFlowSeal   = "flow-seal"   // seal a round of a latest-only flow
	KindFlowOpen   = "flow-open"   // open the flow's newest round
	KindFlowReplay = "flow-replay" // open an earlier round, or the twin of a fork
	KindHandler    = "handler"     // the handler ran for an open that returned the payload (no call)
	KindRecord     = "record"      // Record of the answer the handler gave
)

// Op is one call a client made and what came of it.
type Op struct {
	Client  int       `json:"client"`
	Replica int       `json:"replica"`
	Kind    string    `json:"kind"`
	State   string    `json:"state,omitempty"` // a short hash of the requestState
	Flow    string    `json:"flow,omitempty"`
	Round   int       `json:"round,omitempty"`
	Invoked time.Time `json:"invoked"`
	Done    time.Time `json:"done"`
	// Outcome is OK, a reason of sealer.v1.Reason (EXPIRED), or for a call
	// without one INDETERMINATE:<gRPC code> (the transport failed: the
	// call may or may not have happened) or UNTYPED:<gRPC code>.
	Outcome string `json:"outcome"`
	// RecordOutcome says an open asked for record_outcome.
	RecordOutcome bool `json:"record_outcome,omitempty"`
	// Answer is the answer a handler gave (KindHandler), the one Record
	// was given (KindRecord), or the recorded outcome an open was
	// answered with instead of the payload (no handler ran for it).
	Answer string `json:"answer,omitempty"`
}

// Fault is one fault the nemesis injected, from Start until Heal (the
// moment it began to undo it).
type Fault struct {
	Kind    string    `json:"kind"`
	Targets []string  `json:"targets"`
	Start   time.Time `json:"start"`
	Heal    time.Time `json:"heal"`
	Note    string    `json:"note,omitempty"`
}

// Run says how the history was made.
type Run struct {
	Seed     uint64 `json:"seed"`
	Replicas int    `json:"replicas"` // sealer replicas, numbered from 0
	Unsafe   bool   `json:"unsafe"`   // --ledger-replicas 0 and no clock check
}

// History is what a run recorded; clients and the nemesis add to it
// concurrently.
type History struct {
	Run    Run
	mu     sync.Mutex
	ops    []Op
	faults []Fault
}

// Add records an operation.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// AddFault records a fault once it is healed.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

// Ops returns the operations recorded so far, in the order of invocation.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b Op) int { return a.Invoked.Compare(b.Invoked) })
	return ops
}

// Faults returns the faults recorded so far, in order.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.faults)
}

// line is one line of a history file: exactly one member is set.
type line struct {
	Run   *Run   `json:"run,omitempty"`
	Fault *Fault `json:"fault,omitempty"`
	Op    *Op    `json:"op,omitempty"`
}

// WriteJSONL writes the history as JSON lines: the run, the faults, then
// the operations.
func (h *History) WriteJSONL(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	run := h.Run
	if err := enc.Encode(line{Run: &run}); err != nil {
		return err
	}
	for _, f := range h.Faults() {
		if err := enc.Encode(line{Fault: &f}); err != nil {
			return err
		}
	}
	for _, op := range h.Ops() {
		if err := enc.Encode(line{Op: &op}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONL reads a history written by WriteJSONL.
func ReadJSONL(r io.Reader) (*History, error) {
	h := &History{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("nemesis: history line %d: %v", n, err)
		}
		switch {
		case l.Run != nil:
			h.Run = *l.Run
		case l.Fault != nil:
			h.AddFault(*l.Fault)
		case l.Op != nil:
			h.Add(*l.Op)
		default:
			return nil, fmt.Errorf("nemesis: history line %d: no run, fault or op", n)
		}
	}
	return h, sc.Err()
}
