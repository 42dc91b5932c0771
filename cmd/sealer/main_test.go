package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/server"
)

// TestHelp_EveryCommandPrintsHelpAndActsNot: -h and --help on every command
// print its help on stdout, end in flag.ErrHelp (exit 0), and do nothing:
// no key file named "--help", no state inspected, no server started.
func TestHelp_EveryCommandPrintsHelpAndActsNot(t *testing.T) {
	t.Chdir(t.TempDir())
	var runs [][]string
	for _, h := range []string{"-h", "--help", "-help"} {
		runs = append(runs, []string{h})
		for name := range commands {
			runs = append(runs, []string{name, h})
		}
	}
	runs = append(runs, []string{"keygen", "--add", "--help"}, []string{"serve", "--grpc-addr", "127.0.0.1:0", "-h"},
		[]string{"keygen", "k.json", "--help"}, []string{"keygen", "--", "--help"}, []string{"inspect", "STATE", "-h"},
		[]string{"help", "keygen"}, []string{"help", "check-config"})
	for _, args := range runs {
		var stdout, stderr bytes.Buffer
		err := run(args, &stdout, &stderr)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: %v, want flag.ErrHelp (exit 0)", args, err)
		}
		if !strings.Contains(stdout.String(), "usage: sealer") || stderr.Len() != 0 {
			t.Errorf("%q: stdout %q, stderr %q; want the help on stdout only", args, stdout.String(), stderr.String())
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("help wrote files: %v", entries)
	}
}

// TestServeHelp_GroupsEveryFlag: serve --help lists every flag once, in a
// group, with its variable.
func TestServeHelp_GroupsEveryFlag(t *testing.T) {
	cfg := server.Defaults()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	defineServeFlags(fs, &cfg)
	seen := map[string]int{}
	for _, g := range serveGroups {
		for _, name := range g.flags {
			seen[name]++
			if fs.Lookup(name) == nil {
				t.Errorf("group %q names %q, which is no flag", g.title, name)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if seen[f.Name] != 1 {
			t.Errorf("flag %q is in %d groups, want 1", f.Name, seen[f.Name])
		}
	})
	var out bytes.Buffer
	if err := run([]string{"serve", "--help"}, &out, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"Vault (keys vault-transit, vault-transit-exportable, vault-kv):", "--grpc-addr string", "variable SEALER_GRPC_ADDR, default 127.0.0.1:7443", "variable SEALER_SHUTDOWN_DELAY"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out bytes.Buffer
		if err := run(args, &out, &out); err != nil || !strings.HasPrefix(out.String(), "sealer ") || !strings.Contains(out.String(), "commit ") {
			t.Errorf("%q: %q, %v", args, out.String(), err)
		}
	}
}

func TestKeygen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	var out bytes.Buffer
	if err := run([]string{"keygen", path}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"keygen", "--add", path}, &out, &out); err != nil || !strings.Contains(out.String(), "added key version 2") {
		t.Fatalf("keygen --add: %q, %v", out.String(), err)
	}
	for _, args := range [][]string{{"keygen"}, {"keygen", path, "extra"}, {"keygen", "--nope", path}, {"inspect"}} {
		if err := run(args, &out, &out); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// TestCheckConfig: check-config says ok for a configuration serve accepts,
// and lists every problem of one it refuses, without writing anything.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"check-config", "--data-dir", dir}, &out, &out); err != nil || !strings.Contains(out.String(), "configuration ok") {
		t.Fatalf("default: %q, %v", out.String(), err)
	}
	tenants := filepath.Join(dir, "tenants.yaml")
	os.WriteFile(tenants, []byte("tenants: [{name: x, nonsense: 1}]\n"), 0o600)
	out.Reset()
	err := run([]string{"check-config", "--data-dir", dir, "--max-ttl", "1s", "--grpc-addr", "nonsense",
		"--tenants", tenants, "--key-file", filepath.Join(dir, "missing.json"),
		"--ledger", "redis://127.0.0.1:1/0", "--ledger-password-file", filepath.Join(dir, "no-password"),
		"--audit-log", filepath.Join(dir, "no-dir", "audit.log")}, &out, &out)
	if err == nil {
		t.Fatal("check-config accepted a broken configuration")
	}
	for _, want := range []string{"default-ttl", "grpc-addr", "tenants", "missing.json", "no-password", "audit-log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the problems %q do not name %q", err, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("check-config wrote into the data directory: %v", entries)
	}
	out.Reset()
	if err := run([]string{"check-config", "--data-dir", dir, "--grpc-addr", "0.0.0.0:7443", "--insecure"}, &out, &out); err != nil ||
		!strings.Contains(out.String(), "REPLICAS WILL NOT SHARE KEYS") || !strings.Contains(out.String(), "REPLICAS WILL NOT SHARE CONSUMPTIONS") {
		t.Errorf("beyond loopback with per-replica keys and ledger: %q, %v; want both warnings", out.String(), err)
	}
}

// TestServe_FlagsWithoutCommand: flags without a command are serve's
// (sealer --grpc-addr ...), and serve logs the data directory it writes the
// key file and ledger into as an absolute path.
func TestServe_FlagsWithoutCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prev := serveContext
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	t.Cleanup(func() { serveContext = prev })
	stderr := &syncBuffer{}
	// Stop serving once it answers /livez: it started from flags alone. Or
	// stop it after 30 s without an answer, and fail.
	var late atomic.Bool
	go func() {
		re := regexp.MustCompile(`msg=listening grpc=\S+ http=(\S+)`)
		for deadline := time.Now().Add(30 * time.Second); ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
			if m := re.FindStringSubmatch(stderr.String()); m != nil {
				if res, err := http.Get("http://" + m[1] + "/livez"); err == nil {
					res.Body.Close()
					cancel()
					return
				}
			}
			if time.Now().After(deadline) {
				late.Store(true)
				cancel()
				return
			}
		}
	}()
	var stdout bytes.Buffer
	args := []string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--shutdown-delay", "0s", "--shutdown-grace", "1s"}
	if err := run(args, &stdout, stderr); err != nil {
		t.Fatalf("run(%q): %v, want serve to run\n%s", args, err, stderr.String())
	}
	if late.Load() {
		t.Fatalf("run(%q) did not answer /livez within 30 s\n%s", args, stderr.String())
	}
	want := "data_dir=" + filepath.Join(dir, server.Defaults().DataDir)
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("the start log lacks %q:\n%s", want, stderr.String())
	}
	if err := run([]string{"--grpc-addr", "nonsense"}, &stdout, stderr); err == nil || strings.Contains(err.Error(), "unknown command") {
		t.Errorf("--grpc-addr nonsense: %v, want serve's own refusal", err)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGitignore_DefaultDataDir: the embedded default's data directory, made
// by a sealer run from the repository root, is ignored by git, so its key
// file is never committed.
func TestGitignore_DefaultDataDir(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	want := "/" + server.Defaults().DataDir + "/"
	if !slices.Contains(strings.Split(string(b), "\n"), want) {
		t.Errorf(".gitignore lacks %q", want)
	}
}
