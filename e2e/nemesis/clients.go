package nemesis

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

// callTimeout bounds every call: a paused sealer costs a client this
// much, and the call is recorded as indeterminate.
const callTimeout = 2 * time.Second

// The replays of an open: a long-lived state is opened again on the other
// sealers this long after its first open, so that a consume lost in a
// failover, or expired early by a skewed clock, shows as a second OK. A
// short-lived one (2 s) is replayed around its expiry plus the skew.
var (
	longReplays  = []time.Duration{time.Second, 5 * time.Second, 12 * time.Second}
	shortReplays = []time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 7 * time.Second}
)

// Clients seal and open on every sealer and record each call in a
// History.
type Clients struct {
	h       *History
	sealers []sealerv1.SealerClient
	seed    uint64
	digest  []byte
	stop    chan struct{}
	stopped sync.Once
	workers sync.WaitGroup
	replays sync.WaitGroup
	runs    atomic.Int64 // handler runs, numbering their answers
}

// NewClients dials every sealer (gRPC, from the root namespace); the
// connections are closed at cleanup. They retry a connection within a
// second, so a restarted sealer is found again at once.
func NewClients(t testing.TB, h *History, seed uint64, addrs []string) *Clients {
	t.Helper()
	sum := sha256.Sum256([]byte("nemesis: the tools/call every state binds"))
	c := &Clients{h: h, seed: seed, digest: sum[:], stop: make(chan struct{})}
	for _, addr := range addrs {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond,
				Multiplier: 1.6, MaxDelay: time.Second}, MinConnectTimeout: time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c.sealers = append(c.sealers, sealerv1.NewSealerClient(conn))
	}
	return c
}

// Start runs perSealer clients at home on each sealer until Stop.
func (c *Clients) Start(perSealer int) {
	for id := range perSealer * len(c.sealers) {
		c.workers.Go(func() { c.work(id, id%len(c.sealers)) })
	}
}

// Stop stops the clients and waits for their calls (not the replays they
// scheduled: Wait). It may be called again, as a cleanup.
func (c *Clients) Stop() {
	c.stopped.Do(func() { close(c.stop) })
	c.workers.Wait()
}

// Wait waits for the scheduled replays.
func (c *Clients) Wait() { c.replays.Wait() }

