package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// docs/OPERATIONS.md's ACL user for the ledger, password s3cret-pw, with what
// --ledger-replicas needs (WAIT, and DEL to undo an unacknowledged consume)
// and what a Cluster client needs (CLUSTER SLOTS, COMMAND).
var (
	haACL      = []string{"--user", "sealer", "on", ">s3cret-pw", "~sealer:v1:consumed:*", "+evalsha", "+eval", "+set", "+ping", "+time", "+wait", "+del"}
	clusterACL = append(haACL[:len(haACL):len(haACL)], "+cluster|slots", "+command")
)

// sentinelURL is the ledger URL of s: the master's ACL user in the user
// info, the Sentinels' own password as a parameter.
func sentinelURL(s *testredis.Sentinel) string {
	a := s.Addrs()
	return fmt.Sprintf("redis+sentinel://sealer:s3cret-pw@%s/0?addr=%s&addr=%s&master=%s&sentinel_password=sentinel-pw",
		a[0], a[1], a[2], testredis.MasterName)
}

func grpcCallers(t *testing.T, ps []*proc) []api {
	var callers []api
	for _, p := range ps {
		callers = append(callers, newGRPC(t, p))
	}
	return callers
}

// outcome is one one-time open of the load, and when it returned.
type outcome struct {
	at     time.Time
	reason string
}

// underLoad runs four workers that each seal a one-time state on one
// replica and open it on the next, until fault has returned (the moment it
// broke something) and, after it, a whole second of opens all succeeded
// (waited for up to 30 s). It reports the opens' failures, the span of
// LEDGER_UNAVAILABLE from the fault to the last one, and fails the test on
// any other failure or if opens do not work again after the fault.
func underLoad(t *testing.T, callers []api, fault func() time.Time) {
	t.Helper()
	stop := make(chan struct{})
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i += 4 {
				select {
				case <-stop:
					return
				default:
				}
				resp, reason := callers[i%len(callers)].call(t, "seal", sealBody("alice", weatherParams, "x", `,"oneTime":true`))
				if reason == "OK" {
					_, reason = callers[(i+1)%len(callers)].call(t, "open", openBody(resp["requestState"].(string), "alice", weatherParams))
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{time.Now(), reason})
				mu.Unlock()
			}
		})
	}
	// Stopped also when fault or the wait below ends the test: the workers
	// call through t.
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()
	brokeAt := fault()
	healed := time.Now()
	waitFor(t, "a second of the load with every open OK after the fault", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		since := time.Now().Add(-time.Second)
		if since.Before(healed) {
			return false
		}
		n := 0
		for _, o := range outcomes {
			if o.at.After(since) {
				if o.reason != "OK" {
					return false
				}
				n++
			}
		}
		return n > 0
	})
	stopLoad()

	counts := map[string]int{}
	var last time.Time
	for _, o := range outcomes {
		counts[o.reason]++
		if o.reason != "OK" && o.at.After(last) {
			last = o.at
		}
	}
	unavailableFor := time.Duration(0)
	if !last.IsZero() {
		unavailableFor = last.Sub(brokeAt)
	}
	t.Logf("failover under load: %d one-time open pairs, %d failed %v, LEDGER_UNAVAILABLE until %.2fs after the kill",
		len(outcomes), len(outcomes)-counts["OK"], counts, unavailableFor.Seconds())
	for reason, n := range counts {
		if reason != "OK" && reason != "LEDGER_UNAVAILABLE" {
			t.Errorf("%d opens failed with %s; only LEDGER_UNAVAILABLE is expected across a failover", n, reason)
		}
	}
	// After the fault is healed, opens work again: the last second's all do.
	tail := 0
	for _, o := range outcomes {
		if o.at.After(outcomes[len(outcomes)-1].at.Add(-time.Second)) {
			tail++
			if o.reason != "OK" {
				t.Errorf("an open in the last second of the load failed with %s: the fleet did not recover", o.reason)
			}
		}
	}
	if tail == 0 {
		t.Error("no open in the last second of the load")
	}
}

