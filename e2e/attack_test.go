package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// The attacks of a review of the sealer, each against the real binary.

// expiryEdge seals one-time states of 1 s, opens each once, then fires
// racers Opens of it spread evenly over its deadline (expiry + skew) ± 6 ms,
// and counts the outcomes of the racers.
func expiryEdge(t *testing.T, p *proc, skew time.Duration, states, racers int) map[string]int {
	t.Helper()
	client := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	binding := &sealerv1.Binding{Digest: make([]byte, 32)}
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for i := range states {
		time.Sleep(40 * time.Millisecond) // spread the states' deadlines
		resp, err := client.Seal(context.Background(), &sealerv1.SealRequest{Principal: "alice", Request: binding,
			Payload: []byte("once"), OneTime: true, Ttl: durationpb.New(time.Second)})
		if err != nil {
			t.Fatalf("seal %d: %v", i, err)
		}
		open := &sealerv1.OpenRequest{RequestState: resp.RequestState, Principal: "alice", Request: binding}
		if _, err := client.Open(context.Background(), open); err != nil {
			t.Fatalf("first open of state %d: %v", i, err)
		}
		deadline := resp.ExpiresAt.AsTime().Add(skew)
		for j := range racers {
			at := deadline.Add(-6*time.Millisecond + time.Duration(j)*12*time.Millisecond/time.Duration(racers-1))
			wg.Go(func() {
				time.Sleep(time.Until(at))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				reason := "OK"
				if _, err := client.Open(ctx, open); err != nil {
					reason = reasonOf(t, status.Convert(err))
				}
				mu.Lock()
				outcomes[reason]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return outcomes
}

// checkEdge runs edge, a round of expiryEdge, and holds its outcomes to no
// replay. The racers must straddle the deadline for the edge to be tested:
// on a loaded machine all of a round's may come late, so rounds run again,
// up to five, until some came before it and some after.
func checkEdge(t *testing.T, edge func() map[string]int) {
	t.Helper()
	outcomes := map[string]int{}
	for round := 1; ; round++ {
		for r, n := range edge() {
			outcomes[r] += n
		}
		t.Logf("racers around the expiry edge, after round %d: %v", round, outcomes)
		if outcomes["OK"] != 0 {
			t.Fatalf("%d replays of consumed one-time states opened at the expiry edge; want 0", outcomes["OK"])
		}
		if outcomes["ALREADY_CONSUMED"] > 0 && outcomes["EXPIRED"] > 0 {
			break
		}
		if round == 5 {
			t.Fatalf("outcomes %v after %d rounds: the racers did not straddle the deadline; the edge was not tested", outcomes, round)
		}
	}
	for r := range outcomes {
		if r != "ALREADY_CONSUMED" && r != "EXPIRED" {
			t.Errorf("%d racers got %s, want ALREADY_CONSUMED or EXPIRED", outcomes[r], r)
		}
	}
}

// TestAttack_R6_NoReplayAtTheExpiryEdge_Redis: a consumed one-time state
// never opens again around its deadline, with Redis 5 ms of round trip away
// (through a proxy that delays each way by 2.5 ms).
func TestAttack_R6_NoReplayAtTheExpiryEdge_Redis(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	redisSrv := testredis.Start(t, false)
	slow := newDelayProxy(t, redisSrv.Addr, 2500*time.Microsecond)
	p := start(t, t.TempDir(), "--ledger", "redis://"+slow.addr+"/0", "--skew", "100ms")
	checkEdge(t, func() map[string]int { return expiryEdge(t, p, 100*time.Millisecond, 20, 48) })
}

// TestAttack_R6_NoReplayAtTheExpiryEdge_Embedded: the same with the
// embedded ledger swept every 2 ms.
func TestAttack_R6_NoReplayAtTheExpiryEdge_Embedded(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := start(t, t.TempDir(), "--sweep-interval", "2ms", "--skew", "100ms")
	checkEdge(t, func() map[string]int { return expiryEdge(t, p, 100*time.Millisecond, 20, 48) })
}

// peakRSS returns the peak resident memory of a process (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// nullMembers returns a params object of n null members, as JSON text.
func nullMembers(n int) string {
	var b strings.Builder
	b.WriteString(`{"name":"x","arguments":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%06d":null`, i)
	}
	b.WriteString("}}")
	return b.String()
}

// TestAttack_UnauthenticatedBodiesCostNothing: 40 concurrent 3 MB REST
// bodies and 40 concurrent 1.9 MB gRPC messages, none with credentials,
// are refused before they are read: the sealer's peak resident memory
// stays under 256 MiB.
func TestAttack_UnauthenticatedBodiesCostNothing(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, "tenants:\n  team:\n    tokens: [\""+tokenHash("team-token")+"\"]\n")
	p := start(t, dir, "--tenants", tenants)
	const limit = 256 << 20

	body := sealBody("mallory", nullMembers(210_000), "x", "") // about 2.9 MB
	restReasons := concurrently(40, func(int) string {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.HTTP+"/v1/seal", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "TRANSPORT"
		}
		resp.Body.Close()
		return strconv.Itoa(resp.StatusCode)
	})
	restPeak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("REST, 40 x %.1f MB unauthenticated: %v, peak resident %d MiB", float64(len(body))/1e6, restReasons, restPeak>>20)
	if restReasons["401"] == 0 {
		t.Errorf("REST: %v, want 401 refusals", restReasons)
	}

	var fields = map[string]*structpb.Value{}
	for i := range 135_000 { // about 1.9 MB
		fields[fmt.Sprintf("%06d", i)] = structpb.NewNullValue()
	}
	args := &structpb.Struct{Fields: fields}
	params := &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("x"), "arguments": structpb.NewStructValue(args)}}
	req := &sealerv1.SealRequest{Principal: "mallory", Request: &sealerv1.Binding{Method: "tools/call", Params: params}}
	client := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	grpcReasons := concurrently(40, func(int) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := client.Seal(ctx, req)
		return reasonOf(t, status.Convert(err))
	})
	grpcPeak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("gRPC, 40 x %.1f MB unauthenticated: %v, peak resident %d MiB", float64(proto.Size(req))/1e6, grpcReasons, grpcPeak>>20)
	if grpcReasons["UNAUTHENTICATED"] != 40 {
		t.Errorf("gRPC: %v, want 40 UNAUTHENTICATED", grpcReasons)
	}
	if restPeak > limit || grpcPeak > limit {
		t.Fatalf("peak resident memory %d MiB after REST, %d MiB after gRPC; want under %d MiB", restPeak>>20, grpcPeak>>20, limit>>20)
	}
	if strings.Count(p.logs.String(), "unauthenticated calls refused") > 10 {
		t.Errorf("80 refusals in a few seconds logged more than a line a second:\n%s", p.logs)
	}
}

