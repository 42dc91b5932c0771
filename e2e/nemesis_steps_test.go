package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcp-sealer/sealer/e2e/nemesis"
	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// The figures the clock steps are made of (issue 40). A consumed state's
// ledger entry outlives its expiry by stepsRetention (server's
// ledgerRetention with the default --ledger-timeout); a replica with
// --skew 60s accepts a one-time state of 600 s on a clock 10m50s ahead,
// and round 1 of a flow of 15 minutes on one 14m50s ahead. An entry timed
// from such a clock lived about 71 s (one-time) or 131 s (flow): the
// retries after those lives are what finds a shortened entry.
const (
	stepsRetention = 2*time.Minute + 1500*time.Millisecond
	stepsOnceAhead = 10*time.Minute + 50*time.Second
	stepsFlowAhead = 14*time.Minute + 50*time.Second
	stepsOnceAfter = 75 * time.Second
	stepsFlowAfter = 135 * time.Second
	stepsSweepOver = 17*time.Minute + 30*time.Second // past every entry's until, flows' too
	stepsNemesis   = 9                               // the client id of the nemesis's own calls
)

// stepsConfig is what the environment asks of a run: the sealer binary
// and the seed.
type stepsConfig struct {
	bin     string
	control bool // another binary than the nemesis build of this tree: report, do not fail
	seed    uint64
}

// TestNemesis_ClockSteps (R6, issue 40): sealers whose wall clocks step,
// between two of their clock checks, while clients seal one-time states
// and latest-only flows and open them again and again on seeded-random
// replicas. On one Redis, replica A (the default skew), B (--skew 60s,
// --clock-check=false: an entry's life is all that protects) and C
// (--skew 60s, the check on) step forward to just inside a state's
// acceptance window and open it there at once, back to 0, and back by more
// than the retention, where they open at once states whose entries have
// expired. On the embedded ledger, one replica (--sweep-interval 100ms)
// steps forward far enough for its sweep to delete consumed entries, back
// to 0, and back by more than the retention. The checker holds the
// history to: no one-time state opened twice, no round opened twice or
// after a later one, every refusal typed.
//
// SEALER_NEMESIS_STEPS_SEALER=PATH runs the same schedule against another
// nemesis build (the unsafe control: the code before the fix) and reports
// the double opens instead of failing; SEALER_NEMESIS_STEPS_SEED (default
// 40) changes the schedule.
func TestNemesis_ClockSteps(t *testing.T) {
	testenv.Lane(t, testenv.LaneFailover)
	t.Parallel()
	cfg := stepsConfig{seed: 40}
	if v := os.Getenv("SEALER_NEMESIS_STEPS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SEALER_NEMESIS_STEPS_SEED: %v", err)
		}
		cfg.seed = n
	}
	if path := os.Getenv("SEALER_NEMESIS_STEPS_SEALER"); path != "" {
		cfg.bin, cfg.control = path, true
	} else {
		cfg.bin = nemesisSealer(t)
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		stepsOnRedis(t, cfg)
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		stepsOnEmbedded(t, cfg)
	})
}

// stepsOnRedis: replicas A, B and C on one Redis and one key file.
func stepsOnRedis(t *testing.T, cfg stepsConfig) {
	srv := testredis.Start(t, false)
	keyFile := filepath.Join(t.TempDir(), "keys.json")
	if out, err := exec.Command(cfg.bin, "keygen", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v: %s", err, out)
	}
	common := []string{"--key-file", keyFile, "--ledger", srv.URL()}
	s := startStepped(t, cfg, []string{"A", "B", "C"}, [][]string{
		common,
		append(slices.Clone(common), "--skew", "60s", "--clock-check=false"),
		append(slices.Clone(common), "--skew", "60s"),
	})
	const a, b, c = 0, 1, 2
	rng := rand.New(rand.NewPCG(cfg.seed, 40))

	short, shortSealed := s.shortStates(6)
	stop := s.churn(cfg.seed, 2, []time.Duration{500 * time.Millisecond, 2 * time.Second, 10 * time.Second, stepsOnceAfter}, nil)

	// The flows first: their last retries come stepsFlowAfter later.
	pair := []int{b, c}
	rng.Shuffle(2, func(i, j int) { pair[i], pair[j] = pair[j], pair[i] })
	for _, target := range pair {
		s.forwardFlow(rng, target, false)
	}
	for _, target := range pair {
		s.forwardOnce(rng, target)
	}
	// Until 45 s, so that the last retries (stepsOnceAfter later) are over
	// before A steps back.
	for time.Since(s.began) < 45*time.Second {
		target := pair[rng.IntN(2)]
		switch k := rng.IntN(4); {
		case k == 0:
			s.step(target, 0)
			s.logf("back to 0 on %s", s.names[target])
		case k == 1 && time.Since(s.began) < 10*time.Second:
			s.forwardFlow(rng, target, rng.IntN(2) == 0)
		default:
			s.forwardOnce(rng, target)
		}
		if rng.IntN(2) == 0 {
			s.step(target, 0)
		}
		time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
	}
	stop()
	s.step(b, 0)
	s.step(c, 0)

	// Back by more than the retention, on the replicas with the check on,
	// once the short states' entries have expired on Redis's clock.
	time.Sleep(time.Until(shortSealed.Add(time.Second + stepsRetention + 2*time.Second)))
	s.backBeyond(a, short[:3], shortSealed)
	s.backBeyond(c, short[3:], shortSealed)
	s.c.Wait()
	s.judge(cfg, "Redis (A; B --skew 60s --clock-check=false; C --skew 60s)")
}

