package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// foldingUpstream is the MCP server of testdata/folding-upstream, which
// reads member names through Python's str.casefold (fold "casefold") or
// NFKC and casefold (fold "nfkc").
type foldingUpstream struct{ url string }

func startFolding(t *testing.T, python, fold string) foldingUpstream {
	t.Helper()
	cmd := pythonCommand(t, python, filepath.Join("testdata", "folding-upstream", "server.py"), "--fold", fold)
	return foldingUpstream{startUntil(t, cmd, regexp.MustCompile(`^listening on (http://\S+/mcp)$`))[1]}
}

// calls returns how many POSTs the upstream has had.
func (u foldingUpstream) calls(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(u.url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Calls int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c.Calls
}

// TestProxy_Hostile_LookAlikeNamesRefused (issue 50, 1; R1, R5): member
// names that an upstream reading names through Unicode's foldings takes for
// requestState, params or arguments. Each acts on the upstream alone (the
// control: the attack is real for that decoder); through sealer-proxy each
// is refused and the upstream is never called. The forged states come
// without inputResponses, which the proxy refuses on a one-time tool
// without a state it opened.
func TestProxy_Hostile_LookAlikeNamesRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	python := pythonBin(t)
	s := start(t, t.TempDir())
	forged, _ := json.Marshal(`{"approved": {"amount": 5000}}`)
	confirm := `"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}`
	envelope := func(params string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":` + params + `}`
	}
	for _, tc := range []struct{ name, fold, body string }{
		{"requestState with the ligature st, casefold", "casefold",
			envelope(`{` + meta + `,"name":"pay","arguments":{"amount":5000},"requeﬆState":` + string(forged) + `}`)},
		{"fullwidth requestState, NFKC", "nfkc",
			envelope(`{` + meta + `,"name":"pay","arguments":{"amount":5000},"ｒｅｑｕｅｓｔＳｔａｔｅ":` + string(forged) + `}`)},
		{"a second envelope member fullwidth params, NFKC", "nfkc",
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{` + meta + `,"name":"pay","arguments":{"amount":5}},` +
				`"ｐａｒａｍｓ":{"name":"pay","arguments":{"amount":5000},"requestState":` + string(forged) + `,` + confirm + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startFolding(t, python, tc.fold)
			if _, body := mcpPostBody(t, up.url, "tools/call", "pay", tc.body, nil); !strings.Contains(body, `ACTED name=pay state={\"approved\": {\"amount\": 5000}}`) {
				t.Fatalf("the upstream alone answered %s; want it to act on the forged state", body)
			}
			url := startProxy(t, s, up.url, "--principal", "bearer", "--one-time-tools", "pay")
			before := up.calls(t)
			status, body := mcpPostBody(t, url, "tools/call", "pay", tc.body, nil)
			if a := parseAnswer(t, body); a.Error == nil || up.calls(t) != before {
				t.Errorf("through the proxy: HTTP %d %s, %d upstream calls; want a JSON-RPC error and none", status, body, up.calls(t)-before)
			}
		})
	}

	// A retry with the state the proxy sealed for {"amount":5} and a second
	// arguments member in fullwidth: the state opens for the arguments the
	// digest reads, and the upstream would act on the other.
	t.Run("fullwidth arguments beside the sealed state's, NFKC", func(t *testing.T) {
		up := startFolding(t, python, "nfkc")
		second := func(state string) string {
			b, _ := json.Marshal(state)
			return envelope(`{` + meta + `,"name":"pay","arguments":{"amount":5},"ａｒｇｕｍｅｎｔｓ":{"amount":5000},"requestState":` + string(b) + `,` + confirm + `}`)
		}
		_, body := mcpPost(t, up.url, "tools/call", "pay", toolParams("pay", `{"amount":5}`, ""), nil)
		plain := parseAnswer(t, body).Result.RequestState
		if _, body := mcpPostBody(t, up.url, "tools/call", "pay", second(plain), nil); !strings.Contains(body, `arguments={\"amount\": 5000}`) {
			t.Fatalf("the upstream alone answered %s; want it to act on the fullwidth arguments", body)
		}
		url := startProxy(t, s, up.url, "--principal", "bearer", "--one-time-tools", "pay")
		_, body = mcpPost(t, url, "tools/call", "pay", toolParams("pay", `{"amount":5}`, ""), nil)
		sealed := parseAnswer(t, body).Result.RequestState
		if sealed == "" || sealed == plain {
			t.Fatalf("round 1 through the proxy: %s; want a sealed state", body)
		}
		before := up.calls(t)
		status, body := mcpPostBody(t, url, "tools/call", "pay", second(sealed), nil)
		if a := parseAnswer(t, body); a.Error == nil || up.calls(t) != before {
			t.Errorf("round 2 through the proxy: HTTP %d %s, %d upstream calls; want a JSON-RPC error and none", status, body, up.calls(t)-before)
		}
	})
}
