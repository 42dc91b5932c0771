package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func testConfig(t *testing.T) Config {
	cfg := Defaults()
	cfg.DataDir, cfg.GRPCAddr, cfg.HTTPAddr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// New binds its listeners before it returns, so whoever embeds the server
// dials the addresses it reports, with no retry loop.
func TestNew_ReportsTheAddressesItBound(t *testing.T) {
	s, err := New(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, a := range []net.Addr{s.GRPCAddr(), s.HTTPAddr()} {
		c, err := net.Dial("tcp", a.String())
		if err != nil {
			t.Fatalf("dial %v before Run: %v", a, err)
		}
		c.Close()
	}
}

// A New that fails releases what it opened: the embedded ledger's file lock
// among them, so that a second try on the same data directory works.
func TestNew_FailureReleasesWhatItOpened(t *testing.T) {
	cfg := testConfig(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg.HTTPAddr = busy.Addr().String()
	if _, err := New(context.Background(), cfg); err == nil {
		t.Fatal("New on a port in use: got nil, want an error")
	}
	cfg.HTTPAddr = "127.0.0.1:0"
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("second New on the same data directory: %v", err)
	}
	s.Close()

	bad := filepath.Join(t.TempDir(), "tenants.yaml")
	os.WriteFile(bad, []byte("tenants: {}\n"), 0o600)
	cfg.TenantsFile = bad
	if _, err := New(context.Background(), cfg); err == nil {
		t.Fatal("New with a tenants file without tenants: got nil, want an error")
	}
}
