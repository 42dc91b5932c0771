package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// fleet starts n sealers sharing one key file and the Redis ledger at url.
func fleet(t *testing.T, n int, url string, flags ...string) []*proc {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "keys.json")
	if out, err := runSealer("keygen", keyFile); err != nil {
		t.Fatalf("keygen: %v: %s", err, out)
	}
	var ps []*proc
	for range n {
		ps = append(ps, start(t, t.TempDir(), append([]string{"--key-file", keyFile, "--ledger", url}, flags...)...))
	}
	return ps
}

// TestFleet_R6_R10_OneTimeAcrossReplicas: three real sealers share one key
// file and one Redis. A state sealed on one opens on any other (R10); a
// one-time state opened by 30 concurrent callers spread over the three
// succeeds exactly once (R6).
func TestFleet_R6_R10_OneTimeAcrossReplicas(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	redisSrv := testredis.Start(t, false)
	ps := fleet(t, 3, redisSrv.URL())
	var callers []api
	for _, p := range ps {
		callers = append(callers, newGRPC(t, p), newREST(p))
	}

	state := mustSeal(t, callers[0], sealBody("alice", weatherParams, "anywhere", ""))
	for i, a := range callers {
		if _, got := a.call(t, "open", openBody(state, "alice", weatherParams)); got != "OK" {
			t.Errorf("R10: replica %d opens a state sealed by replica 0: got %s, want OK", i/2, got)
		}
	}

	oneWinner(t, callers)
}

// oneWinner opens one one-time state from 30 concurrent callers spread
// over every replica, three times, and wants exactly one OK each time.
func oneWinner(t *testing.T, callers []api) {
	t.Helper()
	for round := range 3 {
		once := mustSeal(t, callers[0], sealBody("alice", weatherParams, "once", `,"oneTime":true`))
		reasons := concurrently(30, func(i int) string {
			_, reason := callers[i%len(callers)].call(t, "open", openBody(once, "alice", weatherParams))
			return reason
		})
		if reasons["OK"] != 1 || reasons["ALREADY_CONSUMED"] != 29 {
			t.Fatalf("round %d: got %v, want 1 OK and 29 ALREADY_CONSUMED", round, reasons)
		}
	}
}

// TestFleet_RedisFaults: with Redis stopped, one-time opens fail closed with
// LEDGER_UNAVAILABLE (how soon is logged), while seals and ordinary opens
// go on; the failed state is not lost. With Redis back, one-time opens work
// again without restarting the sealer. A Redis restarted with persistence
// still refuses a state consumed before the restart.
func TestFleet_RedisFaults(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	redisSrv := testredis.Start(t, true)
	p := fleet(t, 1, redisSrv.URL(), "--ledger-timeout", "300ms")[0]
	for name, a := range apis(t, p) {
		t.Run(name, func(t *testing.T) {
			consumed := mustSeal(t, a, sealBody("alice", weatherParams, "x", `,"oneTime":true`))
			expectReason(t, a, "open", openBody(consumed, "alice", weatherParams), "OK")
			pending := mustSeal(t, a, sealBody("alice", weatherParams, "x", `,"oneTime":true`))
			expectReady(t, p, http.StatusOK)

			redisSrv.Stop(t)
			// A stopped Redis refuses connections: the answer comes at once
			// (the call's own deadline bounds it; no test times it).
			began := time.Now()
			expectReason(t, a, "open", openBody(pending, "alice", weatherParams), "LEDGER_UNAVAILABLE")
			t.Logf("LEDGER_UNAVAILABLE after %v, with --ledger-timeout 300ms", time.Since(began).Round(time.Millisecond))
			ordinary := mustSeal(t, a, sealBody("alice", weatherParams, "x", ""))
			expectReason(t, a, "open", openBody(ordinary, "alice", weatherParams), "OK")
			waitProbes(t, p, http.StatusOK, "ledger: redis unreachable") // seals and ordinary opens work: stay in rotation

			redisSrv.Restart(t)
			expectReason(t, a, "open", openBody(pending, "alice", weatherParams), "OK")
			expectReason(t, a, "open", openBody(pending, "alice", weatherParams), "ALREADY_CONSUMED")
			expectReason(t, a, "open", openBody(consumed, "alice", weatherParams), "ALREADY_CONSUMED")
			waitProbes(t, p, http.StatusOK, "ledger: redis reachable")
		})
	}
	t.Run("ledger a condition of readiness when asked", func(t *testing.T) {
		q := start(t, t.TempDir(), "--ledger", redisSrv.URL(), "--ready-requires-ledger")
		waitProbes(t, q, http.StatusOK, "ledger: redis reachable")
		redisSrv.Stop(t)
		waitProbes(t, q, http.StatusServiceUnavailable, "not ready: ledger unreachable")
		redisSrv.Restart(t)
		waitProbes(t, q, http.StatusOK, "ledger: redis reachable")
	})
}

// expectReady checks the status of /readyz.
func expectReady(t *testing.T, p *proc, want int) {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTP + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("/readyz: got %d, want %d", resp.StatusCode, want)
	}
}

// TestFleet_SIGKILLReplicaLosesNoState: three replicas sharing a key file
// serve cross-replica Seal+Open pairs; one is killed with SIGKILL mid-run.
// A client that retries on the next replica sees no failure, and every state
// the killed replica sealed still opens on the others (R10).
func TestFleet_SIGKILLReplicaLosesNoState(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	ps := fleet(t, 3, "embedded")
	var states []string
	for range 5 {
		states = append(states, mustSeal(t, newGRPC(t, ps[1]), sealBody("alice", weatherParams, "x", "")))
	}
	callers := []api{newGRPC(t, ps[0]), newGRPC(t, ps[1]), newGRPC(t, ps[2])}
	// call tries replica i, then the next ones while a replica cannot be reached.
	call := func(i int, method, body string) (map[string]any, string) {
		var resp map[string]any
		var reason string
		for k := range len(callers) {
			if resp, reason = callers[(i+k)%len(callers)].call(t, method, body); !strings.HasPrefix(reason, "NO_ERROR_INFO:Unavailable") {
				break
			}
		}
		return resp, reason
	}
	stop := make(chan struct{})
	var failures []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, reason := call(i, "seal", sealBody("alice", weatherParams, "x", ""))
				if reason == "OK" {
					_, reason = call(i+1, "open", openBody(resp["requestState"].(string), "alice", weatherParams))
				}
				if reason != "OK" {
					mu.Lock()
					failures = append(failures, reason)
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(time.Second)
	ps[1].cmd.Process.Kill()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failed pairs across the SIGKILL: %v", len(failures), failures[:min(5, len(failures))])
	}
	for _, st := range states {
		expectReason(t, newREST(ps[2]), "open", openBody(st, "alice", weatherParams), "OK")
	}
}
