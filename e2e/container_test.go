//go:build deploy

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The container image and Helm chart tests run in their own step of
// scripts/test.sh (go test -tags deploy), which installs podman, builds Helm
// and fetches the Kubernetes API schemas.

// podman returns the podman command, with CONTAINERS_CONF set by the test
// command; it fails under CI when podman is missing.
func podman(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("podman")
	if err != nil || os.Getenv("CONTAINERS_CONF") == "" {
		testenv.Missing(t, "no podman (%v) or no CONTAINERS_CONF", err)
	}
	return path
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestContainerImage builds the image (scripts/image.sh), then runs it with
// podman: non-root, read-only root filesystem, the README's REST round trip,
// /readyz, gRPC health, and a clean exit on SIGTERM.
func TestContainerImage(t *testing.T) {
	testenv.Lane(t, testenv.LaneDeploy)
	pm := podman(t)
	tag := "localhost/sealer-e2e:" + strconv.Itoa(os.Getpid())
	build := exec.Command("../scripts/image.sh", tag)
	build.Env = append(os.Environ(), "VERSION=v0.0.0-e2e")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(pm, "rmi", "-f", tag).Run() })

	var img []struct {
		Size   int64
		Config struct {
			User    string
			Env     []string
			Labels  map[string]string
			Volumes map[string]struct{}
		}
		RootFS struct{ Layers []string }
	}
	if err := json.Unmarshal([]byte(run(t, pm, "image", "inspect", tag)), &img); err != nil || len(img) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	cfg := img[0].Config
	t.Logf("image %s: %d bytes, %d layers, user %s", tag, img[0].Size, len(img[0].RootFS.Layers), cfg.User)
	t.Logf("podman history:\n%s", run(t, pm, "history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", tag))
	if cfg.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", cfg.User)
	}
	if _, ok := cfg.Volumes["/var/lib/sealer"]; !ok {
		t.Errorf("image volumes %v: no /var/lib/sealer", cfg.Volumes)
	}
	for _, k := range []string{"title", "description", "version", "revision", "created", "source", "licenses"} {
		if cfg.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("label org.opencontainers.image.%s missing", k)
		}
	}
	if v := cfg.Labels["org.opencontainers.image.version"]; v != "v0.0.0-e2e" {
		t.Errorf("version label %q, want v0.0.0-e2e", v)
	}

	// --version: the version and commit of the labels, linked in.
	rev := cfg.Labels["org.opencontainers.image.revision"]
	version := run(t, pm, "run", "--rm", "--read-only", tag, "--version")
	t.Logf("sealer --version in the image: %s", version)
	if !strings.HasPrefix(version, "sealer v0.0.0-e2e (commit "+rev[:min(12, len(rev))]) {
		t.Errorf("--version %q does not name version v0.0.0-e2e and commit %s", version, rev)
	}

	// The image's defaults listen on every address: without TLS and tenants
	// or --insecure the sealer refuses to start.
	refused, err := exec.Command(pm, "run", "--rm", "--read-only", "--network", "none", tag).CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "0.0.0.0") {
		t.Errorf("the image's default command without TLS or --insecure: err %v, output %s; want a refusal naming 0.0.0.0", err, refused)
	}

	// Served on loopback ports of the host network, with --insecure (no TLS
	// in this test), the data directory the image's volume.
	grpcAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	id := run(t, pm, "run", "-d", "--read-only", "--network", "host",
		"-e", "SEALER_GRPC_ADDR="+grpcAddr, "-e", "SEALER_HTTP_ADDR="+httpAddr,
		tag, "serve", "--insecure", "--shutdown-delay", "1s")
	t.Cleanup(func() { exec.Command(pm, "rm", "-f", "-v", id).Run() })

	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("/readyz: 200 from the container")
				break
			}
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command(pm, "logs", id).CombinedOutput()
			t.Fatalf("/readyz not 200 within 20s (%v):\n%s", err, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Non-root, read-only root: from the host's view of the process.
	pid := run(t, pm, "inspect", "--format", "{{.State.Pid}}", id)
	st, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	uid := regexp.MustCompile(`(?m)^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`).FindStringSubmatch(string(st))
	if uid == nil || uid[1] != "65532" || uid[2] != "65532" || uid[3] != "65532" || uid[4] != "65532" {
		t.Errorf("the sealer's uids (real, effective, saved, fs) are %v, want 65532", uid)
	} else {
		t.Logf("non-root: /proc/%s/status Uid %s %s %s %s", pid, uid[1], uid[2], uid[3], uid[4])
	}
	mounts, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	rootRO, dataRW := false, false
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		opts := "," + f[5] + ","
		switch f[4] {
		case "/":
			rootRO = strings.Contains(opts, ",ro,")
			t.Logf("root filesystem mount options: %s", f[5])
		case "/var/lib/sealer":
			dataRW = strings.Contains(opts, ",rw,")
		}
	}
	if !rootRO {
		t.Errorf("the container's root filesystem is not mounted read-only")
	}
	if !dataRW {
		t.Errorf("the data directory /var/lib/sealer is not a writable mount")
	}

	// The README's REST round trip.
	rest := restAPI{base: "http://" + httpAddr, client: http.DefaultClient}
	sealed, reason := rest.call(t, "seal", `{"principal":"alice",
		"request":{"method":"tools/call","params":{"name":"get_weather","arguments":{"location":"New York"}}},
		"payload":"eyJzdGVwIjoxfQ==","ttl":"300s","oneTime":false}`)
	if reason != "OK" {
		t.Fatalf("REST seal: %s %v", reason, sealed)
	}
	state, _ := sealed["requestState"].(string)
	opened, reason := rest.call(t, "open", `{"requestState":"`+state+`","principal":"alice",
		"request":{"method":"tools/call","params":{"name":"get_weather","arguments":{"location":"New York"}}}}`)
	if reason != "OK" || opened["payload"] != "eyJzdGVwIjoxfQ==" {
		t.Fatalf("REST open: %s %v", reason, opened)
	}
	if _, reason := rest.call(t, "open", `{"requestState":"`+state+`","principal":"bob",
		"request":{"method":"tools/call","params":{"name":"get_weather","arguments":{"location":"New York"}}}}`); reason != "PRINCIPAL_MISMATCH" {
		t.Errorf("REST open as another principal: %s, want PRINCIPAL_MISMATCH", reason)
	}
	t.Logf("REST round trip through the container: sealed %d bytes of state, opened the payload, refused another principal", len(state))

	// gRPC health, for the server and the Sealer service.
	health := grpc_health_v1.NewHealthClient(dialGRPC(t, grpcAddr))
	for _, svc := range []string{"", "sealer.v1.Sealer"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := health.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: svc})
		cancel()
		if err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Errorf("gRPC health %q: %v %v, want SERVING", svc, resp.GetStatus(), err)
		} else {
			t.Logf("gRPC health %q: SERVING", svc)
		}
	}

	// SIGTERM (podman stop): shutdown delay, drain, exit 0.
	run(t, pm, "stop", "--time", "30", id)
	if code := run(t, pm, "inspect", "--format", "{{.State.ExitCode}}", id); code != "0" {
		logs, _ := exec.Command(pm, "logs", id).CombinedOutput()
		t.Errorf("exit code after SIGTERM %s, want 0:\n%s", code, logs)
	}
}
