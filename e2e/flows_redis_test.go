package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// flowsACL is the Cluster ACL of the Redis HA tests with what latest-only
// flows add: the ledger's scripts (EVALSHA, EVAL) and the commands they run
// (GET, PTTL, SET, DEL) on the flows' keys.
var flowsACL = append(clusterACL[:len(clusterACL):len(clusterACL)], "~sealer:v1:flow:*", "+evalsha", "+eval", "+get", "+pttl")

// flowKey is the Redis key of a flow's highest opened round (ledger/redis).
func flowKey(t *testing.T, tenant, id string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(id)
	if err != nil || len(raw) != 16 {
		t.Fatalf("flow id %q: %v", id, err)
	}
	return fmt.Sprintf("sealer:v1:flow:%d:%s:%x", len(tenant), tenant, raw)
}

// trackedFlow is one latest-only flow of the failover test: every state
// sealed for it, and the one its server retries next.
type trackedFlow struct {
	id     string
	mu     sync.Mutex
	latest string
	rounds map[string]int // state -> round
}

// older returns every state of f but the one its server retries next, in
// the order of their rounds.
func (f *trackedFlow) older() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var states []string
	for st := range f.rounds {
		if st != f.latest {
			states = append(states, st)
		}
	}
	slices.SortFunc(states, func(a, b string) int { return f.rounds[a] - f.rounds[b] })
	return states
}

// flowWatch drives flows through a fleet and counts what opened.
type flowWatch struct {
	callers []api
	mu      sync.Mutex
	wins    map[string]int            // flow id and round -> opens that succeeded
	phases  map[string]map[string]int // phase -> call and outcome -> count
	order   []string                  // phases in order
}

func (w *flowWatch) record(phase, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.phases[phase] == nil {
		w.phases[phase] = map[string]int{}
		w.order = append(w.order, phase)
	}
	w.phases[phase][what]++
}

// open opens state through caller i and records a success.
func (w *flowWatch) open(t *testing.T, i int, f *trackedFlow, state, phase, what string) (flowInfo, string) {
	resp, reason := w.callers[i%len(w.callers)].call(t, "open", openBody(state, "alice", weatherParams))
	w.record(phase, what+" "+reason)
	if reason != "OK" {
		return flowInfo{}, reason
	}
	fi := flowOf(t, resp)
	w.mu.Lock()
	w.wins[fmt.Sprintf("%s round %d", f.id, fi.round)]++
	w.mu.Unlock()
	return fi, reason
}

// wave is one attack on a flow: 32 callers at once over the fleet, three
// in four retrying the state the flow's server would retry next (each that
// opens it sealing the next round as its continuation), one in four
// rewinding to an earlier state of the flow.
func (w *flowWatch) wave(t *testing.T, f *trackedFlow, phase string) {
	older := f.older()
	f.mu.Lock()
	latest := f.latest
	f.mu.Unlock()
	var next []string
	var mu sync.Mutex
	concurrently(32, func(i int) string {
		if i%4 == 3 && len(older) > 0 {
			_, r := w.open(t, i, f, older[i%len(older)], phase, "rewind")
			return r
		}
		fi, r := w.open(t, i, f, latest, phase, "retry")
		if r != "OK" {
			return r
		}
		resp, sr := w.callers[(i+1)%len(w.callers)].call(t, "seal", sealBody("alice", weatherParams, "x", `,"flow":`+flowJSON(latest, true)))
		w.record(phase, "seal "+sr)
		if sr == "OK" {
			mu.Lock()
			next = append(next, resp["requestState"].(string))
			mu.Unlock()
			f.mu.Lock()
			f.rounds[resp["requestState"].(string)] = fi.round + 1
			f.mu.Unlock()
		}
		return r
	})
	if len(next) > 0 {
		f.mu.Lock()
		f.latest = next[0]
		f.mu.Unlock()
	}
}

