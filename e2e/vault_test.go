package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testvault"
	"github.com/mcp-sealer/sealer/keys/vault"
)

// vaultForSealer starts Vault with a non-exportable Transit key "sealer"
// and returns it with a token limited to docs/OPERATIONS.md's policy (no
// export path), and a file holding it.
func vaultForSealer(t *testing.T) (*testvault.Server, string, string) {
	t.Helper()
	return keysFrom(t, testvault.Start(t), false)
}

// keysFrom creates the Transit key "sealer" on v, exportable or not, and
// returns v with a token of the policy its mode needs, and a file holding it.
func keysFrom(t *testing.T, v *testvault.Server, exportable bool) (*testvault.Server, string, string) {
	t.Helper()
	v.Write(t, "transit/keys/sealer", map[string]any{"type": "aes256-gcm96", "exportable": exportable})
	policy := testvault.SealerPolicy
	if exportable {
		policy = testvault.ExportPolicy
	}
	token, file := tokenFor(t, v, policy)
	return v, token, file
}

// tokenFor returns a renewable token of v limited to policy, and a file
// holding it.
func tokenFor(t *testing.T, v *testvault.Server, policy string) (string, string) {
	t.Helper()
	name := fmt.Sprintf("sealer-%x", sha256.Sum256([]byte(policy)))[:15] // one policy per text
	if err := v.Client.Sys().PutPolicy(name, policy); err != nil {
		t.Fatal(err)
	}
	token := v.Write(t, "auth/token/create", map[string]any{"policies": []string{name}, "ttl": "1h", "renewable": true}).Auth.ClientToken
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return token, file
}

