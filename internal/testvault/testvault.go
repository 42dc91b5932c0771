// Package testvault runs a real Vault dev server for tests.
//
// The Vault binary is built from Go modules by scripts/test.sh (tools/vault)
// and named by SEALER_TEST_VAULT. Without it a test is skipped on a developer
// machine and fails under CI (CI set): CI must never pass by skipping.
package testvault

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// SealerPolicy is the minimal Vault policy docs/OPERATIONS.md gives the sealer for a
// Transit key and a KV v2 secret both named "sealer".
const SealerPolicy = `
path "transit/keys/sealer" { capabilities = ["read"] }
path "transit/export/encryption-key/sealer" { capabilities = ["read"] }
path "secret/metadata/sealer" { capabilities = ["read"] }
path "secret/data/sealer" { capabilities = ["read"] }
`

// Server is a `vault server -dev` on a loopback port.
type Server struct {
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

// Start runs a Vault dev server with Transit enabled at transit/ (KV v2 is at
// secret/ in dev mode) and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostport := l.Addr().String()
	l.Close()
	var tok [16]byte
	rand.Read(tok[:])
	s := &Server{Addr: "http://" + hostport, RootToken: "root-" + hex.EncodeToString(tok[:]), done: make(chan struct{}), out: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "server", "-dev", "-dev-root-token-id="+s.RootToken,
		"-dev-listen-address="+hostport, "-dev-no-store-token", "-log-level=warn")
	s.cmd.Env = append(os.Environ(), "VAULT_DISABLE_MLOCK=true", "HOME="+t.TempDir())
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
			t.Fatalf("vault exited: %s", s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("vault did not come up within 30s: %v", err)
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
