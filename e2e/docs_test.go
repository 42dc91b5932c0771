package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/internal/testredis"
)

// The documentation a user reads: the README, the pages under docs/ and the
// READMEs of the client packages.
var docPages = []string{"README.md", "docs/*.md", "clients/*/README.md"}

// block is one fenced code block of a Markdown page.
type block struct {
	page    string // relative to the repository root
	line    int    // of the opening fence
	info    string // the info string: "go", "go fragment", "sh", ...
	section string // the heading the block is under
	text    string
}

func (b block) String() string { return b.page + ":" + strconv.Itoa(b.line) + " (```" + b.info + ")" }

var fence = regexp.MustCompile("^(\\s*)(```+)\\s*(.*)$")

// blocks returns the fenced code blocks of the documentation pages.
func blocks(t *testing.T) []block {
	t.Helper()
	var all []block
	for _, pattern := range docPages {
		pages, err := filepath.Glob(filepath.Join("..", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, page := range pages {
			text, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel("..", page)
			all = append(all, parseBlocks(rel, string(text))...)
		}
	}
	if len(all) == 0 {
		t.Fatal("no code blocks found in the documentation")
	}
	return all
}

// parseBlocks splits a Markdown page into its fenced code blocks, each with
// the heading it is under; fences may be indented (in a list item).
func parseBlocks(page, text string) []block {
	var out []block
	var cur *block
	var indent, ticks, section string
	var body strings.Builder
	for i, line := range strings.Split(text, "\n") {
		m := fence.FindStringSubmatch(line)
		switch {
		case cur == nil && m != nil:
			indent, ticks = m[1], m[2]
			cur = &block{page: page, line: i + 1, info: strings.TrimSpace(m[3]), section: section}
			body.Reset()
		case cur != nil && m != nil && m[2] == ticks && m[3] == "":
			cur.text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(strings.TrimPrefix(line, indent))
			body.WriteByte('\n')
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	return out
}

// goMod returns the go.mod a module outside the repository uses, as
// docs/GO.md writes it, with its replace lines pointed at this checkout;
// every other go.mod block of the pages must be a part of it.
func goMod(t *testing.T, all []block) string {
	t.Helper()
	var whole string
	var parts []block
	for _, b := range all {
		if b.info != "go.mod" {
			continue
		}
		if strings.HasPrefix(b.text, "module ") {
			if whole != "" {
				t.Fatalf("%v: a second whole go.mod; keep one, in docs/GO.md", b)
			}
			whole = b.text
			continue
		}
		parts = append(parts, b)
	}
	if whole == "" {
		t.Fatal("no go.mod block starting with `module` in the documentation (docs/GO.md)")
	}
	for _, b := range parts {
		for _, line := range strings.Split(b.text, "\n") {
			if strings.TrimSpace(line) != "" && !strings.Contains(whole, line+"\n") {
				t.Errorf("%v: %q is not in the go.mod of docs/GO.md", b, line)
			}
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(whole, "=> ../sealer\n") {
		t.Fatalf("the go.mod of docs/GO.md replaces no module with ../sealer, the clone it speaks of:\n%s", whole)
	}
	return strings.ReplaceAll(whole, "=> ../sealer", "=> "+root)
}

// TestDocs_GoSnippetsBuild builds every ```go block of the documentation as
// a user outside the repository would: each in a module of its own, with
// the go.mod of docs/GO.md (its replace lines pointed at this checkout),
// go mod tidy, go build. A block marked ```go fragment is deliberately not
// a whole file, and is skipped.
func TestDocs_GoSnippetsBuild(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	all := blocks(t)
	mod := goMod(t, all)
	built := 0
	for _, b := range all {
		fields := strings.Fields(b.info)
		if len(fields) == 0 || fields[0] != "go" {
			continue
		}
		if len(fields) > 1 && fields[1] == "fragment" {
			t.Logf("%v: a fragment, not built", b)
			continue
		}
		built++
		t.Run(strings.ReplaceAll(b.page, "/", "_")+"_"+strconv.Itoa(b.line), func(t *testing.T) {
			if _, err := parser.ParseFile(token.NewFileSet(), "snippet.go", b.text, parser.PackageClauseOnly); err != nil {
				t.Fatalf("%v is not a whole Go file (mark it ```go fragment if it is meant as one): %v", b, err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "snippet.go"), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			// The release build's flags, as TestMain builds the binaries
			// with: the packages they share compile once.
			for _, args := range [][]string{{"mod", "tidy"}, {"build", "-trimpath", "-o", filepath.Join(dir, "snippet"), "."}} {
				cmd := exec.Command("go", args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%v: go %s: %v\n%s", b, strings.Join(args, " "), err, out)
				}
			}
		})
	}
	if built == 0 {
		t.Fatal("no ```go block to build: the Go page (docs/GO.md) has a whole program")
	}
}

// TestDocs_JSONBlocksParse: every ```json block is JSON.
func TestDocs_JSONBlocksParse(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, b := range blocks(t) {
		if b.info == "json" && !json.Valid([]byte(b.text)) {
			t.Errorf("%v: not valid JSON:\n%s", b, b.text)
		}
	}
}

// The README's prerequisite line for grpcurl, whose version the test installs.
var grpcurlInstall = regexp.MustCompile(`go install (github\.com/fullstorydev/grpcurl/cmd/grpcurl@v[0-9.]+)`)

// TestDocs_RoundTripAsWritten runs the README's round trip as written (its
// ```sh blocks, in order, in one shell) against a sealer started as the
// README's run command starts it (the default command on its defaults; only
// the addresses are free ports, substituted into the commands), with the
// grpcurl the README names, and holds each output to the sample written
// under its command: the same members, the same values but for states
// ("AQAA...") and times. Then it sends the wire example of docs/API.md.
func TestDocs_RoundTripAsWritten(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	all := blocks(t)
	var script, samples strings.Builder
	var readme string
	for _, b := range all {
		if b.page != "README.md" || b.section != "A round trip" || b.info != "sh" {
			continue
		}
		script.WriteString(b.text)
		for _, line := range strings.Split(b.text, "\n") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
				samples.WriteString(s + "\n")
			}
		}
	}
	if script.Len() == 0 {
		t.Fatal("README.md: no ```sh block under \"A round trip\"")
	}
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme = string(text)
	for _, want := range []string{"```\ngo run ./cmd/sealer\n```", "```\n./scripts/test.sh\n```"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md: the command %q is gone", want)
		}
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s, which the README's round trip needs, is not installed", tool)
			}
			t.Skipf("%s, which the README's round trip needs, is not installed", tool)
		}
	}
	m := grpcurlInstall.FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md: no `go install github.com/fullstorydev/grpcurl/cmd/grpcurl@vX.Y.Z` line")
	}
	bin := t.TempDir()
	// -trimpath, as TestMain builds the binaries: the standard library
	// compiles once for both.
	install := exec.Command("go", "install", "-trimpath", m[1])
	install.Dir, install.Env = bin, append(os.Environ(), "GOBIN="+bin, "CGO_ENABLED=0", "GOWORK=off")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", m[1], err, out)
	}

	p := start(t, t.TempDir())
	sh := strings.NewReplacer("127.0.0.1:7443", p.GRPC, "localhost:7080", p.HTTP).Replace(script.String())
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", sh)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the README's round trip failed: %v\n%s\n%s", err, out, stderr.String())
	}
	got, err := jsonValues(string(out))
	if err != nil {
		t.Fatalf("the round trip's output is not a run of JSON values: %v\n%s", err, out)
	}
	want, err := jsonValues(samples.String())
	if err != nil {
		t.Fatalf("README.md: the round trip's samples (# lines) are not a run of JSON values: %v\n%s", err, samples.String())
	}
	if len(got) != len(want) {
		t.Fatalf("the round trip printed %d values, the README shows %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if err := like(want[i], got[i], "$"); err != nil {
			t.Errorf("output %d: %v\ngot  %s\nwant %s", i+1, err, compact(got[i]), compact(want[i]))
		}
	}

	t.Run("wire example", func(t *testing.T) { wireExample(t, all, p) })
}