// stepsOnEmbedded: one replica on the embedded ledger, sweeping every
// 100 ms.
func stepsOnEmbedded(t *testing.T, cfg stepsConfig) {
	s := startStepped(t, cfg, []string{"E"}, [][]string{{"--sweep-interval", "100ms"}})
	rng := rand.New(rand.NewPCG(cfg.seed, 41))

	short, shortSealed := s.shortStates(6)
	var seen pool
	stop := s.churn(cfg.seed+1, 1, []time.Duration{500 * time.Millisecond, 2 * time.Second, 10 * time.Second, 30 * time.Second}, &seen)
	time.Sleep(3 * time.Second) // states to step over
	for time.Since(s.began) < 60*time.Second {
		switch rng.IntN(4) {
		case 0, 1:
			s.forwardSweep(rng, s.procs[0], &seen)
		case 2:
			picks := seen.pick(rng, 4)
			s.step(0, -(2*time.Minute + 10*time.Second))
			s.logf("back 2m10s on E: retries %v", s.openAll(0, picks, false))
		default:
			s.step(0, 0)
			s.logf("back to 0 on E")
		}
		time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
	}
	stop()
	s.step(0, 0)

	// Back by more than the retention once the sweep, by the real clock
	// too, has deleted the short states' entries.
	time.Sleep(time.Until(shortSealed.Add(time.Second + stepsRetention + 2*time.Second)))
	s.backBeyond(0, short, shortSealed)
	s.c.Wait()
	s.judge(cfg, "embedded (E --sweep-interval 100ms)")
}

// stepper drives the clocks of nemesis builds, each following its own
// offset file, and records their steps as faults.
type stepper struct {
	t     *testing.T
	h     *nemesis.History
	c     *nemesis.Clients
	names []string
	files []string
	procs []*proc
	began time.Time

	offsets []time.Duration
	current []*nemesis.Fault // the step each replica is in, nil before its first
	faults  []nemesis.Fault
}

// startStepped starts one sealer of cfg.bin per name, each with its flags
// and its own clock offset file, and the clients that call them.
func startStepped(t *testing.T, cfg stepsConfig, names []string, flags [][]string) *stepper {
	t.Helper()
	s := &stepper{t: t, names: names, offsets: make([]time.Duration, len(names)), current: make([]*nemesis.Fault, len(names))}
	s.h = &nemesis.History{Run: nemesis.Run{Seed: cfg.seed, Replicas: len(names), Unsafe: cfg.control}}
	dir := t.TempDir()
	var addrs []string
	for i := range names {
		file := filepath.Join(dir, fmt.Sprintf("clock%d", i))
		writeOffset(t, file, 0)
		p := startBinary(t, cfg.bin, []string{"SEALER_NEMESIS_CLOCK_OFFSET_FILE=" + file}, t.TempDir(), flags[i]...)
		s.files, s.procs, addrs = append(s.files, file), append(s.procs, p), append(addrs, p.GRPC)
	}
	s.c = nemesis.NewClients(t, s.h, cfg.seed, addrs)
	s.began = time.Now()
	return s
}

func (s *stepper) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("+%5.1fs %s", time.Since(s.began).Seconds(), fmt.Sprintf(format, args...))
}