func (c *Clients) work(id, home int) {
	rng := rand.New(rand.NewPCG(c.seed, uint64(id)+1))
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		switch rng.IntN(4) {
		case 0, 1:
			c.oneTime(id, home, 30*time.Second, longReplays, newHandling(rng, rng.IntN(2) == 0))
		case 2:
			c.oneTime(id, home, 2*time.Second, shortReplays, newHandling(rng, rng.IntN(2) == 0))
		default:
			c.flow(id, home, rng)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// handling is how a client treats the states it opens: with
// record_outcome (an adapter that records outcomes) or not, and for an
// open that returns the payload, whether a retry on another sealer races
// its handler and how long the handler runs.
type handling struct {
	record bool
	race   bool
	runs   time.Duration
}

func newHandling(rng *rand.Rand, record bool) handling {
	return handling{record: record, race: rng.IntN(2) == 0, runs: time.Duration(rng.IntN(200)) * time.Millisecond}
}

// oneTime seals a one-time state at home, opens it there, and replays the
// open on the other sealers at the given moments after, all with
// record_outcome when hd says so.
func (c *Clients) oneTime(id, home int, ttl time.Duration, replays []time.Duration, hd handling) bool {
	resp, out := c.seal(Op{Client: id, Replica: home, Kind: KindSeal}, &sealerv1.SealRequest{OneTime: true, Ttl: durationpb.New(ttl)})
	if out != "OK" {
		return false
	}
	state := resp.RequestState
	out, _ = c.serve(Op{Client: id, Replica: home, Kind: KindOpen, RecordOutcome: hd.record}, state, hd)
	for k, d := range replays {
		c.later(d, Op{Client: id, Replica: (home + 1 + k%(len(c.sealers)-1)) % len(c.sealers), Kind: KindReplay, RecordOutcome: hd.record}, state)
	}
	return out == "OK"
}

// serve opens state as op says and, when an open with record_outcome
// returns the payload, does what an adapter does: runs the handler, which
// answers anew, and records the answer when the open is recording. With
// hd.race a retry of the same open on the next sealer is launched as the
// handler starts, so that it waits for the Record (or gets IN_PROGRESS).
// It returns the open's outcome and whether it returned the payload.
func (c *Clients) serve(op Op, state string, hd handling) (string, bool) {
	resp, out := c.open(op, state)
	if out != "OK" || resp.Outcome != nil {
		return out, false
	}
	if !op.RecordOutcome {
		return out, true
	}
	if hd.race {
		retry := op
		retry.Replica = (op.Replica + 1) % len(c.sealers)
		if retry.Kind == KindOpen {
			retry.Kind = KindReplay
		} else if retry.Kind == KindFlowOpen {
			retry.Kind = KindFlowReplay
		}
		c.later(0, retry, state)
	}
	run := op
	run.Kind, run.State, run.RecordOutcome, run.Invoked = KindHandler, stateID(state), false, time.Now()
	run.Answer = fmt.Sprintf("paid:%d:%d", op.Client, c.runs.Add(1))
	time.Sleep(hd.runs)
	run.Done, run.Outcome = time.Now(), "OK"
	c.h.Add(run)
	if resp.Recording {
		c.record(run, state)
	}
	return out, true
}

// flow runs a latest-only flow of up to three rounds: each round is opened
// on a random sealer and the next round sealed on the one that opened it;
// one time in three the next round is sealed twice (a fork) and the twin
// opened after it. Every state of the flow is replayed later. One flow in
// two is opened with record_outcome throughout, replays included.
func (c *Clients) flow(id, home int, rng *rand.Rand) {
	record := rng.IntN(2) == 0
	resp, out := c.seal(Op{Client: id, Replica: home, Kind: KindFlowSeal, Round: 1},
		&sealerv1.SealRequest{Ttl: durationpb.New(30 * time.Second), Flow: &sealerv1.FlowRequest{LatestOnly: true}})
	if out != "OK" || resp.Flow == nil {
		return
	}
	flow := base64.RawURLEncoding.EncodeToString(resp.Flow.Id)
	type sealed struct {
		state string
		round int
	}
	all := []sealed{{resp.RequestState, 1}}
	next := []sealed{{resp.RequestState, 1}} // the state to open, then its fork's twin
	for len(next) > 0 {
		var opened *sealed
		at := home
		for i, s := range next {
			kind := KindFlowOpen
			if i > 0 || opened != nil {
				kind = KindFlowReplay // the twin of a fork: its right answer is a refusal
			}
			r := rng.IntN(len(c.sealers))
			op := Op{Client: id, Replica: r, Kind: kind, Flow: flow, Round: s.round, RecordOutcome: record}
			if _, payload := c.serve(op, s.state, newHandling(rng, record)); payload && opened == nil {
				opened, at = &next[i], r
			}
		}
		if opened == nil || opened.round == 3 {
			break
		}
		next = nil
		seals := 1
		if rng.IntN(3) == 0 {
			seals = 2 // a fork
		}
		for range seals {
			resp, out := c.seal(Op{Client: id, Replica: at, Kind: KindFlowSeal, Flow: flow, Round: opened.round + 1},
				&sealerv1.SealRequest{Ttl: durationpb.New(30 * time.Second), Flow: &sealerv1.FlowRequest{Continues: opened.state, LatestOnly: true}})
			if out == "OK" {
				next = append(next, sealed{resp.RequestState, opened.round + 1})
			}
		}
		all = append(all, next...)
	}
	for i, s := range all {
		delays := []time.Duration{longReplays[rng.IntN(len(longReplays))]}
		if i == 0 {
			delays = longReplays // the first round, rewound again and again
		}
		for _, d := range delays {
			c.later(d, Op{Client: id, Replica: rng.IntN(len(c.sealers)), Kind: KindFlowReplay, Flow: flow, Round: s.round,
				RecordOutcome: record}, s.state)
		}
	}
}

// later opens state as op says, d from now; a replay that returns the
// payload with record_outcome (a second handler run: a loss) is handled as
// the first open was.
func (c *Clients) later(d time.Duration, op Op, state string) {
	c.replays.Add(1)
	time.AfterFunc(d, func() {
		defer c.replays.Done()
		c.serve(op, state, handling{record: op.RecordOutcome})
	})
}

// Whole seals and opens a one-time state on sealer replica until the open
// succeeds, for at most limit; it reports whether it did.
func (c *Clients) Whole(replica int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if c.oneTime(-1, replica, 30*time.Second, nil, handling{}) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func (c *Clients) seal(op Op, req *sealerv1.SealRequest) (*sealerv1.SealResponse, string) {
	req.Principal, req.Payload = "alice", []byte("nemesis")
	req.Request = &sealerv1.Binding{Digest: c.digest}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	op.Invoked = time.Now()
	resp, err := c.sealers[op.Replica].Seal(ctx, req)
	op.Done, op.Outcome = time.Now(), Outcome(err)
	if err == nil {
		op.State = stateID(resp.RequestState)
		if resp.Flow != nil {
			op.Flow, op.Round = base64.RawURLEncoding.EncodeToString(resp.Flow.Id), int(resp.Flow.Round)
		}
	}
	c.h.Add(op)
	return resp, op.Outcome
}

func (c *Clients) open(op Op, state string) (*sealerv1.OpenResponse, string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	op.State = stateID(state)
	op.Invoked = time.Now()
	resp, err := c.sealers[op.Replica].Open(ctx, &sealerv1.OpenRequest{RequestState: state, Principal: "alice",
		Request: &sealerv1.Binding{Digest: c.digest}, RecordOutcome: op.RecordOutcome})
	op.Done, op.Outcome = time.Now(), Outcome(err)
	if err == nil && resp.Outcome != nil {
		op.Answer = string(resp.Outcome.Data)
	}
	c.h.Add(op)
	return resp, op.Outcome
}

// record records the answer of the handler run run for state, on the
// sealer that opened it, as an adapter does right after answering.
func (c *Clients) record(run Op, state string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	op := run
	op.Kind, op.Invoked = KindRecord, time.Now()
	_, err := c.sealers[op.Replica].Record(ctx, &sealerv1.RecordRequest{RequestState: state, Outcome: []byte(run.Answer)})
	op.Done, op.Outcome = time.Now(), Outcome(err)
	c.h.Add(op)
}

// stateID is a short name of a requestState for the history.
func stateID(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:6])
}
