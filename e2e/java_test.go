package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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
	return providedPath(t, "SEALER_TEST_JAVA_EXAMPLE", "no Java example server")
}

// startJavaMCP runs the Java example server against the sealer s, over gRPC
// or, with --rest, REST, and returns its URL once it listens (after it
// checked that the sealer answers).
func startJavaMCP(t *testing.T, jar string, s *proc, flags ...string) string {
	t.Helper()
	cmd := exec.Command("java", append([]string{"-jar", jar, "--addr", "127.0.0.1:0", "--sealer", sealerURL(s, flags)}, flags...)...)
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

// TestJavaREADMEServerRunsAsWritten runs the server that clients/java's
// README shows, as written (java's source launcher, the example's
// dependencies on the class path), against a real sealer: round 1 asks,
// round 2 books the seat its state was sealed for, and the same state with
// another seat is refused.
func TestJavaREADMEServerRunsAsWritten(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	jar := javaExample(t)
	const marker = "<!-- test: runs as written -->\n```java\n"
	readme, err := os.ReadFile("../clients/java/README.md")
	if err != nil {
		t.Fatal(err)
	}
	var source string
	for _, b := range parseBlocks("clients/java/README.md", string(readme)) {
		if b.info == "java" && strings.Contains(string(readme), marker+b.text) {
			source = b.text
		}
	}
	if !strings.Contains(source, "public class BookingServer") {
		t.Fatalf("clients/java/README.md: no java block after %q holding BookingServer", marker)
	}
	file := filepath.Join(t.TempDir(), "BookingServer.java")
	if err := os.WriteFile(file, []byte(source), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, t.TempDir())
	cmd := exec.Command("java", "-cp", filepath.Join(filepath.Dir(jar), "lib", "*"), file)
	cmd.Env = append(os.Environ(), "SEALER_URL=http://"+s.GRPC, "PORT=0")
	url := startUntil(t, cmd, regexp.MustCompile(`^listening on (http://\S+/mcp)$`))[1]

	seat := map[string]any{"seat": "12A"}
	r, err := callTool(url, "", "book", seat, "", nil)
	state, _ := r.Result["requestState"].(string)
	if err != nil || r.Result["resultType"] != "input_required" || state == "" {
		t.Fatalf("round 1: got %v, %v; want input_required with a state", r, err)
	}
	confirm := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	if r, err := callTool(url, "", "book", map[string]any{"seat": "1A"}, state, confirm); err != nil || !reflect.DeepEqual(r.Error, pyRefusal) {
		t.Fatalf("round 2 for another seat: got %v, %v; want the refusal %v", r, err, pyRefusal)
	}
	if r, err := callTool(url, "", "book", seat, state, confirm); err != nil || r.text() != "booked 12A" {
		t.Fatalf("round 2: got %v, %v; want booked 12A", r, err)
	}
}