// wireExample sends the Open of docs/API.md, "On the wire", with a state
// sealed for it in place of its placeholder: the sealer must accept it as
// written.
func wireExample(t *testing.T, all []block, p *proc) {
	var example string
	for _, b := range all {
		if b.page == "docs/API.md" && b.section == "On the wire" && b.info == "json" {
			example = b.text
		}
	}
	if example == "" {
		t.Fatal("docs/API.md: no ```json block under \"On the wire\"")
	}
	var open struct {
		RequestState string `json:"requestState"`
		Principal    string `json:"principal"`
		Request      struct {
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		} `json:"request"`
	}
	if err := json.Unmarshal([]byte(example), &open); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(open.Request.Params["_meta"]), "clientCapabilities") {
		t.Errorf("docs/API.md: the wire example's _meta has no clientCapabilities, which the MCP SDKs require")
	}
	seal, _ := json.Marshal(map[string]any{"principal": open.Principal, "payload": "eyJzdGVwIjoxfQ==",
		"request": map[string]any{"method": open.Request.Method, "params": map[string]json.RawMessage{
			"name": open.Request.Params["name"], "arguments": open.Request.Params["arguments"]}}})
	sealed := post(t, "http://"+p.HTTP+"/v1/seal", string(seal))
	state, _ := sealed["requestState"].(string)
	if state == "" {
		t.Fatalf("seal: %v", sealed)
	}
	opened := post(t, "http://"+p.HTTP+"/v1/open", strings.ReplaceAll(example, open.RequestState, state))
	if opened["payload"] != "eyJzdGVwIjoxfQ==" {
		t.Fatalf("the wire example did not open: %v", opened)
	}
}