// vaultSecrets returns every credential of v and every master key its
// Transit keys give the sealer (derived by HMAC, or exported), in the
// spellings a careless log line could hold them.
func vaultSecrets(t *testing.T, v *testvault.Server, tokens ...string) []string {
	t.Helper()
	out := append([]string{v.RootToken}, tokens...)
	names, _ := v.Client.Logical().List("transit/keys")
	list, _ := names.Data["keys"].([]any)
	for _, n := range list {
		name := n.(string)
		info := v.Read(t, "transit/keys/"+name).Data
		if exportable, _ := info["exportable"].(bool); exportable {
			exported, _ := v.Read(t, "transit/export/encryption-key/"+name).Data["keys"].(map[string]any)
			for _, k := range exported {
				out = append(out, k.(string))
			}
		}
		versions, _ := info["keys"].(map[string]any)
		for ver := range versions {
			h, err := v.Client.Logical().Write("transit/hmac/"+name+"/sha2-256", map[string]any{
				"input": base64.StdEncoding.EncodeToString([]byte(vault.HMACInput)), "key_version": ver})
			if err != nil {
				continue // below min_encryption_version
			}
			_, b64, _ := strings.Cut(strings.TrimPrefix(h.Data["hmac"].(string), "vault:v"), ":")
			out = append(out, b64)
		}
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
	// within is what the condition takes on a quiet machine, with room to
	// spare; a loaded one may take many times that, and the bound only
	// ends a wait that would never end: at least loadedBound.
	within = max(within, loadedBound)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// keyModes are the ways the end-to-end tests take keys from Transit: a
// non-exportable key on Vault and on OpenBao (--keys vault-transit, a policy
// without export), and the exportable mode kept for upgrades.
var keyModes = []struct {
	name       string
	start      func(testing.TB) *testvault.Server
	exportable bool
}{
	{"vault", testvault.Start, false},
	{"openbao", testvault.StartOpenBao, false},
	{"vault-exportable", testvault.Start, true},
}

// transitFlags are the sealer's flags for the key "sealer" of v in a mode.
func transitFlags(v *testvault.Server, tokenFile string, exportable bool) []string {
	mode := "vault-transit"
	if exportable {
		mode = "vault-transit-exportable"
	}
	return []string{"--keys", mode, "--vault-addr", v.Addr, "--vault-token-file", tokenFile, "--vault-transit-key", "sealer"}
}

// TestVault_R10_RotationAcrossReplicasWithoutAFailedCall: three real
// sealers on one Transit key serve continuous seals and opens, each state
// opened by another replica than the one that sealed it, while the key is
// rotated five times: not one call fails, and all end up sealing with the
// newest version. On Vault and OpenBao the key is not exportable and the
// sealer's policy denies every export path.
func TestVault_R10_RotationAcrossReplicasWithoutAFailedCall(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, mode := range keyModes {
		t.Run(mode.name, func(t *testing.T) {
			v, token, tokenFile := keysFrom(t, mode.start(t), mode.exportable)
			if !mode.exportable {
				assertExportDenied(t, v, token)
			}
			flags := append(transitFlags(v, tokenFile, mode.exportable), "--key-poll", "250ms", "--key-activation", "2s")
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
			t.Logf("%s: %d seal+open pairs across 5 rotations on 3 replicas, %d failed", mode.name, ok, failed)
			if failed != 0 || ok == 0 {
				t.Fatalf("%d failed pairs (%v), %d succeeded; want none failed", failed, errs, ok)
			}
			assertNoSecretsInLogs(t, ps, vaultSecrets(t, v, token))
			if mode.exportable && !strings.Contains(ps[0].logs.String(), "the Transit key is exportable") {
				t.Error("the exportable mode started without its warning")
			}
			if !strings.Contains(ps[0].logs.String(), `"msg":"vault login succeeded"`) {
				t.Error("no log line says the Vault login succeeded")
			}
		})
	}
}

// assertExportDenied fails unless token is refused every export path of
// the key "sealer".
func assertExportDenied(t *testing.T, v *testvault.Server, token string) {
	t.Helper()
	c, err := v.Client.Clone()
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(token)
	for _, path := range []string{"transit/export/encryption-key/sealer", "transit/export/hmac-key/sealer", "transit/backup/sealer"} {
		if _, err := c.Logical().Read(path); err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("%s: the sealer's token reads it (%v); want 403", path, err)
		}
	}
}

// TestVault_RetiredVersionIsInvalid (Vault and OpenBao, non-exportable): a
// state sealed under version 1 opens on every replica after rotations, until
// min_decryption_version passes 1; then it is INVALID_STATE, while a state
// sealed under version 2 still opens.
func TestVault_RetiredVersionIsInvalid(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, mode := range keyModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			v, _, tokenFile := keysFrom(t, mode.start(t), false)
			flags := append(transitFlags(v, tokenFile, false), "--key-poll", "200ms", "--key-activation", "1s")
			ps := []*proc{startReady(t, t.TempDir(), flags...), startReady(t, t.TempDir(), flags...)}
			a, b := newGRPC(t, ps[0]), newREST(ps[1])
			seal := func() string {
				resp := expectReason(t, a, "seal", sealBody("alice", weatherParams, "x", `,"ttl":"600s"`), "OK")
				return resp["requestState"].(string)
			}
			old := seal()
			v.Write(t, "transit/keys/sealer/rotate", nil)
			v.Write(t, "transit/keys/sealer/rotate", nil)
			for _, p := range ps {
				waitFor(t, "sealing with version 3", 10*time.Second, func() bool { return keyMetrics(t, p)["sealer_key_sealing_version"] == 3 })
			}
			newer := seal()
			expectReason(t, b, "open", openBody(old, "alice", weatherParams), "OK")
			v.Write(t, "transit/keys/sealer/config", map[string]any{"min_decryption_version": 2})
			expectReason(t, b, "open", openBody(old, "alice", weatherParams), "OK") // until the next poll at least: no harm
			for _, p := range ps {
				waitFor(t, "version 1 retired", 10*time.Second, func() bool { return keyMetrics(t, p)["sealer_key_versions"] == 2 })
			}
			expectReason(t, b, "open", openBody(old, "alice", weatherParams), "INVALID_STATE")
			expectReason(t, a, "open", openBody(old, "alice", weatherParams), "INVALID_STATE")
			expectReason(t, b, "open", openBody(newer, "alice", weatherParams), "OK")
		})
	}
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
	// Ten poll intervals at least: the keys 2 s stale, and refreshes failed.
	var m map[string]float64
	waitFor(t, "refresh errors and a refresh age of 2 s with Vault unreachable", 30*time.Second, func() bool {
		m = keyMetrics(t, p)
		return m["sealer_key_refresh_errors_total"] > 0 && refreshAge(m) >= 2
	})
	if m["sealer_key_versions"] != 1 {
		t.Errorf("with Vault unreachable: metrics %v; want the old ring", m)
	}
	expectReady(t, p, 200)

	proxy.up()
	waitFor(t, "the rotation made meanwhile, and a fresh refresh", 30*time.Second, func() bool {
		m := keyMetrics(t, p)
		return m["sealer_key_versions"] == 2 && m["sealer_key_sealing_version"] == 2 && refreshAge(m) <= 1
	})
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
		token, _ := tokenFor(t, v, testvault.SealerPolicy)
		return token
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
		// The file is checked every second; a login with the token it
		// holds renews it (a token the sealer has not used was never
		// renewed).
		waitFor(t, "the sealer to log in with the changed file's token", 30*time.Second, func() bool {
			return v.Write(t, "auth/token/lookup", map[string]any{"token": second}).Data["last_renewal_time"] != nil
		})
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

