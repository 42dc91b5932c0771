package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testvault"
)

// vaultForSealer starts Vault with an exportable Transit key "sealer" and
// returns it with a file holding a token limited to docs/OPERATIONS.md's policy.
func vaultForSealer(t *testing.T) (*testvault.Server, string, string) {
	t.Helper()
	v := testvault.Start(t)
	v.Write(t, "transit/keys/sealer", map[string]any{"type": "aes256-gcm96", "exportable": true})
	if err := v.Client.Sys().PutPolicy("sealer", testvault.SealerPolicy); err != nil {
		t.Fatal(err)
	}
	token := v.Write(t, "auth/token/create", map[string]any{"policies": []string{"sealer"}, "ttl": "1h", "renewable": true}).Auth.ClientToken
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return v, token, file
}

// vaultSecrets returns every credential and every exported key of v, in the
// spellings a careless log line could hold them.
func vaultSecrets(t *testing.T, v *testvault.Server, tokens ...string) []string {
	t.Helper()
	out := append([]string{v.RootToken}, tokens...)
	keys, _ := v.Read(t, "transit/export/encryption-key/sealer").Data["keys"].(map[string]any)
	for _, k := range keys {
		out = append(out, k.(string))
	}
	return out
}

// load runs seals on one replica and opens on the next, over both APIs, from
// several workers until stop is closed, and returns the failures.
func load(t *testing.T, ps []*proc, stop <-chan struct{}) func() (ok, failed int64, errs []string) {
	var callers [][]api
	for _, p := range ps {
		callers = append(callers, []api{newGRPC(t, p), newREST(p)})
	}
	var okN, failN atomic.Int64
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				from := callers[(w+i)%len(callers)][i%2]
				to := callers[(w+i+1)%len(callers)][(i/2)%2]
				resp, reason := from.call(t, "seal", sealBody("alice", weatherParams, fmt.Sprint(w, i), ""))
				if reason == "OK" {
					_, reason = to.call(t, "open", openBody(resp["requestState"].(string), "alice", weatherParams))
				}
				if reason == "OK" {
					okN.Add(1)
					continue
				}
				failN.Add(1)
				mu.Lock()
				if len(errs) < 10 {
					errs = append(errs, reason)
				}
				mu.Unlock()
			}
		})
	}
	return func() (int64, int64, []string) {
		wg.Wait()
		return okN.Load(), failN.Load(), errs
	}
}

var metricLine = regexp.MustCompile(`(?m)^(sealer_key_\w+) (\S+)$`)

// refreshAge is the seconds since the key ring last loaded, from the
// sealer_key_* metrics.
func refreshAge(m map[string]float64) float64 {
	return float64(time.Now().UnixNano())/1e9 - m["sealer_key_refresh_last_success_timestamp_seconds"]
}