func post(t *testing.T, url, body string) map[string]any {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// jsonValues decodes a run of JSON values, as the commands print them one
// after the other.
func jsonValues(s string) ([]any, error) {
	var vs []any
	d := json.NewDecoder(strings.NewReader(s))
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			return vs, nil
		}
		if err != nil {
			return vs, err
		}
		vs = append(vs, v)
	}
}

// like reports how got differs from the sample want: objects have the same
// members, arrays the same length, and values are equal, but for a sample
// string ending in "..." (a state: any string) or one that is a time (any
// time).
func like(want, got any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %s, want an object", path, compact(got))
		}
		for k := range w {
			if _, ok := g[k]; !ok {
				return fmt.Errorf("%s: no member %q", path, k)
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				return fmt.Errorf("%s: member %q is not in the README's sample", path, k)
			}
			if err := like(w[k], g[k], path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %s, want %d elements", path, compact(got), len(w))
		}
		for i := range w {
			if err := like(w[i], g[i], path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return nil
	case string:
		g, ok := got.(string)
		if !ok {
			return fmt.Errorf("%s: got %s, want a string", path, compact(got))
		}
		if strings.HasSuffix(w, "...") {
			return nil
		}
		if _, err := time.Parse(time.RFC3339Nano, w); err == nil {
			if _, err := time.Parse(time.RFC3339Nano, g); err != nil {
				return fmt.Errorf("%s: got %q, want a time", path, g)
			}
			return nil
		}
		if g != w {
			return fmt.Errorf("%s: got %q, want %q", path, g, w)
		}
		return nil
	default:
		if compact(want) != compact(got) {
			return fmt.Errorf("%s: got %s, want %s", path, compact(got), compact(want))
		}
		return nil
	}
}

func compact(v any) string { b, _ := json.Marshal(v); return string(b) }

// docMetric is a metric name as the pages write it.
var docMetric = regexp.MustCompile(`\bsealer_[a-z0-9_]*[a-z0-9]`)

// docBullet returns the top-level bullet of page that starts with
// "- **title", up to the next top-level bullet or heading.
func docBullet(t *testing.T, page, title string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", page))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(text), "\n") {
		top := strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "#")
		switch {
		case strings.HasPrefix(line, "- **"+title):
			in = true
		case in && top:
			return strings.Join(out, "\n")
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s: no bullet %q", page, title)
	}
	return strings.Join(out, "\n")
}

