// Package pprofserve serves net/http/pprof for the binaries' --pprof-addr,
// on a listener of its own, on loopback only.
package pprofserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/mcp-sealer/sealer/internal/netaddr"
)

// CheckAddr refuses a --pprof-addr that is set but not on loopback.
func CheckAddr(addr string) error {
	if addr != "" && !netaddr.IsLoopback(addr) {
		return fmt.Errorf("pprof-addr %q: must be a loopback address", addr)
	}
	return nil
}

// Server returns the server of the profiles.
func Server() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}

// Serve serves the profiles on l until ctx is done.
func Serve(ctx context.Context, l net.Listener) error {
	srv := Server()
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