// rewinds retries every earlier state of a flow at once over the fleet.
func (w *flowWatch) rewinds(t *testing.T, f *trackedFlow, phase string) {
	older := f.older()
	concurrently(len(older), func(i int) string {
		_, r := w.open(t, i, f, older[i], phase, "rewind")
		return r
	})
}

// flowsOn seals round 1 of latest-only flows until n of them have their
// ledger key on master.
func (w *flowWatch) flowsOn(t *testing.T, c *testredis.Cluster, master *testredis.Server, n int) []*trackedFlow {
	t.Helper()
	var flows []*trackedFlow
	for tries := 0; len(flows) < n; tries++ {
		if tries == 30*n {
			t.Fatalf("%d flows and fewer than %d of them on one master", tries, n)
		}
		resp, r := w.callers[0].call(t, "seal", sealBody("alice", weatherParams, "x", `,"flow":`+flowJSON("", true)))
		if r != "OK" {
			t.Fatalf("round 1: %s", r)
		}
		f := flowOf(t, resp)
		if c.MasterOf(t, flowKey(t, "default", f.id)) == master {
			st := resp["requestState"].(string)
			flows = append(flows, &trackedFlow{id: f.id, latest: st, rounds: map[string]int{st: 1}})
		}
	}
	return flows
}

// doubles lists the rounds that opened more than once.
func (w *flowWatch) doubles() []string {
	var doubles []string
	for k, n := range w.wins {
		if n > 1 {
			doubles = append(doubles, fmt.Sprintf("%s: %d", k, n))
		}
	}
	slices.Sort(doubles)
	return doubles
}

// TestFlows_R6_R9_RedisClusterFailover: two sealers on a Redis Cluster
// (three masters, a replica each) drive four latest-only flows whose
// ledger key is on one master, in waves of 32 callers at once that retry
// each flow's next round (each that opens it sealing the round after) and
// rewind to its earlier rounds. The master is killed mid-flow; from the
// kill until a second after its replica serves its slots, every earlier
// state is retried over and over; then again, with waves, after the
// failover and once the old master is back as a replica. A round that
// opens twice is a fork or a rewind that won: with --ledger-replicas 1
// none may, whether replication was healthy or lagging (cut) at the kill;
// with 0, the test reports what the failover lost.
func TestFlows_R6_R9_RedisClusterFailover(t *testing.T) {
	testenv.Lane(t, testenv.LaneFailover)
	for _, tc := range []struct {
		replicas int
		cut      bool
	}{{1, false}, {1, true}, {0, false}, {0, true}} {
		replication := "healthy"
		if tc.cut {
			replication = "cut"
		}
		t.Run(fmt.Sprintf("ledger-replicas=%d/replication %s", tc.replicas, replication), func(t *testing.T) {
			flowsFailover(t, tc.replicas, tc.cut)
		})
	}
}

