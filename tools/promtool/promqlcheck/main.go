// Command promqlcheck checks the sealer's Prometheus rule files and Grafana
// dashboards against metrics scraped from a running sealer: every PromQL
// expression parses (with the parser of the pinned Prometheus), names only
// metrics present in the scrapes, selects and groups only by labels those
// metrics carry (or that Prometheus adds to every target), and matches label
// values only from the allowed sets given with -values.
//
//	promqlcheck -metrics scrape.txt -values reason=OK,EXPIRED alerts.yaml dashboard.json
//
// Rule files end in .yaml or .yml, dashboards in .json. It prints one line
// per expression and exits 1 if any check fails.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// targetLabels are the labels Prometheus adds to every scraped series (the
// Kubernetes service discovery of a ServiceMonitor included).
var targetLabels = []string{"namespace", "job", "instance", "pod"}

// prometheusSeries are the series Prometheus itself writes for each target:
// no scrape holds them.
var prometheusSeries = map[string]bool{"up": true}

// exposed is what the scrapes hold: each metric name with its label names,
// and each label name with the values it takes.
type exposed struct {
	labels map[string]map[string]bool
	values map[string]map[string]bool
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var metricsFiles, values listFlag
	flag.Var(&metricsFiles, "metrics", "a scrape of /metrics in the text format (repeatable; their union is checked against)")
	flag.Var(&values, "values", "label=v1,v2: the only values matchers of that label may name (repeatable)")
	flag.Parse()
	if len(metricsFiles) == 0 || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: promqlcheck -metrics FILE [-values label=v1,v2] RULES.yaml|DASHBOARD.json...")
		os.Exit(2)
	}
	c := checker{exposed: exposed{labels: map[string]map[string]bool{}, values: map[string]map[string]bool{}},
		allowed: map[string][]string{}, out: os.Stdout}
	for _, f := range metricsFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		if err := c.exposed.add(bytes.NewReader(b)); err != nil {
			fail(fmt.Errorf("%s: %w", f, err))
		}
	}
	for _, v := range values {
		label, list, ok := strings.Cut(v, "=")
		if !ok {
			fail(fmt.Errorf("-values %q: want label=v1,v2", v))
		}
		c.allowed[label] = strings.Split(list, ",")
	}
	c.domains()
	for _, f := range flag.Args() {
		c.file(f)
	}
	fmt.Fprintf(c.out, "%d expressions in %d files, %d metric names used, %d problems\n", c.exprs, flag.NArg(), len(c.used), c.problems)
	if c.problems > 0 {
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "promqlcheck:", err)
	os.Exit(2)
}

// add reads one scrape. A histogram named x exposes x_bucket (with le),
// x_sum and x_count; a summary x, x_sum and x_count.
func (e *exposed) add(r io.Reader) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return err
	}
	for name, f := range families {
		names := []string{name}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names = []string{name + "_bucket", name + "_sum", name + "_count"}
		case dto.MetricType_SUMMARY:
			names = []string{name, name + "_sum", name + "_count"}
		}
		for _, n := range names {
			if e.labels[n] == nil {
				e.labels[n] = map[string]bool{}
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					e.labels[n][l.GetName()] = true
					if e.values[l.GetName()] == nil {
						e.values[l.GetName()] = map[string]bool{}
					}
					e.values[l.GetName()][l.GetValue()] = true
				}
			}
			switch {
			case strings.HasSuffix(n, "_bucket"):
				e.labels[n]["le"] = true
			case f.GetType() == dto.MetricType_SUMMARY && n == name:
				e.labels[n]["quantile"] = true
			}
		}
	}
	return nil
}

type checker struct {
	exposed  exposed
	allowed  map[string][]string
	used     map[string]bool
	exprs    int
	problems int
	out      io.Writer
}

// domains checks that the scrapes hold no value outside a label's allowed
// set: the sets given are the labels' whole domains.
func (c *checker) domains() {
	for label, allowed := range c.allowed {
		for v := range c.exposed.values[label] {
			if !slices.Contains(allowed, v) {
				c.problem("scrapes", "%s=%q is not one of %s", label, v, strings.Join(allowed, " "))
			}
		}
	}
}

func (c *checker) problem(where, format string, args ...any) {
	c.problems++
	fmt.Fprintf(c.out, "FAIL %s: %s\n", where, fmt.Sprintf(format, args...))
}

func (c *checker) file(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		c.problem(path, "%v", err)
		return
	}
	switch {
	case strings.HasSuffix(path, ".yaml"), strings.HasSuffix(path, ".yml"):
		c.rules(path, b)
	case strings.HasSuffix(path, ".json"):
		c.dashboard(path, b)
	default:
		c.problem(path, "neither a rule file (.yaml) nor a dashboard (.json)")
	}
}

var promql = parser.NewParser(parser.Options{})

// rules checks every expression of a Prometheus rule file.
func (c *checker) rules(path string, b []byte) {
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		c.problem(path, "%v", err)
	}
	if groups == nil {
		return
	}
	for _, g := range groups.Groups {
		for i, r := range g.Rules {
			name := r.Alert + r.Record
			c.expr(fmt.Sprintf("%s: group %s rule %d (%s)", path, g.Name, i+1, name), r.Expr)
		}
	}
}

