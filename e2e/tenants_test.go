package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testpki"
)

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pki is a test CA with the sealer's server certificate.
type pki struct {
	ca     *testpki.CA
	server testpki.Pair
	roots  *x509.CertPool
}

func newPKI(t *testing.T) pki {
	ca := testpki.NewCA(t, "sealer-test")
	pem, _ := os.ReadFile(ca.CertFile)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return pki{ca: ca, server: ca.Server(t, "sealer"), roots: roots}
}

func (p pki) tlsConfig(t *testing.T, client *testpki.Pair) *tls.Config {
	c := &tls.Config{RootCAs: p.roots, MinVersion: tls.VersionTLS12}
	if client != nil {
		cert, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

// callersOf returns a gRPC and a REST caller over TLS with an optional
// client certificate and bearer token.
func (p pki) callersOf(t *testing.T, s *proc, client *testpki.Pair, token string) map[string]api {
	conn, err := grpc.NewClient(s.GRPC, grpc.WithTransportCredentials(credentials.NewTLS(p.tlsConfig(t, client))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	tr := &http.Transport{TLSClientConfig: p.tlsConfig(t, client)}
	t.Cleanup(tr.CloseIdleConnections)
	return map[string]api{
		"gRPC": grpcAPI{client: sealerv1.NewSealerClient(conn), token: token},
		"REST": restAPI{base: "https://" + s.HTTP, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}, header: header},
	}
}

const tenantsYAML = `
tenants:
  team-a:
    mtls:
      uris: ["spiffe://mcp.test/ns/tools/sa/team-a"]
  team-b:
    mtls:
      dns: ["team-b.mcp.test"]
  team-c:
    tokens: ["%s"]
    policy:
      maxTTL: 10m
      maxPayload: 1024
      oneTime: forced
`

// TestTenants_AuthenticationAndIsolation: over gRPC and REST, with TLS:
// tenant A (mTLS, URI SAN) seals and opens; tenant B (mTLS, DNS SAN) and
// tenant C (bearer token) presenting A's state get INVALID_STATE; no
// credentials, a certificate of another CA, a certificate naming no
// tenant, and a wrong token are UNAUTHENTICATED.
func TestTenants_AuthenticationAndIsolation(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := newPKI(t)
	dir := t.TempDir()
	tokenC := "c-token-0c5e4f1a9b"
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, strings.Replace(tenantsYAML, "%s", tokenHash(tokenC), 1))
	audit := filepath.Join(dir, "audit.jsonl")
	s := start(t, t.TempDir(), "--tls-cert", p.server.CertFile, "--tls-key", p.server.KeyFile,
		"--tls-client-ca", p.ca.CertFile, "--tenants", tenants, "--audit-log", audit)

	certA := p.ca.Client(t, "team-a", []string{"spiffe://mcp.test/ns/tools/sa/team-a"}, nil)
	certB := p.ca.Client(t, "team-b", nil, []string{"team-b.mcp.test"})
	certNobody := p.ca.Client(t, "nobody", []string{"spiffe://mcp.test/ns/tools/sa/nobody"}, nil)
	certAB := p.ca.Client(t, "team-a-and-b", []string{"spiffe://mcp.test/ns/tools/sa/team-a"}, []string{"team-b.mcp.test"})
	foreign := testpki.NewCA(t, "foreign").Client(t, "team-a-forged", []string{"spiffe://mcp.test/ns/tools/sa/team-a"}, nil)

	var sec secrets
	for name, a := range p.callersOf(t, s, &certA, "") {
		t.Run(name, func(t *testing.T) {
			payload := "payload-of-team-a-" + name
			principal := "alice-" + name + "@team-a"
			state := mustSeal(t, a, sealBody(principal, weatherParams, payload, ""))
			sec.add(payload, base64.StdEncoding.EncodeToString([]byte(payload)), principal, state)
			expectReason(t, a, "open", openBody(state, principal, weatherParams), "OK")

			t.Run("tenant B (mTLS) cannot open A's state", func(t *testing.T) {
				expectReason(t, p.callersOf(t, s, &certB, "")[name], "open", openBody(state, principal, weatherParams), "INVALID_STATE")
			})
			t.Run("tenant C (bearer token) cannot open A's state", func(t *testing.T) {
				expectReason(t, p.callersOf(t, s, nil, tokenC)[name], "open", openBody(state, principal, weatherParams), "INVALID_STATE")
			})
			for _, tc := range []struct {
				name   string
				client *testpki.Pair
				token  string
			}{
				{"no credentials", nil, ""},
				{"certificate of another CA", &foreign, ""},
				{"certificate naming no tenant", &certNobody, ""},
				{"certificate naming two tenants", &certAB, ""},
				{"wrong bearer token", nil, "c-token-wrong"},
				{"A's certificate with C's token", &certA, tokenC},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c := p.callersOf(t, s, tc.client, tc.token)[name]
					expectReason(t, c, "seal", sealBody(principal, weatherParams, "x", ""), "UNAUTHENTICATED")
					expectReason(t, c, "open", openBody(state, principal, weatherParams), "UNAUTHENTICATED")
				})
			}
			t.Run("tenant C's policy", func(t *testing.T) {
				c := p.callersOf(t, s, nil, tokenC)[name]
				st := mustSeal(t, c, sealBody("carol", weatherParams, "x", "")) // oneTime forced
				expectReason(t, c, "open", openBody(st, "carol", weatherParams), "OK")
				expectReason(t, c, "open", openBody(st, "carol", weatherParams), "ALREADY_CONSUMED")
				expectReason(t, c, "seal", sealBody("carol", weatherParams, strings.Repeat("x", 1025), ""), "INVALID_ARGUMENT")
				expectReason(t, c, "seal", sealBody("carol", weatherParams, "x", `,"ttl":"660s"`), "INVALID_ARGUMENT")
			})
		})
	}

	t.Run("health needs no credentials", func(t *testing.T) {
		conn, err := grpc.NewClient(s.GRPC, grpc.WithTransportCredentials(credentials.NewTLS(p.tlsConfig(t, nil))))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("got %v, %v; want SERVING", resp, err)
		}
	})
	t.Run("REST callers cannot forge the gateway's metadata", func(t *testing.T) {
		r := p.callersOf(t, s, nil, "")["REST"].(restAPI)
		r.header = http.Header{"Grpc-Metadata-X-Sealer-Gateway": {"guess"}, "Grpc-Metadata-X-Sealer-Client-Cert": {"AAAA"}}
		expectReason(t, r, "seal", sealBody("mallory", weatherParams, "x", ""), "UNAUTHENTICATED")
	})
	t.Run("plaintext is refused", func(t *testing.T) {
		resp, err := http.Post("http://"+s.HTTP+"/v1/seal", "application/json", strings.NewReader(sealBody("a", weatherParams, "x", "")))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("plain HTTP to the TLS port: got %d, want 400", resp.StatusCode)
			}
		}
	})

	t.Run("one audit event per authenticated call, nothing secret", func(t *testing.T) {
		s.stop(t, syscall.SIGTERM)
		data, err := os.ReadFile(audit)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		calls := 0
		reasons := map[string]int{}
		for _, l := range lines {
			var ev map[string]any
			if err := json.Unmarshal([]byte(l), &ev); err != nil || ev["msg"] != "audit" {
				t.Fatalf("audit line %q: %v", l, err)
			}
			for _, f := range []string{"time", "tenant", "principal_hash", "method", "reason"} {
				if _, ok := ev[f]; !ok {
					t.Errorf("audit event %v lacks %s", ev, f)
				}
			}
			reasons[ev["reason"].(string)]++
			calls++
		}
		// Per transport: seal, open, 2 cross-tenant opens, 5 policy calls.
		// The 6 unauthenticated cases x 2 calls, the forged-metadata and the
		// plaintext attempts are counted in a metric, not audited.
		if want := 2 * (1 + 1 + 2 + 5); calls != want || reasons["UNAUTHENTICATED"] != 0 {
			t.Errorf("%d audit events (%v), want %d: one per authenticated call", calls, reasons, want)
		}
		for _, v := range sec.values {
			if strings.Contains(string(data), v) {
				t.Errorf("audit log holds %.30q", v)
			}
		}
	})
}

