package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// mrtrScenarios are the 14 input-required-result server scenarios of
// @modelcontextprotocol/conformance 0.2.0-alpha.12.
var mrtrScenarios = []string{
	"basic-elicitation", "basic-sampling", "basic-list-roots", "request-state", "multiple-input-requests",
	"multi-round", "missing-input-response", "non-tool-request", "result-type", "unsupported-methods",
	"tampered-state", "capability-check", "ignore-extra-params", "validate-input",
}

// nodeBin returns the directory of node and the conformance runner installed
// by scripts/test.sh, or fails (CI) or skips the test.
func nodeBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SEALER_TEST_NODE_BIN")
	if _, err := os.Stat(filepath.Join(dir, "conformance")); dir == "" || err != nil {
		testenv.Missing(t, "no Node tools (SEALER_TEST_NODE_BIN=%q)", dir)
	}
	return dir
}

func nodeCommand(t *testing.T, bin, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	return cmd
}

var summaryLine = regexp.MustCompile(`Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings`)

// TestConformance_MRTR runs every input-required-result server scenario of
// the official MCP conformance suite against the example MCP server backed
// by a real sealer.
func TestConformance_MRTR(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	url := startMCP(t, s)
	for sc, r := range conformance(t, bin, url) {
		if !r.passed() {
			t.Errorf("%s: %s", sc, r)
		}
	}
	waitFor(t, "the sealer to refuse a state (tampered-state cannot pass without it)", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
	})
}

// scenarioResult is what one conformance scenario printed and recorded.
type scenarioResult struct {
	Summary string   // the runner's "Passed: a/b, f failed, w warnings", or "" when missing
	Failed  []string // "check: STATUS" for every check that is neither SUCCESS nor INFO
	Err     string   // the runner's exit error, a missing checks.json, or an unreadable one
	Output  string   // everything the runner printed, for the failure message
}

// passed says whether every check of the scenario ran and succeeded: a
// FAILURE, a WARNING, a SKIPPED check or a missing summary fails it.
func (r scenarioResult) passed() bool {
	m := summaryLine.FindStringSubmatch(r.Summary)
	return r.Err == "" && len(r.Failed) == 0 && m != nil && m[1] == m[2] && m[1] != "0" && m[3] == "0" && m[4] == "0"
}

func (r scenarioResult) String() string {
	return fmt.Sprintf("summary %q, failed checks %v, error %q\n%s", r.Summary, r.Failed, r.Err, r.Output)
}

// conformance runs the 14 input-required-result scenarios of the official
// MCP conformance suite against the MCP server at url, logs one summary line
// per scenario (the CI log shows them) and returns each scenario's result.
// It fails the test at once if the suite does not list exactly those
// scenarios; whether a scenario must pass is the caller's to say.
func conformance(t *testing.T, bin, url string) map[string]scenarioResult {
	t.Helper()
	list, err := nodeCommand(t, bin, "conformance", "list", "--server").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, list)
	}
	if got := strings.Count(string(list), "input-required-result-"); got != len(mrtrScenarios) {
		t.Fatalf("the suite lists %d input-required-result scenarios, want %d:\n%s", got, len(mrtrScenarios), list)
	}
	results := make(map[string]scenarioResult, len(mrtrScenarios))
	total := 0
	for _, sc := range mrtrScenarios {
		name := "input-required-result-" + sc
		out := t.TempDir()
		res, err := nodeCommand(t, bin, "conformance", "server", "--url", url, "--scenario", name,
			"--spec-version", "2026-07-28", "-o", out).CombinedOutput()
		r := scenarioResult{Summary: summaryLine.FindString(string(res)), Output: string(res)}
		if err != nil {
			r.Err = err.Error()
		}
		files, _ := filepath.Glob(filepath.Join(out, "server-"+name+"-*", "checks.json"))
		var checks []struct{ ID, Status string }
		if len(files) != 1 {
			r.Err += fmt.Sprintf(" %d checks.json files, want 1", len(files))
		} else if data, err := os.ReadFile(files[0]); err != nil || json.Unmarshal(data, &checks) != nil || len(checks) == 0 {
			r.Err += " checks.json unreadable or empty"
		}
		for _, c := range checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				r.Failed = append(r.Failed, c.ID+": "+c.Status)
			}
		}
		total += len(checks)
		verdict := "PASS"
		if !r.passed() {
			verdict = "FAIL " + strings.Join(r.Failed, ", ")
		}
		t.Logf("%-45s %s %s", name, r.Summary, verdict)
		results[sc] = r
	}
	t.Logf("%d scenarios, %d checks", len(mrtrScenarios), total)
	return results
}
