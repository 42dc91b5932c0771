// Package e2e drives the real sealer binary over real sockets.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

// binary is the sealer, mcpBinary the example MCP server, echoBinary the
// benchmarks' echo floor, proxyBinary sealer-proxy, naiveBinary the naive
// MCP server of examples/naiveserver: TestMain builds them once for all
// tests.
var binary, mcpBinary, echoBinary, proxyBinary, naiveBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sealer-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, mcpBinary, echoBinary = filepath.Join(dir, "sealer"), filepath.Join(dir, "mcpserver"), filepath.Join(dir, "sealer-echo")
	proxyBinary, naiveBinary = filepath.Join(dir, "sealer-proxy"), filepath.Join(dir, "naiveserver")
	// Each is built in its own module: the service's, or the examples'.
	mustBuild(binary, "..", "./cmd/sealer")
	mustBuild(echoBinary, "..", "./bench/sealer-echo")
	mustBuild(proxyBinary, "..", "./cmd/sealer-proxy")
	mustBuild(mcpBinary, "../examples", "./mcpserver")
	mustBuild(naiveBinary, "../examples", "./naiveserver")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// mustBuild builds pkg of module into out, or ends the test binary. It
// builds as the release does (scripts/image.sh: static, -trimpath), so the
// tests run what ships, and the packages compile once for the test
// command's go vet, release artifacts and image alike.
func mustBuild(out, module, pkg string) {
	build := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	build.Dir, build.Stdout, build.Stderr = module, os.Stderr, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building", pkg, "in", module+":", err)
		os.Exit(1)
	}
}

// proc is a running sealer.
type proc struct {
	GRPC, HTTP string
	cmd        *exec.Cmd
	logs       *syncBuffer
	exited     chan struct{}
	exitErr    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs `sealer serve` on free loopback ports with the given data
// directory and extra flags, and waits until it listens.
func start(t *testing.T, dataDir string, flags ...string) *proc {
	t.Helper()
	return startEnv(t, nil, dataDir, flags...)
}

// startEnv is start with extra environment variables (NAME=value).
func startEnv(t *testing.T, env []string, dataDir string, flags ...string) *proc {
	t.Helper()
	return startBinary(t, binary, env, dataDir, flags...)
}

// startBinary is startEnv with another build of the sealer.
func startBinary(t *testing.T, binary string, env []string, dataDir string, flags ...string) *proc {
	t.Helper()
	// No shutdown delay unless a test asks for one (later flags win): the
	// tests stop sealers often, with no load balancer to wait for.
	args := append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--data-dir", dataDir, "--log-format", "json", "--log-level", "debug", "--shutdown-delay", "0s"}, flags...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: &syncBuffer{}, exited: make(chan struct{})}
	listening := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Bytes()
			p.logs.Write(append(line, '\n'))
			var rec struct{ Msg, GRPC, HTTP string }
			if !found && json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
				p.GRPC, p.HTTP, found = rec.GRPC, rec.HTTP, true
				listening <- nil
			}
		}
		if !found {
			listening <- fmt.Errorf("sealer exited before listening")
		}
	}()
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	select {
	case err := <-listening:
		if err != nil {
			<-p.exited
			t.Fatalf("%v: %v\n%s", err, p.exitErr, p.logs)
		}
	case <-time.After(loadedBound):
		cmd.Process.Kill()
		t.Fatalf("sealer did not listen within %v:\n%s", loadedBound, p.logs)
	}
	t.Cleanup(func() {
		select {
		case <-p.exited:
			if t.Failed() { // a sealer that died under a failed test: say how
				t.Logf("the sealer %s exited: %v; its log:\n%s", binary, p.exitErr, p.logs)
			}
		default:
			p.kill()
		}
	})
	return p
}

// stop sends sig and waits for the process to exit.
func (p *proc) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	p.cmd.Process.Signal(sig)
	return p.waitExit(t)
}

// waitExit waits for the process to exit and returns how it exited.
func (p *proc) waitExit(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatal("sealer did not exit within 30s")
		return nil
	}
}