// TestVault_MigrationFromExportableKey (Vault and OpenBao): a fleet on an
// exportable key moves to a new non-exportable key, one replica at a time,
// as docs/OPERATIONS.md says: states sealed before and during the switch,
// by either kind of replica, open on every replica, old or new, then after
// the new key's first version past the old key's seals; then the old
// versions retire and a replica runs without the old key.
func TestVault_MigrationFromExportableKey(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, kind := range testvault.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			v := kind.Start(t)
			v.Write(t, "transit/keys/sealer", map[string]any{"type": "aes256-gcm96", "exportable": true})
			v.Write(t, "transit/keys/sealer/rotate", nil) // the old key is at version 2
			token, tokenFile := tokenFor(t, v, testvault.MigrationPolicy)
			common := []string{"--vault-addr", v.Addr, "--vault-token-file", tokenFile, "--key-poll", "200ms", "--key-activation", "1s"}
			oldFlags := append([]string{"--keys", "vault-transit-exportable", "--vault-transit-key", "sealer"}, common...)
			newFlags := append([]string{"--keys", "vault-transit", "--vault-transit-key", "sealer2", "--vault-transit-previous-key", "sealer"}, common...)
			ps := make([]*proc, 3)
			for i := range ps {
				ps[i] = startReady(t, t.TempDir(), oldFlags...)
				waitFor(t, "sealing with version 2", 10*time.Second, func() bool { return keyMetrics(t, ps[i])["sealer_key_sealing_version"] == 2 })
			}
			var inFlight []string
			refused, opened := 0, 0
			// round seals states on every replica, then opens every state in
			// flight on every replica.
			round := func(step string) {
				t.Helper()
				for _, p := range ps {
					for i := range 5 {
						resp, reason := newGRPC(t, p).call(t, "seal", sealBody("alice", weatherParams, fmt.Sprint(step, i), `,"ttl":"600s"`))
						if reason != "OK" {
							t.Fatalf("%s: seal refused: %s", step, reason)
						}
						inFlight = append(inFlight, resp["requestState"].(string))
					}
				}
				for _, p := range ps {
					a := newREST(p)
					for _, st := range inFlight {
						if _, reason := a.call(t, "open", openBody(st, "alice", weatherParams)); reason != "OK" {
							refused++
							t.Errorf("%s: a state in flight refused: %s", step, reason)
						}
						opened++
					}
				}
			}
			round("before the switch")
			v.Write(t, "transit/keys/sealer2", map[string]any{"type": "aes256-gcm96"})
			for i := range ps {
				if err := ps[i].stop(t, syscall.SIGTERM); err != nil {
					t.Fatalf("replica %d stopped with %v", i, err)
				}
				ps[i] = startReady(t, t.TempDir(), newFlags...)
				round(fmt.Sprintf("replica %d switched", i))
			}
			// The new key passes the old one: version 3 seals once active.
			v.Write(t, "transit/keys/sealer2/rotate", nil)
			v.Write(t, "transit/keys/sealer2/rotate", nil)
			for _, p := range ps {
				waitFor(t, "sealing with the new key's version 3", 10*time.Second, func() bool { return keyMetrics(t, p)["sealer_key_sealing_version"] == 3 })
			}
			round("new key sealing")
			t.Logf("%s: %d opens of states in flight across the switch, %d refused", kind.Name, opened, refused)

			// The end: the old versions retire, and a replica drops the old key.
			v.Write(t, "transit/keys/sealer2/config", map[string]any{"min_decryption_version": 3})
			for _, p := range ps {
				waitFor(t, "old versions retired", 10*time.Second, func() bool { return keyMetrics(t, p)["sealer_key_versions"] == 1 })
			}
			last := expectReason(t, newGRPC(t, ps[1]), "seal", sealBody("alice", weatherParams, "x", ""), "OK")["requestState"].(string)
			ps[0].stop(t, syscall.SIGTERM)
			ps[0] = startReady(t, t.TempDir(), append([]string{"--keys", "vault-transit", "--vault-transit-key", "sealer2"}, common...)...)
			expectReason(t, newREST(ps[0]), "open", openBody(last, "alice", weatherParams), "OK")
			assertNoSecretsInLogs(t, ps[1:], vaultSecrets(t, v, token))
		})
	}
}

