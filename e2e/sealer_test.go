package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
)

const (
	weatherParams = `{"name":"get_weather","arguments":{"location":"New York","days":3}}`
	retryParams   = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}},
		"name":"get_weather","arguments":{"days":3.0,"location":"New York"},
		"inputResponses":{"github_login":{"action":"accept","content":{"name":"octocat"}}},"requestState":"%s"}`
)

// secrets collects what must never appear in the sealer's logs.
type secrets struct {
	mu     sync.Mutex
	values []string
}

func (s *secrets) add(v ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = append(s.values, v...)
}

func sealBody(principal, params, payload, extra string) string {
	return fmt.Sprintf(`{"principal":%q,"request":{"method":"tools/call","params":%s},"payload":%q%s}`,
		principal, params, base64.StdEncoding.EncodeToString([]byte(payload)), extra)
}

func openBody(state, principal, params string) string {
	return fmt.Sprintf(`{"requestState":%q,"principal":%q,"request":{"method":"tools/call","params":%s}}`, state, principal, params)
}

func mustSeal(t *testing.T, a api, body string) string {
	t.Helper()
	resp, reason := a.call(t, "seal", body)
	if reason != "OK" {
		t.Fatalf("seal: got %s, want OK", reason)
	}
	state, _ := resp["requestState"].(string)
	if state == "" {
		t.Fatalf("seal: no requestState in %v", resp)
	}
	if _, err := time.Parse(time.RFC3339, resp["expiresAt"].(string)); err != nil {
		t.Fatalf("seal: expiresAt: %v", err)
	}
	return state
}

func expectReason(t *testing.T, a api, method, body, want string) map[string]any {
	t.Helper()
	resp, reason := a.call(t, method, body)
	if reason != want {
		t.Fatalf("%s: got %s, want %s (%v)", method, reason, want, resp)
	}
	return resp
}

func apis(t *testing.T, p *proc) map[string]api {
	return map[string]api{"gRPC": newGRPC(t, p), "REST": newREST(p)}
}

func TestSealer_EndToEnd(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	p := start(t, dir, "--skew", "100ms", "--sweep-interval", "200ms")
	var sec secrets
	for name, a := range apis(t, p) {
		t.Run(name, func(t *testing.T) {
			principal := "alice-" + name + "@example.com"
			payload := "payload-" + name + "-9f2c"
			sec.add(principal, payload, base64.StdEncoding.EncodeToString([]byte(payload)))
			state := mustSeal(t, a, sealBody(principal, weatherParams, payload, `,"ttl":"300s"`))
			sec.add(state)

			t.Run("R10 open with the retry's params", func(t *testing.T) {
				resp := expectReason(t, a, "open", openBody(state, principal, fmt.Sprintf(retryParams, state)), "OK")
				got, _ := base64.StdEncoding.DecodeString(resp["payload"].(string))
				if string(got) != payload {
					t.Fatalf("payload: got %q, want %q", got, payload)
				}
				for _, f := range []string{"issuedAt", "expiresAt"} {
					if _, err := time.Parse(time.RFC3339, resp[f].(string)); err != nil {
						t.Errorf("%s: %v", f, err)
					}
				}
			})
			t.Run("R2 tampered state", func(t *testing.T) {
				tampered := state[:40] + map[bool]string{true: "B", false: "A"}[state[40] == 'A'] + state[41:]
				expectReason(t, a, "open", openBody(tampered, principal, weatherParams), "INVALID_STATE")
			})
			t.Run("R1 garbage state", func(t *testing.T) {
				expectReason(t, a, "open", openBody("not a state at all", principal, weatherParams), "INVALID_STATE")
			})
			t.Run("R3 another principal", func(t *testing.T) {
				expectReason(t, a, "open", openBody(state, "mallory", weatherParams), "PRINCIPAL_MISMATCH")
			})
			t.Run("R5 other arguments", func(t *testing.T) {
				expectReason(t, a, "open", openBody(state, principal, `{"name":"get_weather","arguments":{"location":"Boston","days":3}}`), "REQUEST_MISMATCH")
			})
			t.Run("R5 other tool", func(t *testing.T) {
				expectReason(t, a, "open", openBody(state, principal, `{"name":"delete_repo","arguments":{"location":"New York","days":3}}`), "REQUEST_MISMATCH")
			})
			t.Run("R4 expired", func(t *testing.T) {
				short := mustSeal(t, a, sealBody(principal, weatherParams, payload, `,"ttl":"1s"`))
				time.Sleep(1200 * time.Millisecond)
				expectReason(t, a, "open", openBody(short, principal, weatherParams), "EXPIRED")
			})
			t.Run("custom digest binding", func(t *testing.T) {
				d := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("d", 32)))
				other := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("e", 32)))
				st := mustSeal(t, a, fmt.Sprintf(`{"principal":%q,"request":{"digest":%q},"payload":""}`, principal, d))
				expectReason(t, a, "open", fmt.Sprintf(`{"requestState":%q,"principal":%q,"request":{"digest":%q}}`, st, principal, d), "OK")
				expectReason(t, a, "open", fmt.Sprintf(`{"requestState":%q,"principal":%q,"request":{"digest":%q}}`, st, principal, other), "REQUEST_MISMATCH")
			})
			t.Run("R6 a rejected open does not consume a one-time state", func(t *testing.T) {
				st := mustSeal(t, a, sealBody(principal, weatherParams, payload, `,"oneTime":true`))
				expectReason(t, a, "open", openBody(st, "mallory", weatherParams), "PRINCIPAL_MISMATCH")
				expectReason(t, a, "open", openBody(st, principal, `{"name":"get_weather","arguments":{}}`), "REQUEST_MISMATCH")
				expectReason(t, a, "open", openBody(st, principal, weatherParams), "OK")
				expectReason(t, a, "open", openBody(st, principal, weatherParams), "ALREADY_CONSUMED")
			})
			t.Run("invalid arguments", func(t *testing.T) {
				for _, tc := range []struct{ name, method, body string }{
					{"R9 unsupported method", "seal", `{"principal":"a","request":{"method":"tools/list","params":{}},"payload":""}`},
					{"R9 unsupported method on open", "open", fmt.Sprintf(`{"requestState":%q,"principal":"a","request":{"method":"initialize","params":{}}}`, state)},
					{"missing principal", "seal", sealBody("", weatherParams, "x", "")},
					{"missing principal on open", "open", openBody(state, "", weatherParams)},
					{"missing request", "seal", `{"principal":"a","payload":""}`},
					{"digest and method", "seal", fmt.Sprintf(`{"principal":"a","request":{"method":"tools/call","params":%s,"digest":"AAAA"},"payload":""}`, weatherParams)},
					{"short digest", "seal", `{"principal":"a","request":{"digest":"AAAA"},"payload":""}`},
					{"oversize payload", "seal", sealBody("a", weatherParams, strings.Repeat("x", 64<<10+1), "")},
					{"oversize principal", "seal", sealBody(strings.Repeat("p", 1025), weatherParams, "x", "")},
					{"ttl above the maximum", "seal", sealBody("a", weatherParams, "x", `,"ttl":"3601s"`)},
					{"ttl below the minimum", "seal", sealBody("a", weatherParams, "x", `,"ttl":"0.5s"`)},
					{"no tool name", "seal", sealBody("a", `{"arguments":{}}`, "x", "")},
				} {
					t.Run(tc.name, func(t *testing.T) { expectReason(t, a, tc.method, tc.body, "INVALID_ARGUMENT") })
				}
			})
		})
	}

	t.Run("REST malformed JSON", func(t *testing.T) {
		r := newREST(p)
		for _, body := range []string{`{`, `{"principal":"a","unknownField":1}`, `[]`,
			`{"principal":"a","request":{"method":"tools/call","params":{"name":"x","name":"y"}},"payload":""}`} {
			expectReason(t, r, "seal", body, "INVALID_ARGUMENT")
		}
	})
	t.Run("REST oversize body", func(t *testing.T) {
		expectReason(t, newREST(p), "seal", sealBody("a", `{"name":"x","_meta":"`+strings.Repeat("m", 4<<20)+`"}`, "", ""), "INVALID_ARGUMENT")
	})

	t.Run("health, readiness and metrics", func(t *testing.T) {
		hc := healthpb.NewHealthClient(dialGRPC(t, p.GRPC))
		for _, svc := range []string{"", "sealer.v1.Sealer"} {
			resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health %q: got %v, %v; want SERVING", svc, resp, err)
			}
		}
		for path, want := range map[string]string{
			"/readyz":  "ready\nledger: embedded reachable\n",
			"/livez":   "ok",
			"/healthz": "ok",
			"/metrics": `sealer_calls_total{method="Open",reason="PRINCIPAL_MISMATCH",service="sealer.v1.Sealer",tenant="default"}`,
		} {
			body := httpGet(t, "http://"+p.HTTP+path)
			if !strings.Contains(body, want) {
				t.Errorf("%s: %q not in %.300s", path, want, body)
			}
		}
	})

	t.Run("logs hold no principal, payload or state", func(t *testing.T) {
		logs := p.logs.String()
		if !strings.Contains(logs, "PRINCIPAL_MISMATCH") {
			t.Fatal("the logs do not show the rejections; the scan would prove nothing")
		}
		for _, s := range sec.values {
			if strings.Contains(logs, s) {
				t.Errorf("logs contain %.40q", s)
			}
		}
	})
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSealer_R7_ConsumedEntriesAreSweptAfterTheirRetention: a consumed
// state's ledger entry goes once its retention past the state's expiry is
// over (2m plus the ledger timeout and a second, whatever --skew: see
// ledgerRetention), not before. The test waits it out beside the other
// waiting tests of the failover lane.
func TestSealer_R7_ConsumedEntriesAreSweptAfterTheirRetention(t *testing.T) {
	testenv.Lane(t, testenv.LaneFailover)
	t.Parallel()
	p := start(t, t.TempDir(), "--skew", "100ms", "--sweep-interval", "200ms")
	a := newGRPC(t, p)
	resp := expectReason(t, a, "seal", sealBody("alice", weatherParams, "x", `,"ttl":"1s","oneTime":true`), "OK")
	expiry, err := time.Parse(time.RFC3339Nano, resp["expiresAt"].(string))
	if err != nil {
		t.Fatal(err)
	}
	expectReason(t, a, "open", openBody(resp["requestState"].(string), "alice", weatherParams), "OK")
	swept := func() bool {
		return strings.Contains(httpGet(t, "http://"+p.HTTP+"/metrics"), "sealer_ledger_swept_total 1")
	}
	// The entry lives until then, on the clock this machine's processes
	// share: seen swept by an answer that came back before it, it was swept
	// early. An answer after it (a loaded machine's) tells nothing.
	until := expiry.Add(2*time.Minute + 1500*time.Millisecond)
	time.Sleep(time.Until(until.Add(-5 * time.Second)))
	if swept() && time.Now().Before(until) {
		t.Fatal("the consumed entry was swept before its retention was over")
	}
	waitFor(t, "the consumed entry swept after its retention", 30*time.Second, swept)
}

// TestSealer_R6_OneTimeConcurrentAndAcrossRestart: 16 concurrent opens of one
// one-time state succeed exactly once, and the state stays consumed after
// the binary restarts.
func TestSealer_R6_OneTimeConcurrentAndAcrossRestart(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	p := start(t, dir)
	for name, a := range apis(t, p) {
		t.Run(name, func(t *testing.T) {
			state := mustSeal(t, a, sealBody("alice", weatherParams, "once", `,"oneTime":true`))
			reasons := concurrently(16, func(int) string {
				_, reason := a.call(t, "open", openBody(state, "alice", weatherParams))
				return reason
			})
			if reasons["OK"] != 1 || reasons["ALREADY_CONSUMED"] != 15 {
				t.Fatalf("got %v, want 1 OK and 15 ALREADY_CONSUMED", reasons)
			}
		})
	}
	a := newGRPC(t, p)
	consumed := mustSeal(t, a, sealBody("alice", weatherParams, "once", `,"oneTime":true`))
	expectReason(t, a, "open", openBody(consumed, "alice", weatherParams), "OK")
	fresh := mustSeal(t, a, sealBody("alice", weatherParams, "once", `,"oneTime":true`))

	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want 0", err)
	}
	p2 := start(t, dir)
	for _, a := range apis(t, p2) {
		expectReason(t, a, "open", openBody(consumed, "alice", weatherParams), "ALREADY_CONSUMED")
	}
	expectReason(t, newREST(p2), "open", openBody(fresh, "alice", weatherParams), "OK")
}

// TestSealer_SIGTERMDrainsInFlightCalls sends SIGTERM during a burst of
// one-time opens. Every call either succeeds, or fails without the server
// having consumed its state: after a restart, exactly the states whose open
// failed still open. The process exits 0.
func TestSealer_SIGTERMDrainsInFlightCalls(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	p := start(t, dir)
	g := newGRPC(t, p)
	const n = 400
	states := make([]string, n)
	for i := range states {
		states[i] = mustSeal(t, g, sealBody("alice", weatherParams, fmt.Sprint(i), `,"oneTime":true`))
	}
	client := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	var ok, unavailable atomic.Int32
	failed := make([]bool, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		if i == n/4 {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			req := &sealerv1.OpenRequest{}
			mustUnmarshal(t, openBody(states[i], "alice", weatherParams), req)
			_, err := client.Open(context.Background(), req)
			switch status.Code(err) {
			case codes.OK:
				ok.Add(1)
			case codes.Unavailable:
				unavailable.Add(1)
				failed[i] = true
			default:
				t.Errorf("open %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if err := p.waitExit(t); err != nil {
		t.Fatalf("exit: %v, want 0", err)
	}
	if ok.Load() == 0 {
		t.Fatal("no call succeeded; the burst did not overlap the drain")
	}
	t.Logf("%d succeeded, %d refused after the drain began", ok.Load(), unavailable.Load())

	p2 := start(t, dir)
	r := newGRPC(t, p2)
	for i, st := range states {
		want := "ALREADY_CONSUMED"
		if failed[i] {
			want = "OK"
		}
		if _, got := r.call(t, "open", openBody(st, "alice", weatherParams)); got != want {
			t.Errorf("state %d (call failed: %v): got %s after restart, want %s", i, failed[i], got, want)
		}
	}
}

// TestSealer_RefusesBadConfig checks that the binary exits non-zero with a
// message for a configuration it cannot run.
func TestSealer_RefusesBadConfig(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, args := range [][]string{
		{"--max-ttl", "1s", "--default-ttl", "5m"},
		{"--grpc-addr", "nonsense"},
		{"--log-format", "xml"},
	} {
		out, err := runSealer(append([]string{"serve", "--data-dir", t.TempDir()}, args...)...)
		var exit interface{ ExitCode() int }
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "sealer:") {
			t.Errorf("%v: got %v, %q; want exit 1 with a message", args, err, out)
		}
	}
}

func TestSealer_Inspect(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := start(t, t.TempDir())
	state := mustSeal(t, newREST(p), sealBody("alice", weatherParams, "x", ""))
	out, err := runSealer("inspect", state)
	if err != nil || !strings.Contains(out, "key version 1") {
		t.Fatalf("got %q, %v", out, err)
	}
	if out, err := runSealer("inspect", "garbage"); err == nil {
		t.Fatalf("inspect garbage: got %q, want an error", out)
	}
}

func runSealer(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSealer_OverloadIsRefusedAtOnce: past --max-in-flight, calls are
// refused with RESOURCE_EXHAUSTED instead of queueing, and the sealer serves
// normally once the burst is over.
func TestSealer_OverloadIsRefusedAtOnce(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := start(t, t.TempDir(), "--max-in-flight", "2")
	a := newGRPC(t, p)
	states := make([]string, 200)
	for i := range states {
		states[i] = mustSeal(t, a, sealBody("alice", weatherParams, "x", `,"oneTime":true`))
	}
	reasons := concurrently(len(states), func(i int) string {
		_, r := a.call(t, "open", openBody(states[i], "alice", weatherParams))
		return r
	})
	if reasons["RESOURCE_EXHAUSTED"] == 0 || reasons["OK"] == 0 || reasons["OK"]+reasons["RESOURCE_EXHAUSTED"] != len(states) {
		t.Fatalf("200 one-time opens at once with 2 slots: got %v; want OK and RESOURCE_EXHAUSTED only", reasons)
	}
	mustSeal(t, a, sealBody("alice", weatherParams, "x", ""))
}

// listeningPorts returns the TCP ports a process listens on, from its
// socket descriptors and /proc/net/tcp{,6}.
func listeningPorts(t *testing.T, pid int) []int {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			port, _ := strconv.ParseInt(hexPort, 16, 32)
			ports = append(ports, int(port))
		}
	}
	return ports
}

// TestSealer_ListensOnlyWhereConfigured: REST is served in process; the
// sealer opens no listener but its gRPC and HTTP ports (no internal
// gateway port a local user could reach).
func TestSealer_ListensOnlyWhereConfigured(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := start(t, t.TempDir())
	mustSeal(t, newREST(p), sealBody("alice", weatherParams, "x", ""))
	want := map[int]bool{}
	for _, addr := range []string{p.GRPC, p.HTTP} {
		_, port, _ := strings.Cut(addr, ":")
		n, _ := strconv.Atoi(port)
		want[n] = true
	}
	got := listeningPorts(t, p.cmd.Process.Pid)
	if len(got) != len(want) {
		t.Fatalf("listening on %v, want only the gRPC and HTTP ports %v", got, want)
	}
	for _, port := range got {
		if !want[port] {
			t.Fatalf("listening on %v, want only the gRPC and HTTP ports %v", got, want)
		}
	}
}
