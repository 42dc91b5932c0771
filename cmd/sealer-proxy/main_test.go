package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-sealer/sealer/internal/secretfile"
)

// TestRun_RefusesPrivateKeysOthersMayRead: --tls-key and --sealer-key are
// credential files: at 0644 the proxy refuses to start.
func TestRun_RefusesPrivateKeysOthersMayRead(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(key, []byte("not read"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(key, 0o644)
	for _, flag := range []string{"--tls-key", "--sealer-key"} {
		t.Run(flag, func(t *testing.T) {
			err := run([]string{"--upstream", "http://127.0.0.1:1/mcp", flag, key}, io.Discard)
			if !errors.Is(err, secretfile.ErrPermissions) {
				t.Fatalf("got %v, want ErrPermissions", err)
			}
		})
	}
}
