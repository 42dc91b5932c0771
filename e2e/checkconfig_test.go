package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testpki"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// TestCheckConfig_Ledger: `sealer check-config` runs what a one-time open
// and a latest-only flow need against the Redis ledger it is given, with
// the credentials and CA given, and names what is wrong: the password, the
// TLS verification, a missing ACL permission. It never prints the password.
// Before, every one of these said "configuration ok", and the replica then
// refused every one-time open (issue 41).
func TestCheckConfig_Ledger(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	ca := testpki.NewCA(t, "redis-check")
	cert := ca.Server(t, "redis")
	tlsAddr := testredis.FreeAddr(t)
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	// docs/OPERATIONS.md's least-privilege user, and users short of it.
	both := []string{"~sealer:v1:consumed:*", "~sealer:v1:flow:*", "+eval", "+evalsha", "+set", "+get", "+pttl", "+time", "+ping"}
	acl := []string{
		"--user", "sealer", "on", ">right-pw-41"}
	acl = append(acl, both...)
	acl = append(acl, "--user", "noset", "on", ">right-pw-41", "~sealer:v1:*", "+eval", "+evalsha", "+get", "+pttl", "+time", "+ping")
	acl = append(acl, "--user", "noflow", "on", ">right-pw-41", "~sealer:v1:consumed:*", "+eval", "+evalsha", "+set", "+time", "+ping")
	srv := testredis.Start(t, false, append(acl, "--tls-port", tlsPort, "--tls-cert-file", cert.CertFile,
		"--tls-key-file", cert.KeyFile, "--tls-ca-cert-file", ca.CertFile, "--tls-auth-clients", "no")...)

	dir := t.TempDir()
	secret := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	right, wrong := secret("right", "right-pw-41"), secret("wrong", "wrong-pw-41")
	for _, tc := range []struct {
		name  string
		flags []string
		want  string // "" for ok
	}{
		{"least privilege", []string{"--ledger", "redis://sealer@" + srv.Addr + "/0", "--ledger-password-file", right}, ""},
		{"over TLS with the CA", []string{"--ledger", "rediss://sealer@" + tlsAddr + "/0", "--ledger-password-file", right, "--ledger-ca-file", ca.CertFile}, ""},
		{"wrong password", []string{"--ledger", "redis://sealer@" + srv.Addr + "/0", "--ledger-password-file", wrong}, "refused the user or password"},
		{"private CA not given", []string{"--ledger", "rediss://sealer@" + tlsAddr + "/0", "--ledger-password-file", right}, "TLS"},
		{"ACL without SET", []string{"--ledger", "redis://noset@" + srv.Addr + "/0", "--ledger-password-file", right}, "permission"},
		{"ACL without the flows' commands", []string{"--ledger", "redis://noflow@" + srv.Addr + "/0", "--ledger-password-file", right}, "latest-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"check-config", "--data-dir", t.TempDir()}, tc.flags...)
			out, err := exec.Command(binary, args...).CombinedOutput()
			got := string(out)
			if strings.Contains(got, "right-pw-41") || strings.Contains(got, "wrong-pw-41") {
				t.Fatalf("check-config printed the password:\n%s", got)
			}
			if tc.want == "" {
				if err != nil || !strings.Contains(got, "configuration ok") {
					t.Fatalf("got %v:\n%s\nwant configuration ok", err, got)
				}
				return
			}
			if err == nil || !strings.Contains(got, tc.want) {
				t.Fatalf("got %v:\n%s\nwant a refusal naming %q", err, got, tc.want)
			}
			t.Logf("%s", got)
		})
	}
}

// TestReadiness_LedgerRefusedAtStart: a replica whose Redis ledger refuses
// it from the start (here a wrong password file) is not ready, and says
// why in fixed words; before, it reported ready and refused every one-time
// open. The same replica with the right password is ready.
func TestReadiness_LedgerRefusedAtStart(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	srv := testredis.Start(t, false, "--user", "sealer", "on", ">right-pw-41", "~sealer:v1:consumed:*",
		"+eval", "+evalsha", "+set", "+time", "+ping")
	dir := t.TempDir()
	for _, tc := range []struct {
		name, password string
		code           int
		text           string
	}{
		{"wrong password", "wrong-pw-41", http.StatusServiceUnavailable, "ledger refuses this replica"},
		{"right password", "right-pw-41", http.StatusOK, "ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name)
			if err := os.WriteFile(file, []byte(tc.password+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			p := start(t, t.TempDir(), "--ledger", "redis://sealer@"+srv.Addr+"/0", "--ledger-password-file", file)
			waitProbes(t, p, tc.code, tc.text)
		})
	}
}

// TestLedger_ARedisThatEvictsIsRefused: a Redis whose maxmemory-policy may
// evict the ledger's keys (here allkeys-lru) would reopen consumed states
// once it is full: check-config refuses it, and a replica on it is not
// ready, both naming the policy. The same Redis with noeviction is ready.
func TestLedger_ARedisThatEvictsIsRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	srv := testredis.Start(t, false, "--maxmemory-policy", "allkeys-lru")
	out, err := exec.Command(binary, "check-config", "--data-dir", t.TempDir(), "--ledger", srv.URL()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "maxmemory-policy allkeys-lru") {
		t.Fatalf("check-config: got %v:\n%s\nwant a refusal naming maxmemory-policy allkeys-lru", err, out)
	}
	p := start(t, t.TempDir(), "--ledger", srv.URL())
	waitProbes(t, p, http.StatusServiceUnavailable, "evict")
	if err := srv.Client(t).ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	waitProbes(t, p, http.StatusOK, "ready")
}