// TestAttack_VaultStallKeyMissesLeaveOtherTenantsAlone: while Vault hangs,
// tenant a keeps 64 opens of forged states naming key version 0xFFFFFFFF
// going (each caller pausing 20 ms between answers, so the calls that wait
// are what counts, not their rate); tenant b's seals and opens all succeed,
// with only 64 calls in flight allowed.
func TestAttack_VaultStallKeyMissesLeaveOtherTenantsAlone(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	v, _, tokenFile := vaultForSealer(t)
	hang := newProxy(t, strings.TrimPrefix(v.Addr, "http://"))
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, "tenants:\n  a:\n    tokens: [\""+tokenHash("token-a")+"\"]\n  b:\n    tokens: [\""+tokenHash("token-b")+"\"]\n")
	p := startReady(t, dir, "--tenants", tenants, "--max-in-flight", "64", "--keys", "vault-transit",
		"--vault-addr", "http://"+hang.addr, "--vault-token-file", tokenFile, "--vault-transit-key", "sealer", "--key-poll", "200ms")
	a := grpcAPI{client: sealerv1.NewSealerClient(dialGRPC(t, p.GRPC)), token: "token-a"}
	b := grpcAPI{client: sealerv1.NewSealerClient(dialGRPC(t, p.GRPC)), token: "token-b"}
	forged := forgeKeyVersion(t, mustSeal(t, a, sealBody("alice", weatherParams, "x", "")), 0xFFFFFFFF)

	hang.stall()
	time.Sleep(500 * time.Millisecond) // the poller now hangs too
	stop := make(chan struct{})
	var flood sync.WaitGroup
	for range 64 {
		flood.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer token-a"), 5*time.Second)
				a.client.Open(ctx, &sealerv1.OpenRequest{RequestState: forged, Principal: "alice",
					Request: &sealerv1.Binding{Method: "tools/call", Params: mustStruct(t, weatherParams)}})
				cancel()
				time.Sleep(20 * time.Millisecond) // a flood of waiting calls, not of calls per second

			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	ok, failed := 0, map[string]int{}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		resp, reason := b.call(t, "seal", sealBody("bob", weatherParams, "y", ""))
		if reason == "OK" {
			_, reason = b.call(t, "open", openBody(resp["requestState"].(string), "bob", weatherParams))
		}
		if reason == "OK" {
			ok++
		} else {
			failed[reason]++
		}
	}
	close(stop)
	hang.resume()
	flood.Wait()
	t.Logf("tenant b during the stall: %d seal+open pairs succeeded, failures %v", ok, failed)
	if len(failed) > 0 || ok == 0 {
		t.Fatalf("tenant b: %d pairs succeeded, failures %v; want every one to succeed", ok, failed)
	}
}

