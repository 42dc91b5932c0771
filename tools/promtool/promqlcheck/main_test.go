package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const scrape = `# TYPE sealer_calls_total counter
sealer_calls_total{method="Open",reason="OK",service="sealer.v1.Sealer",tenant="default"} 1
# TYPE sealer_call_duration_seconds histogram
sealer_call_duration_seconds_bucket{method="Open",service="sealer.v1.Sealer",tenant="default",le="0.001"} 1
sealer_call_duration_seconds_bucket{method="Open",service="sealer.v1.Sealer",tenant="default",le="+Inf"} 1
sealer_call_duration_seconds_sum{method="Open",service="sealer.v1.Sealer",tenant="default"} 0.0001
sealer_call_duration_seconds_count{method="Open",service="sealer.v1.Sealer",tenant="default"} 1
# TYPE sealer_ready gauge
sealer_ready 1
`

func newChecker(t *testing.T, values map[string][]string) (*checker, *bytes.Buffer) {
	t.Helper()
	out := &bytes.Buffer{}
	c := &checker{exposed: exposed{labels: map[string]map[string]bool{}, values: map[string]map[string]bool{}}, allowed: values, out: out}
	if err := c.exposed.add(strings.NewReader(scrape)); err != nil {
		t.Fatal(err)
	}
	c.domains()
	return c, out
}

func TestExpr(t *testing.T) {
	reasons := map[string][]string{"reason": {"OK", "INTERNAL", "EXPIRED"}}
	for _, tc := range []struct {
		expr string
		want string // "" for no problem, else a part of the problem
	}{
		{`sealer_ready == 0`, ""},
		{`up == 0 and on (job) group by (job) (sealer_ready)`, ""},
		{`sum by (namespace, tenant) (rate(sealer_calls_total{reason=~"INTERNAL|EXPIRED"}[5m]))`, ""},
		{`histogram_quantile(0.99, sum by (tenant, method, le) (rate(sealer_call_duration_seconds_bucket[5m])))`, ""},
		{`rate(sealer_call_duration_seconds_count[5m]) / rate(sealer_call_duration_seconds_sum[5m])`, ""},
		{`{__name__="sealer_ready"}`, ""},
		{`sealer_ready ==`, "does not parse"},
		{`sealer_readyy == 0`, "metric sealer_readyy is not in the scrapes"},
		{`sealer_call_duration_seconds > 0`, "metric sealer_call_duration_seconds is not in the scrapes"},
		{`sealer_calls_total{tennant="a"}`, `has no label "tennant"`},
		{`sealer_calls_total{reason="INTERNAL_ERROR"}`, `"INTERNAL_ERROR" is not one of`},
		{`sealer_calls_total{reason=~"INTERNAL|LEDGER_DOWN"}`, `"LEDGER_DOWN" is not one of`},
		{`sealer_calls_total{reason=~"INTERNAL.*"}`, "is not a list of values"},
		{`sum by (tennant) (sealer_calls_total)`, "no selected metric carries tennant"},
		{`sealer_ready and on (tenant) sealer_ready`, "no selected metric carries tenant"},
		{`{__name__=~"sealer_.*"}`, "names no metric"},
	} {
		c, out := newChecker(t, reasons)
		ok := c.expr("test", tc.expr)
		if tc.want == "" && (!ok || c.problems != 0) {
			t.Errorf("%s: got %s; want no problem", tc.expr, out)
		}
		if tc.want != "" && (ok || !strings.Contains(out.String(), tc.want)) {
			t.Errorf("%s: got %s; want a problem with %q", tc.expr, out, tc.want)
		}
	}
}

func TestDomains(t *testing.T) {
	c, out := newChecker(t, map[string][]string{"method": {"Seal"}})
	if c.problems != 1 || !strings.Contains(out.String(), `method="Open" is not one of Seal`) {
		t.Fatalf("a scraped value outside -values: got %d problems: %s", c.problems, out)
	}
}

