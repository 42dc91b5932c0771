package nemesis

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

// ClockStep is the fault of e2e's TestNemesis_ClockSteps (issue 40): a
// sealer's wall clock set to a new offset at once, a step between two of
// its clock checks, held until its next step.
const ClockStep = "clock-step"

// Seal seals on op.Replica, as every client of Clients does (principal,
// payload, binding), and records the call; it returns the response and
// the outcome.
func (c *Clients) Seal(op Op, req *sealerv1.SealRequest) (*sealerv1.SealResponse, string) {
	return c.seal(op, req)
}

// Open opens state on op.Replica and records the call; it returns the
// outcome.
func (c *Clients) Open(op Op, state string) string {
	_, out := c.open(op, state)
	return out
}

// Later opens state as op says, d from now; Wait waits for it.
func (c *Clients) Later(d time.Duration, op Op, state string) { c.later(d, op, state) }

// Clock reads the wall clock of sealer replica: the expiry of a state it
// seals for a second, less the second. The seal is not recorded; no clock
// refuses a seal.
func (c *Clients) Clock(replica int) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := c.sealers[replica].Seal(ctx, &sealerv1.SealRequest{Principal: "clock", Payload: []byte("clock"),
		Request: &sealerv1.Binding{Digest: c.digest}, Ttl: durationpb.New(time.Second)})
	if err != nil {
		return time.Time{}, fmt.Errorf("nemesis: reading replica %d's clock: %v", replica, err)
	}
	return resp.ExpiresAt.AsTime().Add(-time.Second), nil
}

// Opens is what the opens of a history came to.
type Opens struct {
	Attempted, OK int
	Refusals      map[string]int // outcome other than OK -> opens
}

// CountOpens counts the opens of h (first opens and replays, one-time and
// of flows), by outcome.
func CountOpens(h *History) Opens {
	o := Opens{Refusals: map[string]int{}}
	for _, op := range h.Ops() {
		switch op.Kind {
		case KindOpen, KindReplay, KindFlowOpen, KindFlowReplay:
		default:
			continue
		}
		o.Attempted++
		if op.Outcome == "OK" {
			o.OK++
		} else {
			o.Refusals[op.Outcome]++
		}
	}
	return o
}

func (o Opens) String() string {
	return fmt.Sprintf("opens attempted %d, OK %d; refusals: %s", o.Attempted, o.OK, joinCounts(o.Refusals))
}
