package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The Python side: the client package mcp_sealer (clients/python/src) and
// its seam for the official MCP Python SDK and FastMCP, and the example MCP
// servers built on them (examples/python), each against a real sealer. The
// interpreter is the test environment's (SEALER_TEST_PYTHON), whose
// site-packages hold mcp, fastmcp, uvicorn and the client's dependencies;
// the client package itself is taken from the source tree (PYTHONPATH).

// pythonBin returns the Python interpreter of the test environment, or fails
// (CI) or skips the test.
func pythonBin(t *testing.T) string {
	t.Helper()
	return providedPath(t, "SEALER_TEST_PYTHON", "no Python")
}

// pythonCommand is python with args, importing mcp_sealer from the source
// tree, unbuffered, and writing no bytecode into the tree.
func pythonCommand(t *testing.T, python string, args ...string) *exec.Cmd {
	t.Helper()
	src, err := filepath.Abs("../clients/python/src")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "NO_COLOR=1")
	return cmd
}

// startPyMCP runs the Python example MCP server examples/python/<server>
// (server.py on MCPServer, fastmcp_server.py on FastMCP) against the sealer
// s, over gRPC or, with --rest, REST, and returns its URL once it listens.
// Other flags (--one-time) go to the server as given.
func startPyMCP(t *testing.T, python string, s *proc, server string, flags ...string) string {
	t.Helper()
	cmd := pythonCommand(t, python, append([]string{filepath.Join("../examples/python", server),
		"--addr", "127.0.0.1:0", "--sealer", sealerURL(s, flags)}, flags...)...)
	return startUntil(t, cmd, regexp.MustCompile(`^listening on (http://\S+/mcp)$`))[1]
}

// providedPath returns the path the test command names in the environment
// variable name, or fails (CI) or skips the test, saying what is missing.
func providedPath(t *testing.T, name, what string) string {
	t.Helper()
	path := os.Getenv(name)
	if _, err := os.Stat(path); path == "" || err != nil {
		testenv.Missing(t, "%s (%s=%q)", what, name, path)
	}
	return path
}

// sealerURL is the address an example MCP server reaches the sealer s at:
// its gRPC address, or its REST one when flags hold --rest.
func sealerURL(s *proc, flags []string) string {
	if slices.Contains(flags, "--rest") {
		return "http://" + s.HTTP
	}
	return "http://" + s.GRPC
}

// pyServers are the Python example MCP servers: the same tools on the
// official SDK's MCPServer and on FastMCP.
var pyServers = []struct{ name, file string }{
	{"MCPServer", "server.py"},
	{"FastMCP", "fastmcp_server.py"},
}

// TestConformance_MRTR_Python runs every input-required-result server
// scenario of the official MCP conformance suite against each Python example
// MCP server, whose states a real sealer seals through mcp_sealer.mcp.
func TestConformance_MRTR_Python(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin, python := nodeBin(t), pythonBin(t)
	for _, server := range pyServers {
		t.Run(server.name, func(t *testing.T) {
			s := start(t, t.TempDir())
			url := startPyMCP(t, python, s, server.file)
			for sc, r := range conformance(t, bin, url) {
				if !r.passed() {
					t.Errorf("%s: %s", sc, r)
				}
			}
			waitFor(t, "the sealer to refuse a state (tampered-state cannot pass without it)", 5*time.Second, func() bool {
				return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
			})
		})
	}
}

// pyREADMEServers are the Python example MCP servers written in the shape
// the READMEs show (examples/python/readme_*.py): the conformance tools, the
// sealer client built at module level, then sealed_request_state(server,
// client, allow_anonymous=True), then the server run as the README runs it.
var pyREADMEServers = []struct{ name, file string }{
	{"MCPServer", "readme_mcpserver.py"},
	{"LowLevelServer", "readme_lowlevel.py"},
	{"FastMCP", "readme_fastmcp.py"},
}

// startPyREADME runs examples/python/<file> as a program, its module-level
// client grpc_client or rest_client (client: "grpc" or "rest") pointed at the
// sealer s through the README's variables (SEALER_URL, SEALER_REST_URL, PORT),
// and returns its URL once uvicorn says it runs: after the server's start,
// which checks that the sealer answers.
func startPyREADME(t *testing.T, python string, s *proc, file, client string) string {
	t.Helper()
	cmd := pythonCommand(t, python, filepath.Join("../examples/python", file))
	cmd.Env = append(cmd.Env, "SEALER_CLIENT="+client, "SEALER_URL=http://"+s.GRPC, "SEALER_REST_URL=http://"+s.HTTP, "PORT=0")
	return startUntil(t, cmd, regexp.MustCompile(`Uvicorn running on (http://127\.0\.0\.1:\d+)`))[1] + "/mcp"
}

// TestConformance_MRTR_PythonREADMEShape runs every input-required-result
// scenario of the official MCP conformance suite against the servers written
// as the READMEs show them (issue 42), on MCPServer, the low-level Server and
// FastMCP, each with the gRPC and the REST client built at module level,
// before the server's event loop runs: all 14 scenarios pass in each of the
// six, and the sealer refuses the tampered state in each.
func TestConformance_MRTR_PythonREADMEShape(t *testing.T) {
	testenv.Lane(t, testenv.LaneConformance)
	bin, python := nodeBin(t), pythonBin(t)
	for _, server := range pyREADMEServers {
		for _, client := range []string{"grpc", "rest"} {
			t.Run(server.name+"/"+client, func(t *testing.T) {
				s := start(t, t.TempDir())
				url := startPyREADME(t, python, s, server.file, client)
				passed := 0
				for sc, r := range conformance(t, bin, url) {
					if r.passed() {
						passed++
					} else {
						t.Errorf("%s: %s", sc, r)
					}
				}
				// 14: every input-required-result scenario of the suite, which
				// conformance holds to listing exactly mrtrScenarios.
				if passed != 14 {
					t.Errorf("%d scenarios passed, want 14", passed)
				}
				t.Logf("%d of %d scenarios passed", passed, len(mrtrScenarios))
				waitFor(t, "the sealer to refuse a state (tampered-state cannot pass without it)", 5*time.Second, func() bool {
					return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
				})
			})
		}
	}
}
