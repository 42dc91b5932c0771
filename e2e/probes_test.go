package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // client-side health checking
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// readyz returns the status and body of p's /readyz.
func readyz(t *testing.T, p *proc) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTP + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// grpcHealth returns what p's gRPC health service says of service name.
func grpcHealth(t *testing.T, p *proc, name string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(dialGRPC(t, p.GRPC)).Check(ctx, &healthpb.HealthCheckRequest{Service: name})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.Status
}

// waitProbes waits until /readyz answers code with a body holding text, and
// gRPC health gives the same answer for "" and sealer.v1.Sealer.
func waitProbes(t *testing.T, p *proc, code int, text string) {
	t.Helper()
	want := healthpb.HealthCheckResponse_SERVING
	if code != http.StatusOK {
		want = healthpb.HealthCheckResponse_NOT_SERVING
	}
	var last string
	waitFor(t, fmt.Sprintf("/readyz %d %q and gRPC health %v", code, text, want), 10*time.Second, func() bool {
		c, body := readyz(t, p)
		h1, h2 := grpcHealth(t, p, ""), grpcHealth(t, p, "sealer.v1.Sealer")
		last = fmt.Sprintf("/readyz %d %q, health %v %v", c, body, h1, h2)
		return c == code && strings.Contains(body, text) && h1 == want && h2 == want
	})
	t.Logf("probes: %s", last)
}

// startReady starts a sealer and waits until both probes say ready: a
// sealer on Vault listens before its first keys load.
func startReady(t *testing.T, dataDir string, flags ...string) *proc {
	t.Helper()
	p := start(t, dataDir, flags...)
	waitProbes(t, p, http.StatusOK, "ready\n")
	return p
}

// TestProbes_StartupWhileVaultHangs: a sealer whose Vault accepts
// connections but never answers listens at once; liveness says ok, and
// both readiness probes say not ready, with one answer, until Vault answers.
func TestProbes_StartupWhileVaultHangs(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	v, _, tokenFile := vaultForSealer(t)
	hang := newProxy(t, strings.TrimPrefix(v.Addr, "http://"))
	hang.stall()
	began := time.Now()
	p := start(t, t.TempDir(), "--keys", "vault-transit", "--vault-addr", "http://"+hang.addr,
		"--vault-token-file", tokenFile, "--vault-transit-key", "sealer", "--key-poll", "200ms")
	t.Logf("listening %v after start, with Vault hanging", time.Since(began).Round(time.Millisecond))
	if body := httpGet(t, "http://"+p.HTTP+"/livez"); body != "ok\n" {
		t.Errorf("/livez: %q", body)
	}
	waitProbes(t, p, http.StatusServiceUnavailable, "not ready: no keys loaded yet")
	hang.resume()
	waitProbes(t, p, http.StatusOK, "ready\n")
}

// TestShutdown_ReadinessFailsFirst: on SIGTERM both probes turn not ready at
// once, calls go on succeeding for --shutdown-delay, then the sealer stops
// accepting and exits 0. The calls stop 2 s after the signal, 4 s before
// the delay ends: room for a loaded machine's slow probes and calls.
func TestShutdown_ReadinessFailsFirst(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	p := start(t, t.TempDir(), "--shutdown-delay", "6s")
	g := newGRPC(t, p)
	waitProbes(t, p, http.StatusOK, "ready")
	sent := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	waitProbes(t, p, http.StatusServiceUnavailable, "not ready: shutting down")
	flipped := time.Since(sent)
	calls := 0
	for calls == 0 || time.Since(sent) < 2*time.Second {
		if time.Since(sent) > 5*time.Second {
			t.Fatalf("%d calls in the 5 s after SIGTERM: the machine is too slow to tell the 6 s delay", calls)
		}
		expectReason(t, g, "seal", sealBody("alice", weatherParams, "x", ""), "OK")
		calls++
	}
	select {
	case <-p.exited:
		t.Fatal("exited within the shutdown delay")
	default:
	}
	if err := p.waitExit(t); err != nil {
		t.Fatalf("exit: %v, want 0", err)
	}
	t.Logf("readiness false %v after SIGTERM; %d calls served during the delay; exited %v after SIGTERM",
		flipped.Round(time.Millisecond), calls, time.Since(sent).Round(time.Millisecond))
	for _, want := range []string{`"msg":"not ready: shutting down"`, `"msg":"draining"`, `"msg":"stopped"`} {
		// The exit may be seen before the last lines are read from its stderr.
		waitFor(t, "log line "+want, 5*time.Second, func() bool { return strings.Contains(p.logs.String(), want) })
	}
}