// dashboard checks every query of a Grafana dashboard: the panels' targets
// (rows and nested panels included) and the template variables' queries.
func (c *checker) dashboard(path string, b []byte) {
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		c.problem(path, "%v", err)
		return
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		var obj struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				c.problem(path, "variable %s: query is neither a string nor an object with a query: %v", v.Name, err)
				continue
			}
			q = obj.Query
		}
		c.variableQuery(fmt.Sprintf("%s: variable %s", path, v.Name), q, vars)
	}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				where := fmt.Sprintf("%s: panel %q target %s", path, p.Title, t.RefID)
				if t.Expr == "" {
					c.problem(where, "no expr")
					continue
				}
				if expr, ok := c.substitute(where, t.Expr, vars); ok {
					c.expr(where, expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// variableQuery checks a template variable's query: only
// label_values(selector, label) is accepted, and its label must be one the
// selected metric carries.
func (c *checker) variableQuery(where, q string, vars map[string]bool) {
	m := labelValues.FindStringSubmatch(q)
	if m == nil {
		c.problem(where, "query %q: only label_values(selector, label) is checked, so only it is allowed", q)
		return
	}
	selector, ok := c.substitute(where, m[1], vars)
	if !ok {
		return
	}
	if !c.expr(where, selector) {
		return
	}
	e, _ := promql.ParseExpr(selector)
	vs, ok := e.(*parser.VectorSelector)
	if !ok {
		c.problem(where, "%q is not a metric selector", m[1])
		return
	}
	if name := metricName(vs); !c.exposed.labels[name][m[2]] && !slices.Contains(targetLabels, m[2]) {
		c.problem(where, "label_values: %s has no label %q", name, m[2])
	}
}

// grafanaVariable is a Grafana variable reference: $name, ${name},
// ${name:format} or [[name]].
var grafanaVariable = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)(?::[a-zA-Z]+)?\}|\$([a-zA-Z0-9_]+)|\[\[([a-zA-Z0-9_]+)\]\]`)

// intervals are Grafana's built-in variables that stand for a duration.
var intervals = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}

// substitute replaces each Grafana variable with a value of its kind: a
// duration for the built-in intervals, a label value for the dashboard's own
// variables. An unknown variable is a problem.
func (c *checker) substitute(where, q string, vars map[string]bool) (string, bool) {
	ok := true
	out := grafanaVariable.ReplaceAllStringFunc(q, func(ref string) string {
		m := grafanaVariable.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		switch {
		case intervals[name]:
			return "5m"
		case vars[name]:
			return "value"
		}
		c.problem(where, "unknown variable $%s", name)
		ok = false
		return ref
	})
	return out, ok
}

// metricName is the name a selector selects, from its name or an equality
// matcher on __name__; "" if neither.
func metricName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// expr checks one expression and reports whether it passed.
func (c *checker) expr(where, q string) bool {
	c.exprs++
	before := c.problems
	e, err := promql.ParseExpr(q)
	if err != nil {
		c.problem(where, "does not parse: %v", err)
		return false
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			if name := c.selector(where, n); name != "" {
				names = append(names, name)
			}
		case *parser.AggregateExpr:
			if !n.Without {
				c.grouping(where, n.Op.String()+" by", n.Grouping, n.Expr)
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && vm.On {
				c.grouping(where, "on", vm.MatchingLabels, n.LHS, n.RHS)
			}
		}
		return nil
	})
	if c.problems == before {
		slices.Sort(names)
		fmt.Fprintf(c.out, "ok   %s: %s\n", where, strings.Join(slices.Compact(names), " "))
	}
	return c.problems == before
}

// selector checks one metric selector and returns the metric it names.
func (c *checker) selector(where string, vs *parser.VectorSelector) string {
	name := metricName(vs)
	if name == "" {
		c.problem(where, "selector %s names no metric", vs)
		return ""
	}
	if c.used == nil {
		c.used = map[string]bool{}
	}
	c.used[name] = true
	has, exposed := c.exposed.labels[name]
	if !exposed && !prometheusSeries[name] {
		c.problem(where, "metric %s is not in the scrapes", name)
		return ""
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName {
			continue
		}
		if !has[m.Name] && !slices.Contains(targetLabels, m.Name) {
			c.problem(where, "%s has no label %q", name, m.Name)
			continue
		}
		allowed, restricted := c.allowed[m.Name]
		if !restricted {
			continue
		}
		values := []string{m.Value}
		if m.Type == labels.MatchRegexp || m.Type == labels.MatchNotRegexp {
			if values = m.SetMatches(); values == nil {
				c.problem(where, "%s: the regexp %q is not a list of values to check", name, m.Value)
				continue
			}
		}
		for _, v := range values {
			if !slices.Contains(allowed, v) {
				c.problem(where, "%s{%s}: %q is not one of %s", name, m.Name, v, strings.Join(allowed, " "))
			}
		}
	}
	return name
}

// grouping checks that each label of a by or on clause is carried by some
// metric the operands select, or added by Prometheus.
func (c *checker) grouping(where, clause string, grouping []string, operands ...parser.Node) {
	carried := map[string]bool{}
	for _, op := range operands {
		parser.Inspect(op, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				for l := range c.exposed.labels[metricName(vs)] {
					carried[l] = true
				}
			}
			return nil
		})
	}
	var missing []string
	for _, l := range grouping {
		if !carried[l] && !slices.Contains(targetLabels, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		c.problem(where, "%s (%s): no selected metric carries %s", clause, strings.Join(grouping, ", "), strings.Join(missing, ", "))
	}
}
