// Command sealer-floorproxy is the floor of sealer-proxy in BENCHMARKS.md: a
// plain net/http/httputil.ReverseProxy in front of the same MCP server, with
// the same kind of upstream connection pool, doing none of sealer-proxy's
// work (no parsing, no Seal, no Open). What sealer-proxy costs beyond it is
// its own.
//
//	sealer-floorproxy -addr 127.0.0.1:8081 -upstream http://127.0.0.1:3001
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/debug"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	upstream := flag.String("upstream", "http://127.0.0.1:3001", "the MCP server's base URL")
	flag.Parse()
	// As the sealer and its proxy do, so that only the work differs.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	u, err := url.Parse(*upstream)
	if err != nil {
		fail(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	rp.FlushInterval = -1 // SSE streams pass at once, as sealer-proxy passes them
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fail(err)
	}
	slog.Info("listening", "addr", l.Addr().String())
	fail((&http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}).Serve(l))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sealer-floorproxy:", err)
	os.Exit(1)
}
