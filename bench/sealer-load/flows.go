package main

import (
	"context"
	"fmt"

	"github.com/mcp-sealer/sealer/client"
)

// The flow ops (FORMAT.md, "Flows"): each a Seal and an Open of the state
// it returned, through the Go client (the request's digest), so that what
// a flow costs is read beside the plain pair in one run:
//
//	flow-off      a plain state, as seal-open
//	flow-round1   round 1 of a flow that asks one input key; the Open
//	              answers it (Binding.Responded)
//	flow-next     round 2 of a flow, continuing a round 1 opened before the
//	              clock started (the Seal opens that state again to check
//	              it); the Open answers its key
//	flow-latest   flow-round1, latest-only: the Open advances the flow in
//	              the ledger
//	flow-onetime  a plain one-time state: the Open consumes it in the ledger
//
// A table after the results gives each flow op's pairs per second as a
// share of its reference (reportFlows).
var flowAsked = []string{"github_login"}

// flowOp returns the flow op called name, if it is one.
func flowOp(name string, ts *targets, auth func(context.Context) context.Context, payload []byte) (o op, label string, ok bool, err error) {
	asked := toolCall
	asked.Responded = flowAsked
	pair := func(seal func() client.SealRequest, open client.Binding) op {
		return func(ctx context.Context, i int) error {
			ctx = auth(ctx)
			st, _, err := ts.client(i).Seal(ctx, seal())
			if err != nil {
				return err
			}
			_, err = ts.client(i+1).Open(ctx, client.OpenRequest{State: st, Principal: "alice", Request: open})
			return err
		}
	}
	plain := func(oneTime bool) func() client.SealRequest {
		return func() client.SealRequest {
			return client.SealRequest{Principal: "alice", Request: toolCall, Payload: payload, OneTime: oneTime}
		}
	}
	round1 := func(latestOnly bool) func() client.SealRequest {
		return func() client.SealRequest {
			return client.SealRequest{Principal: "alice", Request: toolCall, Payload: payload,
				Flow: &client.FlowRequest{LatestOnly: latestOnly, Asked: flowAsked}}
		}
	}
	size := fmt.Sprintf(" (%d B)", len(payload))
	switch name {
	case "flow-off":
		return pair(plain(false), toolCall), "Seal+Open, plain state" + size, true, nil
	case "flow-round1":
		return pair(round1(false), asked), "Seal+Open, flow round 1, 1 input key" + size, true, nil
	case "flow-next":
		ctx := auth(context.Background())
		st, _, err := ts.client(0).Seal(ctx, round1(false)())
		if err != nil {
			return nil, "", true, err
		}
		opened, err := ts.client(0).Open(ctx, client.OpenRequest{State: st, Principal: "alice", Request: asked})
		if err != nil {
			return nil, "", true, err
		}
		next := func() client.SealRequest {
			return client.SealRequest{Principal: "alice", Request: toolCall, Payload: payload,
				Flow: client.FlowRequest{Asked: flowAsked}.After(opened)}
		}
		return pair(next, asked), "Seal+Open, flow round 2 (continuation), 1 input key" + size, true, nil
	case "flow-latest":
		return pair(round1(true), asked), "Seal+Open, latest-only flow round 1 (ledger Advance)" + size, true, nil
	case "flow-onetime":
		return pair(plain(true), toolCall), "Seal+Open, plain one-time state (ledger Consume)" + size, true, nil
	}
	return nil, "", false, nil
}

// flowGoals are the comparisons of reportFlows: an op, its reference, and
// the least share of the reference's pairs per second the op should reach.
var flowGoals = []struct {
	op, ref string
	least   float64
}{
	{"flow-round1", "flow-off", 95},      // a flow costs at most 5%
	{"flow-next", "flow-off", 95},        // and so does a continuation
	{"flow-latest", "flow-onetime", 100}, // the latest-round check, at most a one-time open
}

// reportFlows prints, level by level from the median runs, each flow op's
// pairs per second as a share of its reference's, with the CPU time the
// sealer spent per pair when its PID was given.
func reportFlows(levels []int, medians map[string][]*result) {
	header := false
	for _, g := range flowGoals {
		mine, ref := medians[g.op], medians[g.ref]
		if len(mine) != len(levels) || len(ref) != len(levels) {
			continue
		}
		if !header {
			fmt.Printf("\n| call | against | concurrency | ops/s | against ops/s | share | goal | sealer CPU/op | against CPU/op |\n|---|---|---|---|---|---|---|---|---|\n")
			header = true
		}
		for k, n := range levels {
			r, b := mine[k], ref[k]
			share := 100 * r.rate() / b.rate()
			verdict := "met"
			if share < g.least {
				verdict = "**missed**"
			}
			fmt.Printf("| %s | %s | %d | %.0f | %.0f | %.1f%% | at least %.0f%%: %s | %s | %s |\n",
				g.op, g.ref, n, r.rate(), b.rate(), share, g.least, verdict, r.cpuPerOp(), b.cpuPerOp())
		}
	}
}