// TestTenants_SafeByDefault: no listening beyond loopback without TLS and
// client authentication, unless --insecure, which is logged loudly.
func TestTenants_SafeByDefault(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	out, err := runSealer("serve", "--data-dir", t.TempDir(), "--grpc-addr", "0.0.0.0:0", "--http-addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(out, "refusing to listen") || !strings.Contains(out, "--tls-cert") || !strings.Contains(out, "--insecure") {
		t.Fatalf("got %v: %q; want a refusal that says how to fix it", err, out)
	}
	p := start(t, t.TempDir(), "--grpc-addr", "0.0.0.0:0", "--insecure")
	if !strings.Contains(p.logs.String(), "INSECURE") {
		t.Fatal("--insecure was not logged loudly")
	}
}

// TestTenants_SIGHUPReload: a tenant added to the file works after SIGHUP,
// without a restart; a broken file is refused and the tenants in force stay.
func TestTenants_SIGHUPReload(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	one := "tenants:\n  one:\n    tokens: [\"" + tokenHash("token-one") + "\"]\n"
	two := one + "  two:\n    tokens: [\"" + tokenHash("token-two") + "\"]\n"
	writeFile(t, tenants, one)
	s := start(t, t.TempDir(), "--tenants", tenants)
	caller := func(token string) api { return grpcAPI{client: newGRPC(t, s).client, token: token} }
	mustSeal(t, caller("token-one"), sealBody("a", weatherParams, "x", ""))
	expectReason(t, caller("token-two"), "seal", sealBody("a", weatherParams, "x", ""), "UNAUTHENTICATED")

	writeFile(t, tenants, two)
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "tenant two after SIGHUP", 5*time.Second, func() bool {
		_, reason := caller("token-two").call(t, "seal", sealBody("a", weatherParams, "x", ""))
		return reason == "OK"
	})

	writeFile(t, tenants, "tenants:\n  Bad Name:\n    tokens: [not-a-hash]\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the refusal in the log", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), "tenants reload refused")
	})
	for _, tok := range []string{"token-one", "token-two"} {
		mustSeal(t, caller(tok), sealBody("a", weatherParams, "x", ""))
	}
	metrics := httpGet(t, "http://"+s.HTTP+"/metrics")
	for _, want := range []string{`sealer_reloads_total{result="ok",what="tenants"} 1`, `sealer_reloads_total{result="error",what="tenants"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestTenants_RateLimit: calls past a tenant's rate get RESOURCE_EXHAUSTED
// at once, and the tenant is served again when the rate allows.
func TestTenants_RateLimit(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	writeFile(t, tenants, "tenants:\n  slow:\n    tokens: [\""+tokenHash("tok")+"\"]\n    policy:\n      ratePerSecond: 5\n      burst: 5\n")
	s := start(t, t.TempDir(), "--tenants", tenants)
	c := grpcAPI{client: newGRPC(t, s).client, token: "tok"}
	reasons := map[string]int{}
	began := time.Now()
	for range 20 {
		_, r := c.call(t, "seal", sealBody("a", weatherParams, "x", ""))
		reasons[r]++
	}
	// The burst, and what the rate gave back while the calls went on (a
	// loaded machine takes longer over them), plus one for the rounding.
	most := 5 + int(5*time.Since(began).Seconds()) + 1
	if reasons["OK"] < 5 || reasons["OK"] > most || reasons["RESOURCE_EXHAUSTED"] != 20-reasons["OK"] {
		t.Fatalf("20 calls in %v at 5/s: got %v; want 5 to %d OK, the rest RESOURCE_EXHAUSTED", time.Since(began).Round(time.Millisecond), reasons, most)
	}
	if reasons["RESOURCE_EXHAUSTED"] == 0 {
		t.Fatalf("20 calls in %v at 5/s: all OK; the machine is too slow to tell the limit", time.Since(began).Round(time.Millisecond))
	}
	time.Sleep(time.Second)
	mustSeal(t, c, sealBody("a", weatherParams, "x", ""))
}

// TestTenants_TLSReload: a renewed server certificate written over the old
// files is served without a restart.
func TestTenants_TLSReload(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := newPKI(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.pem"), filepath.Join(dir, "tls-key.pem")
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, to+".tmp", string(b))
		if err := os.Rename(to+".tmp", to); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(p.server.CertFile, certFile)
	copyFile(p.server.KeyFile, keyFile)
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, "tenants:\n  one:\n    tokens: [\""+tokenHash("tok")+"\"]\n")
	s := start(t, t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile, "--tenants", tenants)

	served := func() string {
		conn, err := tls.Dial("tcp", s.GRPC, p.tlsConfig(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := served()
	renewed := p.ca.Server(t, "sealer-renewed")
	copyFile(renewed.KeyFile, keyFile)
	copyFile(renewed.CertFile, certFile)
	waitFor(t, "the renewed certificate", 5*time.Second, func() bool { return served() != before })
	mustSeal(t, p.callersOf(t, s, nil, "tok")["REST"], sealBody("a", weatherParams, "x", ""))

	https := &http.Client{Transport: &http.Transport{TLSClientConfig: p.tlsConfig(t, nil)}}
	resp, err := https.Get("https://" + s.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^sealer_reloads_total\{result="ok",what="tls"\} [1-9]`).Match(metrics) {
		t.Error("metrics do not count the TLS reload")
	}
	m := regexp.MustCompile(`(?m)^sealer_tls_certificate_expiry_timestamp_seconds (\S+)$`).FindSubmatch(metrics)
	if m == nil {
		t.Fatal("no sealer_tls_certificate_expiry_timestamp_seconds")
	}
	if expiry, _ := strconv.ParseFloat(string(m[1]), 64); expiry < float64(time.Now().Unix()) {
		t.Errorf("certificate expiry %v is not in the future", expiry)
	}
}
