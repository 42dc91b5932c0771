package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The Java side: the example MCP server of examples/java, on the official
// Java SDK's MRTR server and its servlet transport, its states sealed by a
// real sealer through io.github.mcp-sealer:mcp-sealer (clients/java). The
// test command builds its jar (SEALER_TEST_JAVA_EXAMPLE).

// javaExample returns the example server's jar, or fails (CI) or skips the
// test.
func javaExample(t *testing.T) string {
	t.Helper()
	jar := os.Getenv("SEALER_TEST_JAVA_EXAMPLE")
	if _, err := os.Stat(jar); jar == "" || err != nil {
		testenv.Missing(t, "no Java example server (SEALER_TEST_JAVA_EXAMPLE=%q)", jar)
	}
	return jar
}

// startJavaMCP runs the Java example server against the sealer s, over gRPC
// or, with --rest, REST, and returns its URL once it listens (after it
// checked that the sealer answers).
func startJavaMCP(t *testing.T, jar string, s *proc, flags ...string) string {
	t.Helper()
	sealerURL := "http://" + s.GRPC
	for _, f := range flags {
		if f == "--rest" {
			sealerURL = "http://" + s.HTTP
		}
	}
	cmd := exec.Command("java", append([]string{"-jar", jar, "--addr", "127.0.0.1:0", "--sealer", sealerURL}, flags...)...)
	return startUntil(t, cmd, regexp.MustCompile(`^listening on (http://\S+/mcp)$`))[1]
}

// TestConformance_MRTR_Java runs every input-required-result scenario of
// the official MCP conformance suite against the Java example server, with
// the gRPC and the REST client: all 14 pass in each, and the sealer refuses
// the tampered state.
func TestConformance_MRTR_Java(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin, jar := nodeBin(t), javaExample(t)
	for _, client := range []string{"grpc", "rest"} {
		t.Run(client, func(t *testing.T) {
			s := start(t, t.TempDir())
			var flags []string
			if client == "rest" {
				flags = append(flags, "--rest")
			}
			url := startJavaMCP(t, jar, s, flags...)
			passed := 0
			for sc, r := range conformance(t, bin, url) {
				if r.passed() {
					passed++
				} else {
					t.Errorf("%s: %s", sc, r)
				}
			}
			if passed != 14 {
				t.Errorf("%d scenarios passed, want 14", passed)
			}
			waitFor(t, "the sealer to refuse the tampered state", 5*time.Second, func() bool {
				return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
			})
		})
	}
}
