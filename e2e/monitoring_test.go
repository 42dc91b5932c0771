package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// The alerting rules and the dashboard the Helm chart ships.
var monitoringFiles = []string{"../deploy/helm/sealer/files/alerts.yaml", "../deploy/helm/sealer/files/dashboard.json"}

// promqlCheck returns the checker built by scripts/test.sh from the pinned
// Prometheus module (tools/go.mod), or fails (CI) or skips the test. It is
// a program of its own so that Prometheus's dependencies stay out of this
// module.
func promqlCheck(t *testing.T) string {
	t.Helper()
	return testenv.File(t, "SEALER_TEST_PROMQLCHECK", "promqlcheck")
}

// labelDomains are the values each label the sealer sets may take: the
// checker refuses a matcher naming another value, and a scrape holding one.
func labelDomains() []string {
	// OK, the ErrorInfo reasons, and the codes of calls gRPC itself cut
	// short (server.statusOf).
	reasons := []string{"OK", "Canceled", "DeadlineExceeded"}
	for _, name := range sealerv1.Reason_name {
		if name != "REASON_UNSPECIFIED" {
			reasons = append(reasons, strings.TrimPrefix(name, "REASON_"))
		}
	}
	slices.Sort(reasons)
	return []string{
		"-values", "reason=" + strings.Join(reasons, ","),
		"-values", "method=Seal,Open,Record",
		"-values", "service=sealer.v1.Sealer",
		"-values", "transport=grpc,rest",
		"-values", "what=tenants,tls",
		// sealer_reloads_total's results, then sealer_outcomes_total's.
		"-values", "result=ok,error,recorded,none,too_large,refused,record_failed,replayed,in_progress,unreadable,conflict",
	}
}

var checkSummary = regexp.MustCompile(`(?m)^(\d+) expressions in \d+ files, (\d+) metric names used, 0 problems$`)

// TestMonitoring_EveryExpressionNamesLiveSeries: every PromQL expression of
// the alerting rules and the dashboard parses and names only metrics, labels
// and label values that a real sealer exposes. The sealer runs with
// everything that adds series (TLS, tenants, Vault, a Redis ledger), takes
// calls that make its labelled series (a one-time open, a refused state,
// unauthenticated calls on both transports, a tenants reload), and its
// /metrics goes to the checker.
func TestMonitoring_EveryExpressionNamesLiveSeries(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	check := promqlCheck(t)
	v, _, tokenFile := vaultForSealer(t)
	redisSrv := testredis.Start(t, false)
	p := newPKI(t)
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	writeFile(t, tenants, "tenants:\n  weather:\n    tokens: [\""+tokenHash("tok-weather")+"\"]\n")
	s := start(t, t.TempDir(), "--tls-cert", p.server.CertFile, "--tls-key", p.server.KeyFile, "--tenants", tenants,
		"--keys", "vault-transit", "--vault-addr", v.Addr, "--vault-token-file", tokenFile, "--vault-transit-key", "sealer",
		"--ledger", redisSrv.URL())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: p.tlsConfig(t, nil)}, Timeout: 10 * time.Second}
	scrape := func() string {
		resp, err := client.Get("https://" + s.HTTP + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor(t, "sealer_ready 1 (keys loaded from Vault)", 15*time.Second, func() bool {
		return strings.Contains(scrape(), "\nsealer_ready 1\n")
	})

	for name, a := range p.callersOf(t, s, nil, "tok-weather") {
		once := mustSeal(t, a, sealBody("alice", weatherParams, name, `,"oneTime":true`))
		expectReason(t, a, "open", openBody(once, "bob", weatherParams), "PRINCIPAL_MISMATCH")
		expectReason(t, a, "open", openBody(once, "alice", weatherParams), "OK")
		expectReason(t, a, "open", openBody(once, "alice", weatherParams), "ALREADY_CONSUMED")
		// A recorded outcome and its replay (sealer_outcomes_total).
		recorded := mustSeal(t, a, sealBody("alice", weatherParams, name, `,"oneTime":true`))
		withRecord := strings.Replace(openBody(recorded, "alice", weatherParams), `{"requestState"`, `{"recordOutcome":true,"requestState"`, 1)
		expectReason(t, a, "open", withRecord, "OK")
		expectReason(t, a, "record", fmt.Sprintf(`{"requestState":%q,"outcome":"e30="}`, recorded), "OK")
		expectReason(t, a, "open", withRecord, "OK")
	}
	for _, a := range p.callersOf(t, s, nil, "not-a-token") {
		expectReason(t, a, "seal", sealBody("alice", weatherParams, "x", ""), "UNAUTHENTICATED")
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "a tenants reload counted", 5*time.Second, func() bool {
		return strings.Contains(scrape(), `sealer_reloads_total{result="ok",what="tenants"} 1`)
	})

	dump := filepath.Join(t.TempDir(), "metrics.txt")
	writeFile(t, dump, scrape())
	run := func(files ...string) (string, error) {
		args := append(append([]string{"-metrics", dump}, labelDomains()...), files...)
		out, err := exec.Command(check, args...).CombinedOutput()
		return string(out), err
	}

	out, err := run(monitoringFiles...)
	t.Logf("promqlcheck against a live /metrics:\n%s", out)
	if m := checkSummary.FindStringSubmatch(out); err != nil || m == nil || m[1] == "0" {
		t.Fatalf("promqlcheck: %v; want every expression checked and no problem", err)
	}

	// The same scrape refuses a name it does not hold: the check can fail.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, "groups:\n  - name: bad\n    rules:\n      - alert: X\n        expr: sealer_no_such_series > 0\n")
	if out, err := run(bad); err == nil || !strings.Contains(out, "metric sealer_no_such_series is not in the scrapes") {
		t.Fatalf("a rule naming a missing series passed: %v\n%s", err, out)
	}
}

var (
	alertRule  = regexp.MustCompile(`(?m)^\s+- alert: (\S+)\n(?:\s+.*\n)*?\s+runbook_url: (\S+)$`)
	runbookURL = "https://github.com/mcp-sealer/sealer/blob/main/docs/RUNBOOK.md#"
)

// TestMonitoring_EveryAlertHasItsRunbookSection: each alert's runbook_url
// is the anchor of a section of docs/RUNBOOK.md named after the alert, and
// each section there belongs to an alert.
func TestMonitoring_EveryAlertHasItsRunbookSection(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	rules, err := os.ReadFile(monitoringFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(runbook), -1) {
		sections[m[1]] = true
	}
	alerts := map[string]bool{}
	for _, m := range alertRule.FindAllStringSubmatch(string(rules), -1) {
		name, url := m[1], m[2]
		alerts[name] = true
		if url != runbookURL+strings.ToLower(name) {
			t.Errorf("%s: runbook_url %s; want %s%s", name, url, runbookURL, strings.ToLower(name))
		}
		if !sections[name] {
			t.Errorf("%s: docs/RUNBOOK.md has no section \"## %s\"", name, name)
		}
	}
	if n := strings.Count(string(rules), "- alert: "); len(alertRule.FindAllString(string(rules), -1)) != n || n == 0 {
		t.Errorf("%d alerts in the rules, %d with a runbook_url", n, len(alertRule.FindAllString(string(rules), -1)))
	}
	for s := range sections {
		if !alerts[s] {
			t.Errorf("docs/RUNBOOK.md section %q names no alert", s)
		}
	}
	t.Logf("%d alerts and %d runbook sections checked", len(alerts), len(sections))
}