// codeMetrics returns the metric names the Go code under dirs registers:
// every string literal of its non-test files that is a metric name.
func codeMetrics(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	lit := regexp.MustCompile(`^"(sealer_[a-z0-9_]+)"$`)
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.STRING {
					if m := lit.FindStringSubmatch(b.Value); m != nil {
						names[m[1]] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// TestDocs_MetricsAsRegistered: the Metrics list of docs/OPERATIONS.md is
// the set of metrics the sealer registers, no more and no fewer; every
// metric named anywhere in docs/OPERATIONS.md and docs/RUNBOOK.md exists;
// and what a running sealer with a Redis ledger exposes is among them (so
// the source scan misses none).
func TestDocs_MetricsAsRegistered(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	registered := codeMetrics(t, "server", "keys", "ledger")
	proxied := codeMetrics(t, "proxy")
	documented := map[string]bool{}
	for _, name := range docMetric.FindAllString(docBullet(t, "docs/OPERATIONS.md", "Metrics."), -1) {
		documented[name] = true
	}
	for name := range registered {
		if !documented[name] {
			t.Errorf("%s is registered but missing from docs/OPERATIONS.md, Metrics", name)
		}
	}
	for name := range documented {
		if !registered[name] {
			t.Errorf("docs/OPERATIONS.md, Metrics lists %s, which the sealer does not register", name)
		}
	}
	for _, page := range []string{"docs/OPERATIONS.md", "docs/RUNBOOK.md"} {
		text, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range docMetric.FindAllString(string(text), -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && registered[b] {
					base = b
				}
			}
			if !registered[base] && !proxied[base] {
				t.Errorf("%s names %s, which neither the sealer nor the proxy registers", page, name)
			}
		}
	}

	srv := testredis.Start(t, false)
	p := start(t, t.TempDir(), "--ledger", srv.URL())
	resp, err := http.Get("http://" + p.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	exposed := 0
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[1] == "TYPE" && strings.HasPrefix(f[2], "sealer_") {
			exposed++
			if !registered[f[2]] {
				t.Errorf("the sealer exposes %s, which the source scan did not find", f[2])
			}
		}
	}
	if exposed == 0 {
		t.Fatalf("no sealer_ metric exposed:\n%s", body)
	}
}

// TestDocs_RedisKeysAsWritten: the Redis keys docs/OPERATIONS.md names are
// the ones the ledger writes: a one-time open's key, read back from a real
// Redis, and a flow's (flowKey, which TestRedisHA_Flows holds to Redis).
func TestDocs_RedisKeysAsWritten(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	text, err := os.ReadFile(filepath.Join("..", "docs/OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	placeholder := regexp.MustCompile(`<[^>]+>`)
	patterns := map[string]*regexp.Regexp{}
	for _, m := range regexp.MustCompile("`(sealer:v1:(consumed|flow):[^`*]*)`").FindAllStringSubmatch(string(text), -1) {
		if !strings.Contains(m[1], "<") {
			continue // an example, not the form
		}
		quoted := placeholder.ReplaceAllStringFunc(m[1], func(string) string { return "\x00" })
		quoted = strings.ReplaceAll(regexp.QuoteMeta(quoted), "\x00", `[^:]+`)
		patterns[m[1]] = regexp.MustCompile("^" + quoted + "$")
	}
	if len(patterns) < 2 {
		t.Fatalf("docs/OPERATIONS.md names %d Redis keys, want the consumed and the flow key", len(patterns))
	}

	srv := testredis.Start(t, false)
	p := start(t, t.TempDir(), "--ledger", srv.URL())
	a := newGRPC(t, p)
	state := mustSeal(t, a, sealBody("alice", weatherParams, "once", `,"oneTime":true`))
	expectReason(t, a, "open", openBody(state, "alice", weatherParams), "OK")
	written, err := srv.Client(t).Keys(context.Background(), "sealer:v1:*").Result()
	if err != nil || len(written) == 0 { // the state's, and readiness's probe
		t.Fatalf("keys in Redis: %v, %v; want the consumed state's", written, err)
	}
	written = append(written, flowKey(t, "default", base64.StdEncoding.EncodeToString(make([]byte, 16))))
	for _, key := range written {
		kind := strings.Split(key, ":")[2]
		found := false
		for doc, re := range patterns {
			if strings.HasPrefix(doc, "sealer:v1:"+kind+":") {
				found = true
				if !re.MatchString(key) {
					t.Errorf("docs/OPERATIONS.md writes %s; the ledger writes %s", doc, key)
				}
			}
		}
		if !found {
			t.Errorf("docs/OPERATIONS.md names no %s key", kind)
		}
	}
}

// TestDocs_TLSAsWritten runs the openssl commands of docs/TLS.md as written
// (every ```sh block that makes or checks a certificate), serves a sealer
// with the serving pair and the page's tenants file, and calls it with the
// client certificate the page makes: the sealer answers, verified by the
// page's CA, for the tenant the page names. The private keys are born
// private (the page's umask): the sealer accepts them as they are.
func TestDocs_TLSAsWritten(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	for _, tool := range []string{"bash", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s, which docs/TLS.md uses, is not installed", tool)
		}
	}
	var script strings.Builder
	var tenants string
	for _, b := range blocks(t) {
		switch {
		case b.page != "docs/TLS.md":
		case b.info == "yaml":
			tenants = b.text
		case b.info == "sh" && !strings.Contains(b.text, "curl") && !strings.Contains(b.text, "sealer check-config"):
			script.WriteString(b.text)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script.String())
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/TLS.md's commands: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "tenants.yaml"), []byte(tenants), 0o600); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	p := start(t, t.TempDir(), "--tls-cert", in("tls.pem"), "--tls-key", in("tls-key.pem"),
		"--tls-client-ca", in("ca.pem"), "--tenants", in("tenants.yaml"))
	roots := x509.NewCertPool()
	caPEM, _ := os.ReadFile(in("ca.pem"))
	roots.AppendCertsFromPEM(caPEM)
	client, err := tls.LoadX509KeyPair(in("weather.pem"), in("weather-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(p.HTTP, ":")
	a := restAPI{base: "https://localhost:" + port, client: &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}}}}}
	mustSeal(t, a, sealBody("alice", weatherParams, "x", ""))
	// The answer may reach us before the sealer's log line does.
	waitFor(t, "a call logged for the tenant weather-team", 5*time.Second, func() bool {
		return strings.Contains(p.logs.String(), `"tenant":"weather-team"`)
	})
}