// TestVault_StoppedForAMinute (Vault and OpenBao, non-exportable): the key
// server stopped (SIGSTOP: connections hang) for a minute under load costs
// warm replicas not one failed seal or open; the refresh errors show in the
// metrics, and a rotation made after it is followed.
func TestVault_StoppedForAMinute(t *testing.T) {
	testenv.Lane(t, testenv.LaneFailover)
	for _, mode := range keyModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			v, _, tokenFile := keysFrom(t, mode.start(t), false)
			flags := append(transitFlags(v, tokenFile, false), "--key-poll", "1s", "--key-activation", "2s")
			ps := []*proc{startReady(t, t.TempDir(), flags...), startReady(t, t.TempDir(), flags...)}
			stop := make(chan struct{})
			wait := load(t, ps, stop)
			time.Sleep(2 * time.Second)
			if err := v.Pause(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute)
			m := keyMetrics(t, ps[0])
			if err := v.Resume(); err != nil {
				t.Fatal(err)
			}
			if m["sealer_key_refresh_errors_total"] == 0 || refreshAge(m) < 30 {
				t.Errorf("with %s stopped: metrics %v; want refresh errors and a stale age", mode.name, m)
			}
			v.Write(t, "transit/keys/sealer/rotate", nil)
			for _, p := range ps {
				waitFor(t, "the rotation after the outage", 30*time.Second, func() bool { return keyMetrics(t, p)["sealer_key_sealing_version"] == 2 })
			}
			close(stop)
			ok, failed, errs := wait()
			t.Logf("%s stopped for 1m: %d seal+open pairs on 2 warm replicas, %d failed", mode.name, ok, failed)
			if failed != 0 || ok == 0 {
				t.Fatalf("%d failed pairs (%v), %d succeeded; want none failed", failed, errs, ok)
			}
		})
	}
}

// TestVault_CheckConfig (Vault and OpenBao): `sealer check-config` tells
// whether the Transit key is exportable, whether its type is one the sealer
// takes, and whether the token may do more with the key than the mode
// needs; a key the mode cannot serve from is refused (exit 1).
func TestVault_CheckConfig(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, kind := range testvault.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			v, _, minimal := keysFrom(t, kind.Start(t), false)
			_, broad := tokenFor(t, v, testvault.SealerPolicy+testvault.ExportPolicy)
			root := filepath.Join(t.TempDir(), "root")
			writeFile(t, root, v.RootToken)
			v.Write(t, "transit/keys/exported", map[string]any{"type": "aes256-gcm96", "exportable": true})
			v.Write(t, "transit/keys/rsa", map[string]any{"type": "rsa-2048"})
			check := func(tokenFile string, flags ...string) (string, error) {
				args := append([]string{"check-config", "--data-dir", t.TempDir(), "--vault-addr", v.Addr, "--vault-token-file", tokenFile}, flags...)
				out, err := exec.Command(binary, args...).CombinedOutput()
				return string(out), err
			}
			for _, tc := range []struct {
				name, token string
				flags       []string
				fails       bool
				want        []string
			}{
				{"non-exportable key, minimal policy", minimal, []string{"--keys", "vault-transit", "--vault-transit-key", "sealer"}, false,
					[]string{"ok: transit key sealer (aes256-gcm96) is not exportable", "ok: the token may do no more", "configuration ok"}},
				{"policy that grants export", broad, []string{"--keys", "vault-transit", "--vault-transit-key", "sealer"}, false,
					[]string{"warning: the token's policy grants read on transit/export/encryption-key/sealer, which --keys vault-transit does not need"}},
				{"exportable key in the default mode", root, []string{"--keys", "vault-transit", "--vault-transit-key", "exported"}, true,
					[]string{"transit key exported is exportable"}},
				{"exportable mode, root token", root, []string{"--keys", "vault-transit-exportable", "--vault-transit-key", "exported"}, false,
					[]string{"warning: transit key exported is exportable", "warning: the token is a root token"}},
				{"unsupported type", root, []string{"--keys", "vault-transit", "--vault-transit-key", "rsa"}, true,
					[]string{`has type "rsa-2048"`}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					out, err := check(tc.token, tc.flags...)
					if (err != nil) != tc.fails {
						t.Fatalf("check-config: %v, want failure %v:\n%s", err, tc.fails, out)
					}
					for _, w := range tc.want {
						if !strings.Contains(out, w) {
							t.Errorf("output lacks %q:\n%s", w, out)
						}
					}
				})
			}
		})
	}
}
