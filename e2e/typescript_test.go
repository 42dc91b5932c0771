package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The TypeScript side: the client package (clients/typescript), its codec
// for the official MCP TypeScript SDK, and the example MCP server built on
// them (examples/typescript/server.ts), each against a real sealer.
// scripts/test.sh installs their packages (npm ci) and builds the client.

// startTSMCP runs the TypeScript example MCP server against the sealer s
// (over gRPC, or REST with -rest) and returns its URL.
func startTSMCP(t *testing.T, bin string, s *proc, flags ...string) string {
	t.Helper()
	cmd := nodeCommand(t, bin, "node", append([]string{"--experimental-strip-types", "--no-warnings",
		"../examples/typescript/server.ts", "--addr", "127.0.0.1:0", "--sealer", sealerURL(s, flags)}, flags...)...)
	return startUntil(t, cmd, regexp.MustCompile(`listening on (http://\S+/mcp)`))[1]
}

// nodeTest runs node's test runner on files with env added, fails the test
// if any of them fails, and logs the runner's summary and diagnostics.
func nodeTest(t *testing.T, bin string, env []string, files ...string) {
	t.Helper()
	// A test that hangs fails after two minutes instead of holding the run.
	cmd := nodeCommand(t, bin, "node", append([]string{"--test", "--test-timeout=120000", "--test-reporter", "tap"}, files...)...)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "# ") || strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "not ok ") {
			t.Log(line)
		}
	}
	if err != nil {
		t.Fatalf("node --test %s: %v\n%s", strings.Join(files, " "), err, out)
	}
	if !regexp.MustCompile(`(?m)^# fail 0$`).Match(out) || regexp.MustCompile(`(?m)^# (pass|tests) 0$`).Match(out) ||
		!regexp.MustCompile(`(?m)^# skipped 0$`).Match(out) {
		t.Fatalf("node --test %s: a test failed, was skipped, or none ran:\n%s", strings.Join(files, " "), out)
	}
}

// TestConformance_MRTR_TypeScript runs every input-required-result server
// scenario of the official MCP conformance suite against the TypeScript
// example MCP server, whose states a real sealer seals through the codec.
func TestConformance_MRTR_TypeScript(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	url := startTSMCP(t, bin, s)
	for sc, r := range conformance(t, bin, url) {
		if !r.passed() {
			t.Errorf("%s: %s", sc, r)
		}
	}
	waitFor(t, "the sealer to refuse a state (tampered-state cannot pass without it)", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
	})
}

// TestTypeScriptMCP drives the TypeScript example with the official
// TypeScript MCP client (examples/typescript/test): two rounds complete; a
// state replayed under another bearer token, presented with other
// arguments, presented after a later round opened, expired, or tampered
// with is refused (-32602), while the same state presented again gets the
// first answer (recorded outcomes); a JSON-RPC batch repeating an id cannot spend a state on
// another message's arguments. One example seals over gRPC, another
// (short-lived states, a sealer allowing no skew) over REST, and a third
// serves 2025-era requests and batches too (the SDK's default).
func TestTypeScriptMCP(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	s := start(t, t.TempDir(), "--skew", "0s")
	url := startTSMCP(t, bin, s)
	short := startTSMCP(t, bin, s, "--rest", "--state-ttl", "1")
	legacy := startTSMCP(t, bin, s, "--legacy", "stateless")
	nodeTest(t, bin, []string{"SEALER_TEST_MCP_URL=" + url, "SEALER_TEST_MCP_URL_SHORT=" + short, "SEALER_TEST_MCP_URL_LEGACY=" + legacy},
		"../examples/typescript/test/mcp.test.mjs")
	for _, reason := range []string{"PRINCIPAL_MISMATCH", "REQUEST_MISMATCH", "ALREADY_CONSUMED", "EXPIRED", "INVALID_STATE"} {
		waitFor(t, "the sealer to refuse a state with "+reason, 5*time.Second, func() bool {
			return strings.Contains(s.logs.String(), `"reason":"`+reason+`"`)
		})
	}
}

// TestTypeScriptClient runs the client package against real sealers
// (clients/typescript/integration): every refusal typed with its reason
// over gRPC and REST, deadlines, TLS with a client certificate and with a
// bearer token, and the differential test of the request digest on 10,000
// generated params.
func TestTypeScriptClient(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	plain := start(t, t.TempDir(), "--skew", "0s")

	p := newPKI(t)
	certA := p.ca.Client(t, "team-a", []string{"spiffe://mcp.test/ns/tools/sa/team-a"}, nil)
	tokenC := "c-token-0c5e4f1a9b"
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	writeFile(t, tenants, strings.Replace(tenantsYAML, "%s", tokenHash(tokenC), 1))
	secure := start(t, t.TempDir(), "--tls-cert", p.server.CertFile, "--tls-key", p.server.KeyFile,
		"--tls-client-ca", p.ca.CertFile, "--tenants", tenants)

	nodeTest(t, bin, []string{
		"SEALER_TEST_GRPC=" + plain.GRPC, "SEALER_TEST_REST=" + plain.HTTP,
		"SEALER_TEST_TLS_GRPC=" + secure.GRPC, "SEALER_TEST_TLS_REST=" + secure.HTTP,
		"SEALER_TEST_CA=" + p.ca.CertFile, "SEALER_TEST_CERT_A=" + certA.CertFile, "SEALER_TEST_KEY_A=" + certA.KeyFile,
		"SEALER_TEST_TOKEN_C=" + tokenC,
	}, "../clients/typescript/integration/sealer.test.mjs")
	if _, err := os.Stat("../clients/typescript/dist/index.js"); err != nil {
		t.Fatalf("the client package is not built: %v", err)
	}
}