// step sets replica i's clock offset to d and returns as soon as the
// replica reads its clock stepped: before its next clock check, which is
// the window this nemesis aims at.
func (s *stepper) step(i int, d time.Duration) {
	s.t.Helper()
	from := s.offsets[i]
	if from == d {
		return
	}
	now := time.Now()
	if f := s.current[i]; f != nil {
		f.Heal = now
		s.faults = append(s.faults, *f)
	}
	writeOffset(s.t, s.files[i], d)
	s.offsets[i] = d
	s.current[i] = &nemesis.Fault{Kind: nemesis.ClockStep, Targets: []string{s.names[i], fmt.Sprintf("%v to %v", from, d)}, Start: now}
	deadline := now.Add(10 * time.Second)
	for {
		at, err := s.c.Clock(i)
		if err == nil && at.Sub(time.Now().Add(d)).Abs() < 5*time.Second {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s does not read its clock stepped to %v within 10s: %v, %v", s.names[i], d, at, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle steps target back to 0, if it is not there, and waits until it
// reports ready, its clock measured right again, so that the next step
// falls between two of its clock checks. It gives up after 5 s without
// failing: whether a replica refuses is for the checker to judge.
func (s *stepper) settle(target int) {
	s.step(target, 0)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, _ := readyz(s.t, s.procs[target]); code == http.StatusOK {
			return
		}
	}
}

// opened is a state the clients sealed: one-time, or a round of a
// latest-only flow.
type opened struct {
	state string
	flow  string // "" for a one-time state
	round int
}

// op is an open of o on replica: its first, or a retry.
func (o opened) op(replica int, first bool) nemesis.Op {
	op := nemesis.Op{Client: stepsNemesis, Replica: replica, Kind: nemesis.KindReplay, Flow: o.flow, Round: o.round}
	switch {
	case o.flow != "" && first:
		op.Kind = nemesis.KindFlowOpen
	case o.flow != "":
		op.Kind = nemesis.KindFlowReplay
	case first:
		op.Kind = nemesis.KindOpen
	}
	return op
}

// sealOnce seals a one-time state of ttl on replica.
func (s *stepper) sealOnce(client, replica int, ttl time.Duration) (opened, bool) {
	resp, out := s.c.Seal(nemesis.Op{Client: client, Replica: replica, Kind: nemesis.KindSeal},
		&sealerv1.SealRequest{OneTime: true, Ttl: durationpb.New(ttl)})
	if out != "OK" {
		return opened{}, false
	}
	return opened{state: resp.RequestState}, true
}

// sealRound seals round 1 of a latest-only flow of 900 s on replica, or
// the round after prev when prev is not nil.
func (s *stepper) sealRound(client, replica int, prev *opened) (opened, bool) {
	req := &sealerv1.SealRequest{Ttl: durationpb.New(900 * time.Second), Flow: &sealerv1.FlowRequest{LatestOnly: true}}
	op := nemesis.Op{Client: client, Replica: replica, Kind: nemesis.KindFlowSeal, Round: 1}
	if prev != nil {
		req.Flow.Continues = prev.state
		op.Flow, op.Round = prev.flow, prev.round+1
	}
	resp, out := s.c.Seal(op, req)
	if out != "OK" || resp.Flow == nil {
		return opened{}, false
	}
	return opened{state: resp.RequestState, flow: base64.RawURLEncoding.EncodeToString(resp.Flow.Id), round: int(resp.Flow.Round)}, true
}

// openAll opens every state on replica at once, and counts the outcomes.
func (s *stepper) openAll(replica int, states []opened, first bool) map[string]int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := map[string]int{}
	for _, o := range states {
		wg.Go(func() {
			out := s.c.Open(o.op(replica, first), o.state)
			mu.Lock()
			got[out]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

// other is a replica other than i, at random.
func (s *stepper) other(rng *rand.Rand, i int) int {
	return (i + 1 + rng.IntN(len(s.names)-1)) % len(s.names)
}

// jitter is up to 3 s, at random.
func jitter(rng *rand.Rand) time.Duration { return time.Duration(rng.IntN(3000)) * time.Millisecond }

// shortStates seals and opens, on replica 0, n one-time states of a
// second: a clock stepped back by more than the retention, once their
// entries are gone, accepts them again. It returns them and when they were
// sealed.
func (s *stepper) shortStates(n int) ([]opened, time.Time) {
	sealed := time.Now()
	var states []opened
	for range n {
		o, ok := s.sealOnce(stepsNemesis, 0, time.Second)
		if !ok {
			s.t.Fatalf("sealing a short state on %s: refused", s.names[0])
		}
		states = append(states, o)
	}
	s.logf("%d short states (1 s) opened on %s: %v", len(states), s.names[0], s.openAll(0, states, true))
	return states, sealed
}

// forwardOnce seals two one-time states of 600 s on A, steps target to
// just inside their acceptance window and opens them there at once, then
// retries them on the others, the last ones after the life of an entry
// timed from the stepped clock.
func (s *stepper) forwardOnce(rng *rand.Rand, target int) {
	s.settle(target)
	var states []opened
	for range 2 {
		if o, ok := s.sealOnce(stepsNemesis, 0, 600*time.Second); ok {
			states = append(states, o)
		}
	}
	s.step(target, stepsOnceAhead)
	s.logf("one-time of 600 s opened on %s stepped %v: %v", s.names[target], stepsOnceAhead, s.openAll(target, states, true))
	for _, o := range states {
		s.c.Later(time.Second, o.op(s.other(rng, target), false), o.state)
		s.c.Later(stepsOnceAfter+jitter(rng), o.op(0, false), o.state)
		s.c.Later(stepsOnceAfter+jitter(rng), o.op(s.other(rng, target), false), o.state)
	}
}

// forwardFlow seals round 1 of a latest-only flow on A, steps target to
// just inside the flow's deadline and opens the round there at once; when
// advance, round 2 is sealed and opened on A. Every round is retried on
// the others, the last retries after the life of an entry timed from the
// stepped clock.
func (s *stepper) forwardFlow(rng *rand.Rand, target int, advance bool) {
	s.settle(target)
	r1, ok := s.sealRound(stepsNemesis, 0, nil)
	if !ok {
		return
	}
	s.step(target, stepsFlowAhead)
	got := s.openAll(target, []opened{r1}, true)
	rounds := []opened{r1}
	if advance && got["OK"] == 1 {
		if r2, ok := s.sealRound(stepsNemesis, 0, &r1); ok {
			s.openAll(0, []opened{r2}, true)
			rounds = append(rounds, r2)
		}
	}
	s.logf("flow round 1 opened on %s stepped %v: %v (%d rounds)", s.names[target], stepsFlowAhead, got, len(rounds))
	for _, o := range rounds {
		s.c.Later(time.Second, o.op(s.other(rng, target), false), o.state)
		s.c.Later(stepsFlowAfter+jitter(rng), o.op(0, false), o.state)
		s.c.Later(stepsFlowAfter+jitter(rng), o.op(s.other(rng, target), false), o.state)
	}
}

// backBeyond steps target back to when the short states were sealed, by
// more than the retention, opens them there at once, and steps it back to
// 0 (where the flows' last retries find A).
func (s *stepper) backBeyond(target int, states []opened, sealed time.Time) {
	d := -time.Since(sealed).Truncate(time.Second)
	s.step(target, d)
	s.logf("short states retried on %s stepped %v: %v", s.names[target], d, s.openAll(target, states, false))
	s.step(target, 0)
}

// forwardSweep steps the embedded replica far enough ahead that its sweep
// deletes the entries of consumed states, retries some there, steps back
// to 0 and retries them again at once.
func (s *stepper) forwardSweep(rng *rand.Rand, p *proc, seen *pool) {
	picks := seen.pick(rng, 4)
	before := sweptTotal(p)
	s.step(0, stepsSweepOver)
	// The code before the fix swept by the real clock: it never sweeps
	// here, and the wait ends without it.
	deadline := time.Now().Add(3 * time.Second)
	for sweptTotal(p) == before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	swept := sweptTotal(p) - before
	ahead := s.openAll(0, picks, false)
	s.step(0, 0)
	s.logf("E stepped %v (swept %v entries): retries %v; back to 0 at once: %v", stepsSweepOver, swept, ahead, s.openAll(0, picks, false))
}

// sweptTotal is sealer_ledger_swept_total, or -1 when not read.
func sweptTotal(p *proc) float64 {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + p.HTTP + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "sealer_ledger_swept_total "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// pool is the states the clients opened OK, for the nemesis to retry.
type pool struct {
	mu     sync.Mutex
	states []opened
}

func (p *pool) add(o opened) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.states = append(p.states, o)
	p.mu.Unlock()
}

// pick returns up to n states of the pool at random.
func (p *pool) pick(rng *rand.Rand, n int) []opened {
	p.mu.Lock()
	defer p.mu.Unlock()
	var picks []opened
	for range min(n, len(p.states)) {
		picks = append(picks, p.states[rng.IntN(len(p.states))])
	}
	return picks
}

// churn runs workers that seal one-time states of 600 s and latest-only
// flows of 900 s on seeded-random replicas, open them on others, retry
// each twice later (after delays of retries) and add what opened to
// seen, until the returned stop is called.
func (s *stepper) churn(seed uint64, workers int, retries []time.Duration, seen *pool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for id := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(id)+1))
			for {
				select {
				case <-done:
					return
				default:
				}
				states := s.churnOnce(rng, id, seen)
				n := len(s.names)
				for _, o := range states {
					for range 2 {
						s.c.Later(retries[rng.IntN(len(retries))], o.op(rng.IntN(n), false), o.state)
					}
				}
				time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// churnOnce seals and opens one one-time state, or up to two rounds of a
// flow, and returns what it sealed.
func (s *stepper) churnOnce(rng *rand.Rand, id int, seen *pool) []opened {
	n := len(s.names)
	if rng.IntN(2) == 0 {
		o, ok := s.sealOnce(id, rng.IntN(n), 600*time.Second)
		if !ok {
			return nil
		}
		if s.c.Open(o.op(rng.IntN(n), true), o.state) == "OK" {
			seen.add(o)
		}
		return []opened{o}
	}
	var rounds []opened
	at := rng.IntN(n)
	o, ok := s.sealRound(id, at, nil)
	for ok {
		rounds = append(rounds, o)
		at = rng.IntN(n)
		if s.c.Open(o.op(at, true), o.state) != "OK" {
			break
		}
		seen.add(o)
		if o.round == 2 || rng.IntN(2) == 0 {
			break
		}
		o, ok = s.sealRound(id, at, &o)
	}
	return rounds
}

// judge records the steps, checks the history and reports the figures: a
// violation fails the test, but for the control, which reports them.
func (s *stepper) judge(cfg stepsConfig, what string) {
	t := s.t
	end := time.Now()
	for _, f := range s.current {
		if f != nil {
			f.Heal = end
			s.faults = append(s.faults, *f)
		}
	}
	slices.SortFunc(s.faults, func(a, b nemesis.Fault) int { return a.Start.Compare(b.Start) })
	for _, f := range s.faults {
		s.h.AddFault(f)
	}
	r := nemesis.Check(s.h)
	mode := "as shipped (the nemesis build of this tree)"
	if cfg.control {
		mode = "CONTROL " + filepath.Base(cfg.bin)
	}
	t.Logf("%s, seed %d, %s, %d clock steps: %s; double opens: one-time %d, flow round %d; rounds opened after a later one %d; bad refusals %d; indeterminate %d",
		what, cfg.seed, mode, len(s.faults), nemesis.CountOpens(s.h), r.OneTimeDouble, r.RoundDouble, r.StaleRounds, r.BadRefusals, r.Indeterminate)
	if len(r.Violations) > 0 {
		s.save()
	}
	if doubles := doublesByReplicas(r, s.names); len(doubles) > 0 {
		t.Logf("double opens by the replicas that opened them: %v", doubles)
	}
	for _, v := range r.Violations[:min(len(r.Violations), 20)] {
		if cfg.control && v.Rule != "refusal" { // a loss the control is expected to show
			t.Log(v)
		} else {
			t.Error(v)
		}
	}
	if r.Outcomes["OK"] == 0 {
		t.Error("no operation succeeded")
	}
}

// doublesByReplicas counts the states and rounds opened more than once by
// the replicas of their OK opens, in order ("C A": opened on C, then on A).
func doublesByReplicas(r *nemesis.Result, names []string) map[string]int {
	n := map[string]int{}
	for _, v := range r.Violations {
		if v.Rule != "one-time opened twice" && v.Rule != "round opened twice" {
			continue
		}
		var by []string
		for _, op := range v.Ops {
			by = append(by, names[op.Replica])
		}
		n[strings.Join(by, " ")]++
	}
	return n
}

// save writes the history as JSON lines, for SEALER_NEMESIS_REPLAY.
func (s *stepper) save() {
	dir, err := os.MkdirTemp("", "sealer-nemesis-steps-")
	if err == nil {
		var f *os.File
		path := filepath.Join(dir, "history.jsonl")
		if f, err = os.Create(path); err == nil {
			err = s.h.WriteJSONL(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err == nil {
			s.t.Logf("history saved: SEALER_NEMESIS_REPLAY=%s go test -run TestNemesis_AtMostOnce", path)
			return
		}
	}
	s.t.Logf("saving the history: %v", err)
}