// keyMetrics returns the sealer_key_* gauges of p.
func keyMetrics(t *testing.T, p *proc) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range metricLine.FindAllStringSubmatch(httpGet(t, "http://"+p.HTTP+"/metrics"), -1) {
		out[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	return out
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestVault_R10_RotationAcrossReplicasWithoutAFailedCall: three real
// sealers on one Transit key serve continuous seals and opens, each state
// opened by another replica than the one that sealed it, while the key is
// rotated five times: not one call fails, and all end up sealing with the
// newest version.
func TestVault_R10_RotationAcrossReplicasWithoutAFailedCall(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	v, token, tokenFile := vaultForSealer(t)
	flags := []string{"--keys", "vault-transit", "--vault-addr", v.Addr, "--vault-token-file", tokenFile,
		"--vault-transit-key", "sealer", "--key-poll", "250ms", "--key-activation", "2s"}
	var ps []*proc
	for range 3 {
		ps = append(ps, startReady(t, t.TempDir(), flags...))
	}
	stop := make(chan struct{})
	wait := load(t, ps, stop)
	for range 5 {
		time.Sleep(1500 * time.Millisecond)
		v.Write(t, "transit/keys/sealer/rotate", nil)
	}
	for _, p := range ps {
		waitFor(t, "sealing with version 6", 15*time.Second, func() bool { return keyMetrics(t, p)["sealer_key_sealing_version"] == 6 })
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	ok, failed, errs := wait()
	t.Logf("%d seal+open pairs across 5 rotations, %d failed", ok, failed)
	if failed != 0 || ok == 0 {
		t.Fatalf("%d failed pairs (%v), %d succeeded; want none failed", failed, errs, ok)
	}
	assertNoSecretsInLogs(t, ps, vaultSecrets(t, v, token))
}

// TestVault_UnreachableThenBack: Vault cut off from the sealer for many poll
// intervals costs nothing but freshness (visible in the metrics); a rotation
// made meanwhile is picked up when Vault is back.
func TestVault_UnreachableThenBack(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	v, token, tokenFile := vaultForSealer(t)
	proxy := newProxy(t, strings.TrimPrefix(v.Addr, "http://"))
	p := startReady(t, t.TempDir(), "--keys", "vault-transit", "--vault-addr", "http://"+proxy.addr,
		"--vault-token-file", tokenFile, "--vault-transit-key", "sealer", "--key-poll", "200ms", "--key-activation", "1s")
	stop := make(chan struct{})
	wait := load(t, []*proc{p}, stop)

	proxy.down()
	v.Write(t, "transit/keys/sealer/rotate", nil)
	time.Sleep(2 * time.Second) // ten poll intervals
	m := keyMetrics(t, p)
	if m["sealer_key_refresh_errors_total"] == 0 || refreshAge(m) < 1 || m["sealer_key_versions"] != 1 {
		t.Errorf("with Vault unreachable: metrics %v; want refresh errors, a stale age, and the old ring", m)
	}
	expectReady(t, p, 200)

	proxy.up()
	waitFor(t, "the rotation made meanwhile", 10*time.Second, func() bool {
		m := keyMetrics(t, p)
		return m["sealer_key_versions"] == 2 && m["sealer_key_sealing_version"] == 2
	})
	if age := refreshAge(keyMetrics(t, p)); age > 1 {
		t.Errorf("refresh age %v after Vault came back; want fresh", age)
	}
	close(stop)
	ok, failed, errs := wait()
	t.Logf("%d seal+open pairs, %d failed, with Vault unreachable for 2s", ok, failed)
	if failed != 0 || ok == 0 {
		t.Fatalf("%d failed pairs (%v), %d succeeded; want none failed", failed, errs, ok)
	}
	assertNoSecretsInLogs(t, []*proc{p}, vaultSecrets(t, v, token))
}

// TestVault_NotReadyUntilFirstRing: a sealer started while Vault cannot be
// reached is not ready and answers KEYS_UNAVAILABLE, then serves once Vault
// is reachable.
func TestVault_NotReadyUntilFirstRing(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	v, _, tokenFile := vaultForSealer(t)
	proxy := newProxy(t, strings.TrimPrefix(v.Addr, "http://"))
	proxy.down()
	p := start(t, t.TempDir(), "--keys", "vault-transit", "--vault-addr", "http://"+proxy.addr,
		"--vault-token-file", tokenFile, "--vault-transit-key", "sealer", "--key-poll", "200ms")
	expectReady(t, p, 503)
	expectReason(t, newGRPC(t, p), "seal", sealBody("alice", weatherParams, "x", ""), "KEYS_UNAVAILABLE")
	proxy.up()
	waitFor(t, "ready", 10*time.Second, func() bool {
		_, reason := newREST(p).call(t, "seal", sealBody("alice", weatherParams, "x", ""))
		return reason == "OK"
	})
	waitProbes(t, p, 200, "ready\n")
}

func assertNoSecretsInLogs(t *testing.T, ps []*proc, secrets []string) {
	t.Helper()
	for i, p := range ps {
		logs := p.logs.String()
		if !strings.Contains(logs, `"msg":"listening"`) {
			t.Fatalf("replica %d: no logs captured; the scan would prove nothing", i)
		}
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Errorf("replica %d logs hold a secret (%.6s...)", i, s)
			}
		}
	}
}

// proxy forwards TCP to target until down, and again after up, on the same
// address: Vault unreachable from the sealer, reachable from the test.
// proxy is a TCP proxy that can be cut (down, up), made to hang (stall),
// or made slow (a delay each way).
type proxy struct {
	addr, target string
	delay        time.Duration // added to every chunk, each way
	mu           sync.Mutex
	l            net.Listener
	conns        map[net.Conn]bool
	stalled      chan struct{} // non-nil while stalled: closed to resume
	refusing     bool          // down: accepted connections are closed at once
}

func newProxy(t *testing.T, target string) *proxy {
	return newDelayProxy(t, target, 0)
}

// newDelayProxy returns a proxy that delays every chunk by delay each way:
// a round trip through it takes at least twice delay.
func newDelayProxy(t *testing.T, target string, delay time.Duration) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String(), target: target, delay: delay, conns: map[net.Conn]bool{}}
	p.serve(l)
	t.Cleanup(func() { p.resume(); p.down(); l.Close() })
	return p
}

