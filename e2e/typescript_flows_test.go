package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// refusalLine is a sealer's log line for an Open it refused, with its
// reason. Records are left out: one that comes after the client moved on
// to the next round is refused (ALREADY_CONSUMED) without the client
// seeing it.
var refusalLine = regexp.MustCompile(`(?m)^.*"msg":"call failed".*"method":"/sealer\.v1\.Sealer/Open".*"reason":"([A-Z_]+)".*$`)

// refusals counts the Opens a sealer refused, by reason, from its log.
func refusals(s *proc) map[string]int {
	got := map[string]int{}
	for _, m := range refusalLine.FindAllStringSubmatch(s.logs.String(), -1) {
		got[m[1]]++
	}
	return got
}

// TestTypeScriptMCP_R9_Flows drives the TypeScript example, whose codec
// seals every state as a round of a latest-only flow asking the keys of its
// inputRequests, with the official TypeScript MCP client
// (examples/typescript/test/flows.test.mjs): three rounds of input
// complete; a rewind (an earlier round after a later one opened) and
// off-script inputResponses (a key added, left out, in another case) are
// refused with -32602, while a fork (8 parallel retries of one round, 20
// times) runs the handler once and all 8 get its answer (recorded
// outcomes), and the fork's round, once a later one opened, is refused; with flows off (the control, on the same
// sealer), each of them goes through. The sealer's log holds exactly the
// refusals the client saw, each with its reason (ALREADY_CONSUMED,
// INPUT_MISMATCH), and no other. A second sealer (flows of 4 s and 2
// rounds, reached over REST) ends a flow at its deadline (FLOW_EXPIRED)
// and refuses a round past the last (FLOW_EXHAUSTED).
func TestTypeScriptMCP_R9_Flows(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	bin := nodeBin(t)
	s := start(t, t.TempDir())
	limits := start(t, t.TempDir(), "--flow-ttl", "4s", "--max-rounds", "2")
	url := startTSMCP(t, bin, s)
	plainURL := startTSMCP(t, bin, s, "--flows", "off")
	limitsURL := startTSMCP(t, bin, limits, "--rest")
	tally := filepath.Join(t.TempDir(), "refusals.json")
	nodeTest(t, bin, []string{"SEALER_TEST_MCP_URL=" + url, "SEALER_TEST_MCP_URL_NO_FLOWS=" + plainURL,
		"SEALER_TEST_MCP_URL_FLOW_LIMITS=" + limitsURL, "SEALER_TEST_REFUSALS=" + tally},
		"../examples/typescript/test/flows.test.mjs")

	data, err := os.ReadFile(tally)
	if err != nil {
		t.Fatalf("the client's tally of refusals: %v", err)
	}
	var want map[string]int
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("the client's tally of refusals %s: %v", data, err)
	}
	if want["ALREADY_CONSUMED"] < 4+20*7 || want["INPUT_MISMATCH"] < 8 {
		t.Fatalf("the client saw %v refusals: fewer than the test makes", want)
	}
	// The log lags the answers a little: wait for the count, then compare.
	waitFor(t, "the sealer to log every refusal", 5*time.Second, func() bool {
		got := refusals(s)
		return got["ALREADY_CONSUMED"] >= want["ALREADY_CONSUMED"] && got["INPUT_MISMATCH"] >= want["INPUT_MISMATCH"]
	})
	if got := refusals(s); !maps.Equal(got, want) {
		t.Errorf("the sealer refused %v, the client saw refusals for %v", got, want)
	}
	t.Logf("refusals, logged by the sealer and seen by the client as -32602: %v", want)

	for _, reason := range []string{"FLOW_EXPIRED", "FLOW_EXHAUSTED"} {
		waitFor(t, "the sealer with flow limits to refuse a state with "+reason, 5*time.Second, func() bool {
			return strings.Contains(limits.logs.String(), `"reason":"`+reason+`"`)
		})
	}
}