func flowsFailover(t *testing.T, replicas int, cut bool) {
	c := testredis.StartCluster(t, 3, 1, flowsACL...)
	url := "redis+cluster://sealer:s3cret-pw@" + c.Nodes[0].Addr + "?addr=" + c.Nodes[1].Addr + "&addr=" + c.Nodes[2].Addr
	ps := fleet(t, 2, url, "--ledger-timeout", "1s", "--ledger-replicas", fmt.Sprint(replicas), "--max-rounds", "1000")
	w := &flowWatch{callers: []api{newGRPC(t, ps[0]), newREST(ps[1]), newGRPC(t, ps[1]), newREST(ps[0])},
		wins: map[string]int{}, phases: map[string]map[string]int{}}

	victim := c.Masters(t)[0]
	flows := w.flowsOn(t, c, victim, 4)
	forEach := func(run func(f *trackedFlow)) {
		var wg sync.WaitGroup
		for _, f := range flows {
			wg.Go(func() { run(f) })
		}
		wg.Wait()
	}

	forEach(func(f *trackedFlow) {
		for range 3 {
			w.wave(t, f, "1 before the failover")
		}
	})
	for _, f := range flows {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := victim.Client(t).Exists(ctx, flowKey(t, "default", f.id)).Result()
		cancel()
		if err != nil || n != 1 {
			t.Fatalf("flow %s: its key is not on the master to be killed (%d, %v; the opens: %v): the test would prove nothing", f.id, n, err, w.phases["1 before the failover"])
		}
	}

	// attack runs attack on each flow, over and over, until the returned
	// stop is called.
	attack := func(attack func(f *trackedFlow)) (stop func()) {
		done := make(chan struct{})
		var wg sync.WaitGroup
		for _, f := range flows {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					attack(f)
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		return func() { close(done); wg.Wait() }
	}
	if cut {
		c.CutReplication(t)
	}
	stop := attack(func(f *trackedFlow) { w.wave(t, f, "2 the last second before the kill") })
	time.Sleep(time.Second)
	stop()
	// From the kill to a second after the cluster serves every slot again,
	// every earlier state of each flow is retried, over and over. No new
	// round opens meanwhile: a round the failover lost opens again here.
	replica := c.ReplicaOf(t, victim)
	stop = attack(func(f *trackedFlow) { w.rewinds(t, f, "3 during the failover") })
	killed := time.Now()
	victim.Kill(t)
	testredis.WaitRole(t, replica, "master")
	c.WaitHealthy(t)
	promoted := time.Since(killed)
	time.Sleep(time.Second)
	stop()

	// rewindAll retries every earlier state of each flow, in the order of
	// their rounds, from two callers at once, waiting out LEDGER_UNAVAILABLE
	// while the fleet finds the new master (up to within); then a wave.
	rewindAll := func(phase string, within time.Duration, waves int) {
		deadline := time.Now().Add(within)
		forEach(func(f *trackedFlow) {
			for _, st := range f.older() {
				for {
					got := concurrently(2, func(i int) string {
						_, r := w.open(t, i, f, st, phase, "rewind")
						return r
					})
					if got["LEDGER_UNAVAILABLE"] == 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			for range waves {
				w.wave(t, f, phase)
			}
		})
	}
	// With --ledger-replicas 1 the new master, alone, accepts no new round
	// (LEDGER_UNAVAILABLE) until the old one is back as its replica.
	rewindAll("4 after the failover", 5*time.Second, 1)
	victim.Restart(t)
	testredis.WaitLinked(t, victim)
	c.WaitHealthy(t)
	const back = "5 the old master back as a replica"
	rewindAll(back, 20*time.Second, 3)

	doubles := w.doubles()
	t.Logf("--ledger-replicas %d, replication %v at the kill; the replica served the master's slots %.2fs after the kill", replicas, map[bool]string{true: "cut", false: "healthy"}[cut], promoted.Seconds())
	for _, phase := range w.order {
		t.Logf("  %s: %v", phase, w.phases[phase])
	}
	t.Logf("rounds of the %d flows opened: %d; opened more than once: %d %v", len(flows), len(w.wins), len(doubles), doubles[:min(len(doubles), 4)])
	for phase, outcomes := range w.phases {
		for what, n := range outcomes {
			if !strings.HasSuffix(what, " OK") && !strings.HasSuffix(what, " ALREADY_CONSUMED") && !strings.HasSuffix(what, " LEDGER_UNAVAILABLE") {
				t.Errorf("%s: %d calls %s; want OK, ALREADY_CONSUMED or LEDGER_UNAVAILABLE only", phase, n, what)
			}
		}
	}
	if replicas == 0 && cut && len(doubles) == 0 {
		t.Errorf("without --ledger-replicas, the rounds opened while replication was cut were not opened again after the failover: the test would not see a lost round")
	}
	if replicas > 0 && len(doubles) > 0 {
		t.Errorf("with --ledger-replicas %d, %d rounds opened more than once (%v); want none", replicas, len(doubles), doubles)
	}
	if w.phases[back]["retry OK"] < len(flows) {
		t.Errorf("with the old master back as a replica: %v; want each flow to go on", w.phases[back])
	}
}