func (p *proc) kill() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// api is one way to call the sealer: gRPC or REST. Requests are written as
// the REST contract's JSON, so both transports are held to it.
type api interface {
	call(t *testing.T, method, body string) (resp map[string]any, reason string)
}

type grpcAPI struct {
	client sealerv1.SealerClient
	token  string // bearer token sent with each call, if any
}

func dialGRPC(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func newGRPC(t *testing.T, p *proc) grpcAPI {
	return grpcAPI{client: sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))}
}

func (g grpcAPI) call(t *testing.T, method, body string) (map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if g.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.token)
	}
	var (
		resp proto.Message
		err  error
	)
	switch method {
	case "seal":
		req := &sealerv1.SealRequest{}
		mustUnmarshal(t, body, req)
		resp, err = g.client.Seal(ctx, req)
	case "open":
		req := &sealerv1.OpenRequest{}
		mustUnmarshal(t, body, req)
		resp, err = g.client.Open(ctx, req)
	case "record":
		req := &sealerv1.RecordRequest{}
		mustUnmarshal(t, body, req)
		resp, err = g.client.Record(ctx, req)
	default:
		t.Fatalf("unknown method %s", method)
	}
	if err != nil {
		return nil, reasonOf(t, status.Convert(err))
	}
	out, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	return m, "OK"
}

func mustUnmarshal(t *testing.T, body string, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(body), m); err != nil {
		t.Fatalf("request %s is not valid for the proto: %v", body, err)
	}
}

func reasonOf(t *testing.T, st *status.Status) string {
	t.Helper()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if sealerv1.Reason_value["REASON_"+info.Reason] == 0 { // the wire drops the prefix
				t.Errorf("reason %q is no value of the enum sealer.v1.Reason", info.Reason)
			}
			return info.Reason
		}
	}
	return "NO_ERROR_INFO:" + st.Code().String()
}

type restAPI struct {
	base   string
	client *http.Client
	header http.Header
}

func newREST(p *proc) restAPI { return restAPI{base: "http://" + p.HTTP, client: http.DefaultClient} }

func (r restAPI) call(t *testing.T, method, body string) (map[string]any, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.base+"/v1/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range r.header {
		req.Header[k] = v
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, "TRANSPORT:" + err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: not JSON: %q", method, data)
	}
	if resp.StatusCode == http.StatusOK {
		return m, "OK"
	}
	details, _ := m["details"].([]any)
	for _, d := range details {
		if d, ok := d.(map[string]any); ok && d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			return m, d["reason"].(string)
		}
	}
	return m, fmt.Sprintf("NO_ERROR_INFO:%d", resp.StatusCode)
}

// concurrently runs call(0) to call(n-1) at once, released together, and
// counts the reasons they return.
func concurrently(n int, call func(i int) string) map[string]int {
	reasons := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r := call(i)
			mu.Lock()
			reasons[r]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return reasons
}

// loadedBound is the least time a test waits for a condition before it
// fails: the test command runs beside other work, on machines many times
// slower than a quiet one, and a bound only ends a wait that never ends.
const loadedBound = 2 * time.Minute

// startUntil starts cmd, stops it when the test ends, and waits until a
// line of its standard error matches re; it returns the submatches.
func startUntil(t *testing.T, cmd *exec.Cmd, re *regexp.Regexp) []string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found, ended := make(chan []string, 1), make(chan struct{})
	var mu sync.Mutex
	var tail []string // the last lines, for a program that never started
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			tail = append(tail[max(len(tail)-19, 0):], sc.Text())
			mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m:
				default:
				}
			}
		}
	}()
	// A Python server imports the MCP SDK first: seconds on a quiet machine,
	// far more on a loaded one. The bound only ends a program that hangs.
	select {
	case m := <-found:
		return m
	case <-ended:
		select {
		case m := <-found:
			return m
		default:
		}
	case <-time.After(loadedBound):
	}
	mu.Lock()
	defer mu.Unlock()
	t.Fatalf("%s did not start; its last lines:\n%s", filepath.Base(cmd.Path), strings.Join(tail, "\n"))
	return nil
}
