package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// startProxyAdmin runs sealer-proxy as startProxy does and returns its MCP
// endpoint and its admin address.
func startProxyAdmin(t *testing.T, s *proc, upstream string, flags ...string) (url, admin string) {
	t.Helper()
	args := append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--upstream", upstream,
		"--sealer", s.GRPC, "--log-level", "debug"}, flags...)
	m := startUntil(t, exec.Command(proxyBinary, args...), regexp.MustCompile(`"msg":"listening","addr":"([^"]+)","admin":"([^"]+)"`))
	return "http://" + m[1] + "/mcp", m[2]
}

// proxyMetric returns the value of the sample of the proxy's metrics whose
// name and labels are sample exactly (0 when absent).
func proxyMetric(t *testing.T, admin, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// TestProxy_SpecGate (issue 50): an upstream that breaks the MRTR server
// rules, each beside the control of the upstream alone, whose answer
// breaks it; through sealer-proxy its answer is replaced by a JSON-RPC
// error, -32021 for a kind of input the client did not declare, and
// counted; with --spec-gate report it is forwarded and counted.
func TestProxy_SpecGate(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	s := start(t, t.TempDir())
	const elicit = `{"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}`
	up := startUpstream(t, func(w http.ResponseWriter, req upstreamCall) {
		switch {
		case req.Method == "tools/list":
			jsonResult(w, req.ID, `{"resultType":"input_required","inputRequests":{"a":`+elicit+`},"requestState":"s"}`)
		case req.Params.Name == "ping":
			jsonResult(w, req.ID, `{"resultType":"input_required","inputRequests":{"a":{"method":"ping"}},"requestState":"s"}`)
		case req.Params.Name == "nothing":
			jsonResult(w, req.ID, `{"resultType":"input_required"}`)
		default: // asks by elicitation whatever the client declared
			jsonResult(w, req.ID, `{"resultType":"input_required","inputRequests":{"a":`+elicit+`},"requestState":"s"}`)
		}
	})
	samplingOnly := strings.Replace(meta, `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`,
		`"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`, 1)
	cases := []struct {
		name, method, tool, params, rule string
		code                             int
	}{
		{"input_required to tools/list", "tools/list", "", `{` + meta + `}`, "input_required_method", -32603},
		{"asks by ping", "tools/call", "ping", `{` + meta + `,"name":"ping","arguments":{}}`, "input_request_method", -32603},
		{"asks nothing, no state", "tools/call", "nothing", `{` + meta + `,"name":"nothing","arguments":{}}`, "nothing_asked", -32603},
		{"elicitation the client did not declare", "tools/call", "book", `{` + samplingOnly + `,"name":"book","arguments":{}}`, "missing_capability", -32021},
	}
	for _, tc := range cases {
		if _, body := mcpPost(t, up.url, tc.method, tc.tool, tc.params, nil); !strings.Contains(body, `"input_required"`) {
			t.Fatalf("%s: the upstream alone answered %s; want input_required", tc.name, body)
		}
	}
	url, admin := startProxyAdmin(t, s, up.url, "--principal", "bearer")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sample := `sealer_proxy_spec_violations_total{action="refused",rule="` + tc.rule + `"}`
			before := proxyMetric(t, admin, sample)
			status, body := mcpPost(t, url, tc.method, tc.tool, tc.params, nil)
			var a struct {
				ID    json.RawMessage
				Error *struct{ Code int }
			}
			if err := json.Unmarshal([]byte(body), &a); err != nil || a.Error == nil || a.Error.Code != tc.code || string(a.ID) != "5" {
				t.Errorf("HTTP %d %s; want error %d for id 5", status, body, tc.code)
			}
			if got := proxyMetric(t, admin, sample); got != before+1 {
				t.Errorf("%s went from %v to %v, want one more", sample, before, got)
			}
		})
	}
	t.Run("an honest round passes", func(t *testing.T) {
		_, body := mcpPost(t, url, "tools/call", "book", toolParams("book", `{}`, ""), nil)
		if a := parseAnswer(t, body); a.Error != nil || a.Result.RequestState == "" || a.Result.RequestState == "s" {
			t.Errorf("got %s, want input_required with a sealed state", body)
		}
	})
	t.Run("report", func(t *testing.T) {
		url, admin := startProxyAdmin(t, s, up.url, "--principal", "bearer", "--spec-gate", "report")
		tc := cases[3]
		sample := `sealer_proxy_spec_violations_total{action="reported",rule="` + tc.rule + `"}`
		_, body := mcpPost(t, url, tc.method, tc.tool, tc.params, nil)
		if a := parseAnswer(t, body); a.Error != nil || a.Result.RequestState == "" {
			t.Errorf("got %s, want the answer forwarded, its state sealed", body)
		}
		if got := proxyMetric(t, admin, sample); got != 1 {
			t.Errorf("%s = %v, want 1", sample, got)
		}
	})
}