// TestRedisHA_Sentinel: three sealers on one Sentinel deployment (primary,
// replica, three Sentinels, the master's ACL user and the Sentinels' own
// password both in the URL). A one-time state has exactly one winner; when
// the primary is killed under load, the fleet follows the promotion and
// only LEDGER_UNAVAILABLE is seen, for a bounded time.
func TestRedisHA_Sentinel(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	s := testredis.StartSentinel(t, testredis.SentinelOptions{Args: haACL, Password: "sentinel-pw"})
	callers := grpcCallers(t, fleet(t, 3, sentinelURL(s), "--ledger-timeout", "300ms"))
	oneWinner(t, callers)
	underLoad(t, callers, func() time.Time {
		time.Sleep(time.Second)
		killed := time.Now()
		s.Primary.Kill(t)
		t.Logf("Sentinels promoted the replica %.2fs after the primary was killed", s.WaitPromoted(t, killed).Seconds())
		return killed
	})
}

// TestRedisHA_Cluster: three sealers on a three-master Cluster with one
// replica each, with docs/OPERATIONS.md's Cluster ACL. A one-time state has exactly
// one winner; when a master is killed under load, its replica takes over
// and only LEDGER_UNAVAILABLE is seen, for a bounded time.
func TestRedisHA_Cluster(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	c := testredis.StartCluster(t, 3, 1, clusterACL...)
	url := "redis+cluster://sealer:s3cret-pw@" + c.Nodes[0].Addr + "?addr=" + c.Nodes[1].Addr + "&addr=" + c.Nodes[2].Addr
	callers := grpcCallers(t, fleet(t, 3, url, "--ledger-timeout", "300ms"))
	oneWinner(t, callers)
	underLoad(t, callers, func() time.Time {
		time.Sleep(time.Second)
		killed := c.FailOverAMaster(t)
		t.Logf("the killed master's replica serves its slots %.2fs after the kill", time.Since(killed).Seconds())
		return killed
	})
}

// TestRedisHA_FailoverDoubleOpens measures what --ledger-replicas is for,
// on Sentinel and on Cluster. Twenty one-time states are opened with
// replication healthy, then the replicas' links are cut (their replication
// user disabled on the primary and their connections closed: the primary's
// later writes wait in its backlog, as for a lagging replica), twenty more
// are opened, and the primary (on Cluster, one master) is killed at once.
// After the replica is promoted, every state that was opened is opened
// again: each OK is a state opened twice. Without the option the
// consumptions still in the backlog are lost; with --ledger-replicas 1 a
// consume the replica did not acknowledge was refused, so none can be.
func TestRedisHA_FailoverDoubleOpens(t *testing.T) {
	testenv.Lane(t, testenv.LaneFailover)
	type deployment struct {
		url      string
		cut      func()
		failover func() time.Duration // kills a primary, returns when its replica took over
	}
	deployments := map[string]func(t *testing.T) deployment{
		"sentinel": func(t *testing.T) deployment {
			s := testredis.StartSentinel(t, testredis.SentinelOptions{Args: haACL, Password: "sentinel-pw"})
			return deployment{sentinelURL(s), func() { s.CutReplication(t) }, func() time.Duration {
				killed := time.Now()
				s.Primary.Kill(t)
				return s.WaitPromoted(t, killed)
			}}
		},
		"cluster": func(t *testing.T) deployment {
			c := testredis.StartCluster(t, 3, 1, clusterACL...)
			return deployment{"redis+cluster://sealer:s3cret-pw@" + c.Nodes[0].Addr, func() { c.CutReplication(t) }, func() time.Duration {
				return time.Since(c.FailOverAMaster(t))
			}}
		},
	}
	for _, name := range []string{"sentinel", "cluster"} {
		for _, replicas := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/ledger-replicas=%d", name, replicas), func(t *testing.T) {
				d := deployments[name](t)
				doubleOpens(t, d.url, replicas, d.cut, d.failover)
			})
		}
	}
}