func write(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRuleFile(t *testing.T) {
	c, out := newChecker(t, nil)
	c.file(write(t, "ok.yaml", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: sealer_ready == 0\n      - record: r\n        expr: sum(sealer_ready)\n"))
	if c.problems != 0 || c.exprs != 2 {
		t.Fatalf("a good rule file: %d problems in %d expressions: %s", c.problems, c.exprs, out)
	}
	c, out = newChecker(t, nil)
	c.file(write(t, "bad.yaml", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: sealer_ready == 0\n        unknown: 1\n"))
	if c.problems == 0 {
		t.Fatalf("a rule with an unknown field passed: %s", out)
	}
}

func TestDashboard(t *testing.T) {
	good := `{"templating": {"list": [
	  {"type": "datasource", "name": "datasource", "query": "prometheus"},
	  {"type": "query", "name": "tenant", "query": {"query": "label_values(sealer_calls_total{job=~\"$job\"}, tenant)"}},
	  {"type": "query", "name": "job", "query": "label_values(sealer_ready, job)"}]},
	 "panels": [
	  {"type": "row", "title": "r", "panels": [
	    {"title": "nested", "targets": [{"refId": "A", "expr": "sum by (tenant) (rate(sealer_calls_total{tenant=~\"${tenant:regex}\"}[$__rate_interval]))"}]}]},
	  {"title": "p", "targets": [{"refId": "A", "expr": "sealer_ready{job=~\"$job\"}"}]}]}`
	c, out := newChecker(t, nil)
	c.file(write(t, "good.json", good))
	if c.problems != 0 || c.exprs != 4 {
		t.Fatalf("a good dashboard: %d problems in %d expressions: %s", c.problems, c.exprs, out)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"unknown variable", `{"panels": [{"title": "p", "targets": [{"refId": "A", "expr": "sealer_ready{job=~\"$job\"}"}]}]}`, "unknown variable $job"},
		{"missing metric", `{"panels": [{"title": "p", "targets": [{"refId": "A", "expr": "sealer_nope"}]}]}`, "not in the scrapes"},
		{"empty expr", `{"panels": [{"title": "p", "targets": [{"refId": "A"}]}]}`, "no expr"},
		{"variable label", `{"templating": {"list": [{"type": "query", "name": "t", "query": "label_values(sealer_ready, tenant)"}]}}`, `has no label "tenant"`},
		{"variable query", `{"templating": {"list": [{"type": "query", "name": "t", "query": "query_result(sealer_ready)"}]}}`, "only label_values"},
	} {
		c, out := newChecker(t, nil)
		c.file(write(t, "d.json", tc.body))
		if c.problems == 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: got %s; want a problem with %q", tc.name, out, tc.want)
		}
	}
}

// FuzzDashboard: no dashboard text makes the checker panic, and a problem
// is always reported for an expression it did not pass.
func FuzzDashboard(f *testing.F) {
	f.Add(`{"templating": {"list": [{"type": "query", "name": "t", "query": "label_values(sealer_ready, job)"}]}, "panels": [{"targets": [{"refId": "A", "expr": "sealer_ready{job=~\"$t\"}[$__rate_interval]"}]}]}`)
	f.Add(`{"panels": [{"panels": [{"targets": [{"expr": "sum by (x) (${y:regex})"}]}]}]}`)
	f.Add(`{"templating": {"list": [{"type": "query", "name": "t", "query": {"query": "label_values(, )"}}]}}`)
	f.Fuzz(func(t *testing.T, body string) {
		c, out := newChecker(t, map[string][]string{"reason": {"OK"}})
		before := c.exprs
		c.dashboard("fuzz", []byte(body))
		if c.exprs > before && c.problems == 0 && !strings.Contains(out.String(), "ok   fuzz") {
			t.Fatalf("expressions checked with no problem and no ok line: %s", out)
		}
	})
}