func mustStruct(t *testing.T, js string) *structpb.Struct {
	t.Helper()
	s := &structpb.Struct{}
	mustUnmarshal(t, js, s)
	return s
}

// forgeKeyVersion rewrites the key version of a state's public header.
func forgeKeyVersion(t *testing.T, state string, version uint32) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		t.Fatal(err)
	}
	raw[1], raw[2], raw[3], raw[4] = byte(version>>24), byte(version>>16), byte(version>>8), byte(version)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// TestAttack_SmallerFindings: the lesser holes of the review, each closed.
func TestAttack_SmallerFindings(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, "tenants:\n  team:\n    tokens: [\""+tokenHash("team-token")+"\"]\n")
	audit := filepath.Join(dir, "audit.jsonl")
	redisSrv := testredis.Start(t, false)
	p := start(t, dir, "--tenants", tenants, "--audit-log", audit, "--ledger", redisSrv.URL())
	client := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	grpcWith := func(authorization ...string) string {
		ctx := context.Background()
		for _, a := range authorization {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a)
		}
		_, err := client.Seal(ctx, &sealerv1.SealRequest{Principal: "p", Request: &sealerv1.Binding{Digest: make([]byte, 32)}})
		if err == nil {
			return "OK"
		}
		return reasonOf(t, status.Convert(err))
	}
	restWith := func(authorization ...string) string {
		_, reason := restAPI{base: "http://" + p.HTTP, client: http.DefaultClient,
			header: http.Header{"Authorization": authorization}}.call(t, "seal", sealBody("p", weatherParams, "x", ""))
		return reason
	}

	t.Run("the hash of the empty token is refused at start", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "tenants.yaml")
		writeFile(t, bad, "tenants:\n  team:\n    tokens: [\""+tokenHash("")+"\"]\n")
		out, err := runSealer("serve", "--data-dir", t.TempDir(), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--tenants", bad)
		if err == nil || !strings.Contains(out, "empty string") {
			t.Fatalf("got %v, %q; want a refusal naming the empty token", err, out)
		}
	})
	for _, tc := range []struct {
		name          string
		authorization []string
		want          string
	}{
		{"bearer in lower case", []string{"bearer team-token"}, "OK"},
		{"empty bearer token", []string{"Bearer "}, "UNAUTHENTICATED"},
		{"the token twice", []string{"Bearer team-token", "Bearer team-token"}, "UNAUTHENTICATED"},
		{"another scheme", []string{"Basic team-token"}, "UNAUTHENTICATED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := grpcWith(tc.authorization...); got != tc.want {
				t.Errorf("gRPC: got %s, want %s", got, tc.want)
			}
			if got := restWith(tc.authorization...); got != tc.want {
				t.Errorf("REST: got %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("a second, non-ASCII Authorization header is refused, not dropped", func(t *testing.T) {
		if got := restWith("Bearer team-token", "Bearer caf\xc3\xa9"); got != "UNAUTHENTICATED" {
			t.Errorf("REST: got %s, want UNAUTHENTICATED", got)
		}
	})
	t.Run("unauthenticated calls are counted, not audited, not echoed", func(t *testing.T) {
		state := mustSeal(t, grpcAPI{client: client, token: "team-token"}, sealBody("p", weatherParams, "x", ""))
		forged := forgeKeyVersion(t, state, 0x0BADC0DE)
		before := unauthenticatedTotals(t, p)
		for _, a := range []api{grpcAPI{client: client}, restAPI{base: "http://" + p.HTTP, client: http.DefaultClient}} {
			for range 10 {
				resp, reason := a.call(t, "open", openBody(forged, "p", weatherParams))
				if reason != "UNAUTHENTICATED" || strings.Contains(fmt.Sprint(resp), forged[:20]) {
					t.Fatalf("got %s %v, want UNAUTHENTICATED without the caller's bytes", reason, resp)
				}
			}
		}
		after := unauthenticatedTotals(t, p)
		for _, transport := range []string{"grpc", "rest"} {
			if n := after[transport] - before[transport]; n != 10 {
				t.Errorf("sealer_unauthenticated_total{transport=%q} grew by %v, want 10", transport, n)
			}
		}
		p.stop(t, syscall.SIGTERM)
		data, err := os.ReadFile(audit)
		if err != nil {
			t.Fatal(err)
		}
		// Authenticated: the two lower-case bearer seals and the seal above.
		if n := strings.Count(string(data), `"msg":"audit"`); n != 3 || strings.Contains(string(data), "UNAUTHENTICATED") {
			t.Errorf("audit log:\n%s\nwant the 3 authenticated seals only", data)
		}
		waitFor(t, "a log line of the refusals", 5*time.Second, func() bool {
			return strings.Contains(p.logs.String(), "unauthenticated calls refused")
		})
		if n := strings.Count(p.logs.String(), "unauthenticated calls refused"); n > 5 {
			t.Errorf("%d log lines for 20 refusals within a second; want them sampled to a few", n)
		}
	})
	t.Run("/readyz names no internals", func(t *testing.T) {
		q := start(t, t.TempDir(), "--tenants", tenants, "--ledger", redisSrv.URL(), "--ready-requires-ledger")
		redisSrv.Stop(t)
		want := "not ready: ledger unreachable\nledger: redis unreachable (one-time opens fail)\n"
		waitFor(t, "/readyz to say the ledger is down", 5*time.Second, func() bool {
			code, body := readyz(t, q)
			return code == http.StatusServiceUnavailable && body == want
		})
	})
}

// unauthenticatedTotals reads sealer_unauthenticated_total by transport.
func unauthenticatedTotals(t *testing.T, p *proc) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(httpGet(t, "http://"+p.HTTP+"/metrics"), "\n") {
		for _, transport := range []string{"grpc", "rest"} {
			if v, ok := strings.CutPrefix(line, `sealer_unauthenticated_total{transport="`+transport+`"} `); ok {
				out[transport], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out
}