func doubleOpens(t *testing.T, url string, replicas int, cut func(), failover func() time.Duration) {
	// WAIT gets half the ledger timeout: 500ms, so that a replica's
	// acknowledgement is not late on a loaded machine (at 150ms, 9 of 20
	// healthy opens were once refused in CI).
	callers := grpcCallers(t, fleet(t, 3, url, "--ledger-timeout", "1s", "--ledger-replicas", fmt.Sprint(replicas)))
	var healthy, lagged []string
	for range 20 {
		healthy = append(healthy, mustSeal(t, callers[0], sealBody("alice", weatherParams, "x", `,"oneTime":true`)))
		lagged = append(lagged, mustSeal(t, callers[0], sealBody("alice", weatherParams, "x", `,"oneTime":true`)))
	}
	openAll := func(states []string) map[string]string {
		got := map[string]string{}
		var mu sync.Mutex
		concurrently(len(states), func(i int) string {
			_, reason := callers[i%len(callers)].call(t, "open", openBody(states[i], "alice", weatherParams))
			mu.Lock()
			got[states[i]] = reason
			mu.Unlock()
			return reason
		})
		return got
	}
	first := openAll(healthy)
	if c := count(first); c["OK"] != len(healthy) {
		t.Fatalf("open with replication healthy: %v, want all OK", c)
	}
	cut()
	laggedFirst := openAll(lagged)
	promoted := failover()
	for st, r := range laggedFirst {
		first[st] = r
	}

	// Open again every state that opened, waiting out LEDGER_UNAVAILABLE
	// while the fleet finds the new primary.
	again := map[string]string{}
	deadline := time.Now().Add(20 * time.Second)
	for st, reason := range first {
		if reason != "OK" {
			continue
		}
		for {
			_, reason := callers[0].call(t, "open", openBody(st, "alice", weatherParams))
			if reason != "LEDGER_UNAVAILABLE" || time.Now().After(deadline) {
				again[st] = reason
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	doubles := count(again)["OK"]
	t.Logf("--ledger-replicas %d: opens before the kill: %v with replication healthy, %v with it cut; "+
		"replica promoted %.2fs after the kill; opened a second time after the failover: %d of %d (%v)",
		replicas, count(pick(first, healthy)), count(laggedFirst), promoted.Seconds(), doubles, len(again), count(again))
	if replicas > 0 && doubles != 0 {
		t.Errorf("with --ledger-replicas %d, %d states opened twice across the failover; want 0", replicas, doubles)
	}
	for st, reason := range again {
		if reason != "OK" && reason != "ALREADY_CONSUMED" {
			t.Errorf("open again after the failover: %s (first: %s)", reason, first[st])
		}
	}
}

// count counts the reasons of a map of outcomes.
func count(m map[string]string) map[string]int {
	c := map[string]int{}
	for _, r := range m {
		c[r]++
	}
	return c
}

// pick keeps the outcomes of keys.
func pick(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// TestRedisHA_PasswordFileRotation: a sealer reads --ledger-password-file
// again, so a rotated Redis password works without a restart: one-time
// opens are LEDGER_UNAVAILABLE while Redis refuses the file's password
// (WRONGPASS) and work again once the file holds the new one.
func TestRedisHA_PasswordFileRotation(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	srv := testredis.Start(t, false, haACL...)
	file := filepath.Join(t.TempDir(), "redis-pw")
	write := func(pw string) {
		if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("s3cret-pw")
	p := fleet(t, 1, "redis://sealer@"+srv.Addr+"/0", "--ledger-password-file", file, "--ledger-timeout", "300ms")[0]
	a := newGRPC(t, p)
	open := func() string {
		st := mustSeal(t, a, sealBody("alice", weatherParams, "x", `,"oneTime":true`))
		_, reason := a.call(t, "open", openBody(st, "alice", weatherParams))
		return reason
	}
	if got := open(); got != "OK" {
		t.Fatalf("before the rotation: %s", got)
	}
	ctx := context.Background()
	admin := srv.Client(t)
	if err := admin.Do(ctx, "acl", "setuser", "sealer", "resetpass", ">n3w-pw").Err(); err != nil {
		t.Fatal(err)
	}
	admin.Do(ctx, "client", "kill", "user", "sealer")
	// The first open may meet a connection the server closed.
	if got, again := open(), open(); got != "LEDGER_UNAVAILABLE" || again != "LEDGER_UNAVAILABLE" {
		t.Fatalf("Redis refuses the file's password: got %s then %s, want LEDGER_UNAVAILABLE", got, again)
	}
	write("n3w-pw")
	if got := open(); got != "OK" {
		t.Fatalf("after the file holds the new password: %s, want OK without a restart", got)
	}
	for _, pw := range []string{"s3cret-pw", "n3w-pw"} {
		if strings.Contains(p.logs.String(), pw) {
			t.Errorf("the sealer's log shows the password %s", pw)
		}
	}
}
