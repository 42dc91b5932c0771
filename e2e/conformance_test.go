package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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
		if os.Getenv("CI") != "" {
			t.Fatalf("no Node tools (SEALER_TEST_NODE_BIN=%q); scripts/test.sh installs them", dir)
		}
		t.Skip("no Node tools: run scripts/test.sh, which installs them and sets SEALER_TEST_NODE_BIN")
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
// by a real sealer. A FAILURE, a WARNING, a SKIPPED check, a missing
// scenario or a missing summary fails the test.
func TestConformance_MRTR(t *testing.T) {
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	url := startMCP(t, s)

	list, err := nodeCommand(t, bin, "conformance", "list", "--server").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, list)
	}
	if got := strings.Count(string(list), "input-required-result-"); got != len(mrtrScenarios) {
		t.Fatalf("the suite lists %d input-required-result scenarios, want %d:\n%s", got, len(mrtrScenarios), list)
	}
	total := 0
	for _, sc := range mrtrScenarios {
		name := "input-required-result-" + sc
		out := t.TempDir()
		res, err := nodeCommand(t, bin, "conformance", "server", "--url", url, "--scenario", name,
			"--spec-version", "2026-07-28", "-o", out).CombinedOutput()
		m := summaryLine.FindStringSubmatch(string(res))
		if err != nil || m == nil || m[1] != m[2] || m[1] == "0" || m[3] != "0" || m[4] != "0" {
			t.Errorf("%s: exit %v, summary %q:\n%s", name, err, m, res)
			continue
		}
		files, _ := filepath.Glob(filepath.Join(out, "server-"+name+"-*", "checks.json"))
		if len(files) != 1 {
			t.Errorf("%s: %d checks.json files, want 1", name, len(files))
			continue
		}
		data, _ := os.ReadFile(files[0])
		var checks []struct{ ID, Status string }
		if err := json.Unmarshal(data, &checks); err != nil || len(checks) == 0 {
			t.Errorf("%s: checks.json: %v", name, err)
			continue
		}
		for _, c := range checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				t.Errorf("%s: check %s is %s", name, c.ID, c.Status)
			}
		}
		total += len(checks)
		t.Logf("%-45s %s", name, m[0])
	}
	t.Logf("%d scenarios, %d checks", len(mrtrScenarios), total)
	waitFor(t, "the sealer to refuse a state (tampered-state cannot pass without it)", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
	})
}

// TestTypeScriptExamples runs the TypeScript examples, one over gRPC and one
// over REST, against a real sealer.
func TestTypeScriptExamples(t *testing.T) {
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	for _, run := range [][]string{
		{"../examples/typescript/grpc.ts", s.GRPC},
		{"../examples/typescript/rest.ts", "http://" + s.HTTP},
	} {
		out, err := nodeCommand(t, bin, "node", append([]string{"--experimental-strip-types", "--no-warnings"}, run...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", run[0], err, out)
		}
		t.Logf("%s: %s", filepath.Base(run[0]), strings.TrimSpace(string(out)))
	}
}
