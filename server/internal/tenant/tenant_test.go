package tenant

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/sealer"
)

// testBounds are the server's defaults (server.Defaults).
var testBounds = Bounds{MinTTL: time.Second, DefaultTTL: 5 * time.Minute, MaxTTL: time.Hour,
	FlowTTL: 15 * time.Minute, MaxFlowTTL: 24 * time.Hour, DefaultRounds: 16, MaxRounds: 1000,
	MaxPayload: sealer.DefaultMaxPayload}

func TestLoadTenants(t *testing.T) {
	h := "sha256:" + strings.Repeat("ab", 32)
	h2 := "sha256:" + strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name, yaml, err string
		clientCA        bool
	}{
		{"valid", "tenants:\n  a:\n    tokens: [" + h + "]\n  b:\n    mtls: {uris: [\"spiffe://x/b\"], dns: [B.example]}\n", "", true},
		{"full policy", "tenants:\n  a:\n    tokens: [" + h + "]\n    policy: {defaultTTL: 1m, maxTTL: 10m, maxPayload: 100, oneTime: forced, ratePerSecond: 10, burst: 5, maxConcurrent: 3}\n", "", false},
		{"empty", "tenants: {}\n", "no tenants", false},
		{"unknown field", "tenants:\n  a:\n    tokens: [" + h + "]\n    color: red\n", "color", false},
		{"bad name", "tenants:\n  A B:\n    tokens: [" + h + "]\n", "name must be", false},
		{"no credentials", "tenants:\n  a: {}\n", "no way to authenticate", false},
		{"token in clear", "tenants:\n  a:\n    tokens: [hunter2]\n", "sha256:<64 hex", false},
		{"empty token", "tenants:\n  a:\n    tokens: [sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855]\n", "empty string", false},
		{"token shared", "tenants:\n  a:\n    tokens: [" + h + "]\n  b:\n    tokens: [" + h + "]\n", "also", false},
		{"uri shared", "tenants:\n  a:\n    mtls: {uris: [u]}\n  b:\n    mtls: {uris: [u]}\n", "given to both", true},
		{"mtls without a client CA", "tenants:\n  a:\n    mtls: {dns: [a]}\n", "tls-client-ca", false},
		{"ttl above the server's", "tenants:\n  a:\n    tokens: [" + h2 + "]\n    policy: {maxTTL: 2h}\n", "maxTTL", false},
		{"payload above 64 KiB", "tenants:\n  a:\n    tokens: [" + h2 + "]\n    policy: {maxPayload: 70000}\n", "maxPayload", false},
		{"one-time policy", "tenants:\n  a:\n    tokens: [" + h2 + "]\n    policy: {oneTime: sometimes}\n", "oneTime", false},
		{"not YAML", "tenants: [", "tenants", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tenants.yaml")
			os.WriteFile(path, []byte(tc.yaml), 0o600)
			ts, err := Load(path, testBounds, tc.clientCA)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("got %v, want success", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want an error about %q", err, tc.err)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("error %q quotes a token", err)
			}
			if tc.name == "valid" && (ts.byDNS["b.example"] == nil || ts.byURI["spiffe://x/b"] == nil || ts.byToken("nope") != nil) {
				t.Fatal("mappings wrong")
			}
		})
	}
}

func TestLimiter(t *testing.T) {
	l := NewLimiter(&Tenant{MaxConcurrent: 2})
	leave1, err1 := l.Enter()
	leave2, err2 := l.Enter()
	if err1 != nil || err2 != nil {
		t.Fatalf("two calls within the limit: %v, %v", err1, err2)
	}
	if _, err := l.Enter(); !errors.Is(err, errExhausted) {
		t.Fatalf("third concurrent call: got %v, want errExhausted", err)
	}
	leave1()
	leave3, err := l.Enter()
	if err != nil {
		t.Fatalf("after one left: %v", err)
	}
	leave2()
	leave3()

	r := NewLimiter(&Tenant{RatePerSecond: 1, Burst: 2})
	for i := range 2 {
		if leave, err := r.Enter(); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		} else {
			leave()
		}
	}
	if _, err := r.Enter(); !errors.Is(err, errExhausted) {
		t.Fatalf("past the burst: got %v, want errExhausted", err)
	}
	if leave, err := NewLimiter(&Tenant{}).Enter(); err != nil {
		t.Fatalf("no limits: %v", err)
	} else {
		leave()
	}
}

// TestMaxPayload_DefaultKeepsStatesShort (issue 50): a tenant whose policy
// is silent, and the one tenant without a tenants file, seal at most the
// server's --max-payload; a policy may raise it to sealer.MaxPayload.
func TestMaxPayload_DefaultKeepsStatesShort(t *testing.T) {
	if got := Single(testBounds).implicit.MaxPayload; got != sealer.DefaultMaxPayload {
		t.Errorf("the single tenant: maxPayload %d, want %d", got, sealer.DefaultMaxPayload)
	}
	h := strings.Repeat("ab", 32)
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	file := "tenants:\n  quiet:\n    tokens: [sha256:" + h + "]\n  large:\n    tokens: [sha256:" + strings.Repeat("cd", 32) + "]\n    policy: {maxPayload: 65536}\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := Load(path, testBounds, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"quiet": sealer.DefaultMaxPayload, "large": sealer.MaxPayload} {
		if got := set.all[name].MaxPayload; got != want {
			t.Errorf("tenant %s: maxPayload %d, want %d", name, got, want)
		}
	}
}
