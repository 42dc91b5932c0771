package server

import (
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/mcp-sealer/sealer/internal/secretfile"
	"github.com/mcp-sealer/sealer/internal/testpki"
)

// TestTLSFiles_RefusesAPrivateKeyOthersMayRead: the serving key is a
// credential file like the key file: at 0644 it is refused, at start and
// on reload (the previous pair stays). Before, it loaded without a word.
func TestTLSFiles_RefusesAPrivateKeyOthersMayRead(t *testing.T) {
	pair := testpki.NewCA(t, "tls-perm").Server(t, "sealer")
	discard := slog.New(slog.DiscardHandler)
	if err := os.Chmod(pair.KeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newTLSFiles(pair.CertFile, pair.KeyFile, "", discard, func(error) {}); !errors.Is(err, secretfile.ErrPermissions) {
		t.Fatalf("key at 0644: got %v, want ErrPermissions", err)
	}
	os.Chmod(pair.KeyFile, 0o600)
	f, err := newTLSFiles(pair.CertFile, pair.KeyFile, "", discard, func(error) {})
	if err != nil {
		t.Fatalf("key at 0600: %v", err)
	}
	os.Chmod(pair.KeyFile, 0o604)
	if err := f.reload(); !errors.Is(err, secretfile.ErrPermissions) {
		t.Fatalf("reload of a key at 0604: got %v, want ErrPermissions", err)
	}
	if c, _ := f.current(); c == nil {
		t.Fatal("the previous pair is gone")
	}
}
