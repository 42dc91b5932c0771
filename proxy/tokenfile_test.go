package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-sealer/sealer/internal/secretfile"
)

// TestDialSealer_TokenFile: the proxy's bearer token file is a credential
// file: refused when others may read it (before, 0644 passed), read without
// the white space around it, refused when empty.
func TestDialSealer_TokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		err        error // nil: dials
	}{
		{"owner only", "tok\n", 0o600, nil},
		{"readable by all", "tok\n", 0o644, secretfile.ErrPermissions},
		{"empty", " \n", 0o600, errors.New("empty")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			os.WriteFile(path, []byte(tc.body), 0o600)
			os.Chmod(path, tc.mode)
			conn, err := dialSealer(Config{Sealer: "127.0.0.1:1", SealerTokenFile: path})
			if conn != nil {
				conn.Close()
			}
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("got %v, want a connection", err)
			case tc.err != nil && err == nil:
				t.Fatalf("got a connection, want %v", tc.err)
			case errors.Is(tc.err, secretfile.ErrPermissions) && !errors.Is(err, secretfile.ErrPermissions):
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
}