func (p *proxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			refusing := p.refusing
			p.mu.Unlock()
			if refusing {
				c.Close() // down: every connection ends at once
				continue
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = true
	stalled := p.stalled
	p.mu.Unlock()
	if stalled != nil {
		<-stalled // accepted, never answered, as a hung server does
	}
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = true
	p.mu.Unlock()
	go func() { p.copy(u, c); u.Close() }()
	p.copy(c, u)
	c.Close()
}

// copy copies src to dst, each chunk delivered delay after it was read.
func (p *proxy) copy(dst, src net.Conn) {
	if p.delay == 0 {
		io.Copy(dst, src)
		return
	}
	type chunk struct {
		at   time.Time
		data []byte
	}
	chunks := make(chan chunk, 4096)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{time.Now().Add(p.delay), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.data); err != nil {
			src.Close()
			return
		}
	}
}

// stall makes the target hang: open connections are cut, new ones are
// accepted and never answered until resume.
func (p *proxy) stall() {
	p.mu.Lock()
	p.stalled = make(chan struct{})
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// up serves again. The listener stays open while down (connections are
// closed at once instead), so no other process can take its port meanwhile.
func (p *proxy) up() {
	p.mu.Lock()
	p.refusing = false
	p.mu.Unlock()
}

// TestVault_TokenFileReadAgain: a token file kept fresh by something else
// (a Vault Agent sink) is read again when it changes, and after a denial
// even when its modification time and size say it did not: with the old
// token revoked, the sealer follows a rotation with the new one.
func TestVault_TokenFileReadAgain(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	v, first, tokenFile := vaultForSealer(t)
	p := startReady(t, t.TempDir(), "--keys", "vault-transit", "--vault-addr", v.Addr,
		"--vault-token-file", tokenFile, "--vault-transit-key", "sealer", "--key-poll", "200ms", "--key-activation", "1s")
	newToken := func() string {
		return v.Write(t, "auth/token/create", map[string]any{"policies": []string{"sealer"}, "ttl": "1h", "renewable": true}).Auth.ClientToken
	}
	rotateAndFollow := func(versions float64) {
		t.Helper()
		v.Write(t, "transit/keys/sealer/rotate", nil)
		waitFor(t, fmt.Sprintf("key version %v loaded with the new token", versions), 10*time.Second, func() bool {
			return keyMetrics(t, p)["sealer_key_versions"] == versions
		})
	}

	t.Run("file changed", func(t *testing.T) {
		second := newToken()
		writeFile(t, tokenFile, second+"\n")
		time.Sleep(1500 * time.Millisecond) // the file is checked every second
		v.Write(t, "auth/token/revoke", map[string]any{"token": first})
		rotateAndFollow(2)
		first = second
	})
	t.Run("denied, file apparently unchanged", func(t *testing.T) {
		st, err := os.Stat(tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		third := newToken()
		if len(third) != len(first) {
			t.Fatalf("tokens of %d and %d bytes: the size would tell the change", len(third), len(first))
		}
		v.Write(t, "auth/token/revoke", map[string]any{"token": first})
		writeFile(t, tokenFile, third+"\n")
		if err := os.Chtimes(tokenFile, st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
		rotateAndFollow(3)
	})
	waitFor(t, "sealer_vault_login_ok 1", 5*time.Second, func() bool {
		return strings.Contains(httpGet(t, "http://"+p.HTTP+"/metrics"), "\nsealer_vault_login_ok 1\n")
	})
	assertNoSecretsInLogs(t, []*proc{p}, vaultSecrets(t, v, first))
}
