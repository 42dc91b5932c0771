package gosdk_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-sealer/sealer/client"
)

// sealerAddr is the gRPC address of the real sealer that TestMain runs for
// the tests and examples: its binary, built from this checkout, over a
// loopback socket. Linking the server in process would put its storage and
// Vault modules into this module's requirements, which the adapter keeps
// to the client and the SDK.
var sealerAddr string

func TestMain(m *testing.M) {
	code, err := withSealer(m.Run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gosdk tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// withSealer builds and starts the sealer, runs tests, and stops it.
func withSealer(tests func() int) (int, error) {
	dir, err := os.MkdirTemp("", "gosdk-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sealer")
	// Built as the release and the e2e tests build it, so the build cache
	// serves all three.
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/sealer")
	build.Dir, build.Stdout, build.Stderr = "../..", os.Stderr, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building the sealer: %v", err)
	}
	cmd := exec.Command(bin, "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--log-format", "json", "--shutdown-delay", "0s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec struct{ Msg, GRPC string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				listening <- rec.GRPC
				break
			}
		}
		io.Copy(io.Discard, stderr) // never block the sealer on its log
	}()
	select {
	case sealerAddr = <-listening:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("the sealer did not listen within 30s")
	}
	return tests(), nil
}

// dial returns a client of the test sealer.
func dial() *client.Client {
	sc, err := client.Dial(sealerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	return sc
}