// retryingClient is a gRPC client of several replicas as a production
// client would be configured: round robin over the replicas that are
// connected and whose health says SERVING, and a retry of UNAVAILABLE.
func retryingClient(t *testing.T, addrs []string) sealerv1.SealerClient {
	t.Helper()
	r := manual.NewBuilderWithScheme("replicas")
	var state resolver.State
	for _, a := range addrs {
		state.Endpoints = append(state.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	r.InitialState(state)
	conn, err := grpc.NewClient("replicas:///sealer", grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{
		  "loadBalancingConfig": [{"round_robin": {}}],
		  "healthCheckConfig": {"serviceName": "sealer.v1.Sealer"},
		  "methodConfig": [{"name": [{"service": "sealer.v1.Sealer"}], "retryPolicy": {
		    "maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "0.5s", "backoffMultiplier": 2,
		    "retryableStatusCodes": ["UNAVAILABLE"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sealerv1.NewSealerClient(conn)
}

// TestFleet_RollingRestartLosesNoCall restarts three replicas one after
// the other, as a Deployment's rolling update does (SIGTERM, wait for the
// exit, start the new one on the same ports, wait until it is ready), under
// a steady load of Seal+Open pairs from a client that balances over the
// healthy replicas and retries UNAVAILABLE. Not one call may fail.
func TestFleet_RollingRestartLosesNoCall(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	redisSrv := testredis.Start(t, false)
	flags := []string{"--shutdown-delay", "1s", "--shutdown-grace", "5s"}
	ps := fleet(t, 3, redisSrv.URL(), flags...)
	keyFile := ps[0].cmd.Args[indexOf(ps[0].cmd.Args, "--key-file")+1]
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.GRPC)
		waitProbes(t, p, http.StatusOK, "ready")
	}
	client := retryingClient(t, addrs)

	var ok, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := sealThenOpen(client, fmt.Sprint(w, i), i%4 == 0); err != nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				} else {
					ok.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second)
	for i, p := range ps {
		began := time.Now()
		before := ok.Load()
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("replica %d exit: %v", i, err)
		}
		ps[i] = start(t, t.TempDir(), append([]string{"--key-file", keyFile, "--ledger", redisSrv.URL(),
			"--grpc-addr", p.GRPC, "--http-addr", p.HTTP}, flags...)...)
		waitProbes(t, ps[i], http.StatusOK, "ready")
		t.Logf("replica %d restarted in %v; %d pairs meanwhile", i, time.Since(began).Round(time.Millisecond), ok.Load()-before)
		// The client reconnects before the next one goes.
		waitFor(t, fmt.Sprintf("the client to call the restarted replica %d", i), 30*time.Second, func() bool {
			return callsServed(t, ps[i]) > 0
		})
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("rolling restart of 3 replicas: %d Seal+Open pairs succeeded, %d failed", ok.Load(), failed.Load())
	if failed.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("%d failed pairs (first: %v), %d succeeded; want none failed", failed.Load(), failures[:min(5, len(failures))], ok.Load())
	}
}

// callsServed is the sum of p's sealer_calls_total.
func callsServed(t *testing.T, p *proc) float64 {
	t.Helper()
	var n float64
	for _, line := range strings.Split(httpGet(t, "http://"+p.HTTP+"/metrics"), "\n") {
		if !strings.HasPrefix(line, "sealer_calls_total{") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			n += v
		}
	}
	return n
}

// sealThenOpen seals a state (one-time when asked) and opens it, each call
// with its own deadline, as a client of the balanced replicas.
func sealThenOpen(client sealerv1.SealerClient, payload string, oneTime bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sreq := &sealerv1.SealRequest{}
	if err := protojson.Unmarshal([]byte(sealBody("alice", weatherParams, payload, map[bool]string{true: `,"oneTime":true`}[oneTime])), sreq); err != nil {
		return err
	}
	sresp, err := client.Seal(ctx, sreq)
	if err != nil {
		return fmt.Errorf("seal: %v", status.Convert(err).Message())
	}
	oreq := &sealerv1.OpenRequest{}
	if err := protojson.Unmarshal([]byte(openBody(sresp.RequestState, "alice", weatherParams)), oreq); err != nil {
		return err
	}
	if _, err := client.Open(ctx, oreq); err != nil {
		return fmt.Errorf("open: %v", status.Convert(err).Message())
	}
	return nil
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestShutdown_AHealthWatcherDoesNotHoldTheDrain: a client watching gRPC
// health sees NOT_SERVING when the sealer starts shutting down, and its
// stream ends when the listeners stop, so the drain does not wait for it
// until the grace runs out (which would cut in-flight calls short).
func TestShutdown_AHealthWatcherDoesNotHoldTheDrain(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	p := start(t, t.TempDir(), "--shutdown-delay", "500ms", "--shutdown-grace", "10s")
	stream, err := healthpb.NewHealthClient(dialGRPC(t, p.GRPC)).Watch(context.Background(), &healthpb.HealthCheckRequest{Service: "sealer.v1.Sealer"})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := stream.Recv(); err != nil || first.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch answer: %v, %v; want SERVING", first, err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	var seen []healthpb.HealthCheckResponse_ServingStatus
	for {
		resp, err := stream.Recv()
		if err != nil {
			break // the stream ended with the server
		}
		seen = append(seen, resp.Status)
	}
	exitErr := p.waitExit(t)
	if len(seen) == 0 || seen[len(seen)-1] != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("the watcher saw %v after SIGTERM; want NOT_SERVING", seen)
	}
	waitFor(t, `the "stopped" log line`, 5*time.Second, func() bool { return strings.Contains(p.logs.String(), `"msg":"stopped"`) })
	if strings.Contains(p.logs.String(), "drain cut short") {
		t.Fatal("the drain was cut short: the watch stream held it for the whole grace")
	}
	if exitErr != nil {
		t.Fatalf("exit: %v, want 0", exitErr)
	}
}
