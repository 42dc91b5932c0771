// Command naiveserver is a deliberately naive MCP server (go-sdk, Streamable
// HTTP, stateless: the 2026-07-28 wire) for the tests of sealer-proxy. It
// keeps its progress as plain JSON in requestState and trusts whatever
// comes back: a client can read its state, forge it, replay it under
// another principal, on other arguments, after any delay, any number of
// times. Put sealer-proxy in front of it and none of that reaches it.
//
// It implements the tools and the prompt of the MCP conformance suite's
// input-required-result scenarios, and a few of its own:
//
//	get_weather      two rounds; the state names the location
//	approve_payment  two rounds; the state carries the amount, which it pays
//	progress_report  progress notifications, then an input_required result
//	book_trip        three rounds (dates, seat, confirmation), the answers so
//	                 far in the state
//
// GET /calls returns the requests it received on /mcp, as JSON
// ({"total":N,"byName":{"tools/call get_weather":n}}), for the tests to
// check that a refused request never reached it.
//
//	naiveserver -addr 127.0.0.1:3001 [-json]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "listen address (the MCP endpoint is /mcp)")
	jsonResponse := flag.Bool("json", false, "answer with JSON bodies instead of SSE streams")
	flag.Parse()

	server := newServer()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: *jsonResponse})
	c := &counter{byName: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("/mcp", c.count(handler))
	mux.HandleFunc("GET /calls", c.serve)
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "naiveserver listening on http://%s/mcp\n", l.Addr())
	log.Fatal((&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(l))
}

// counter counts the requests that reached the server.
type counter struct {
	mu     sync.Mutex
	total  int
	byName map[string]int
}

// count counts every request, by JSON-RPC method and params.name (or uri),
// before the MCP handler sees it.
func (c *counter) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string
				Params struct{ Name, URI string }
			}
			json.Unmarshal(body, &msg)
			key = msg.Method + " " + msg.Params.Name + msg.Params.URI
		}
		c.mu.Lock()
		c.total++
		c.byName[key]++
		c.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (c *counter) serve(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"total": c.total, "byName": c.byName})
}
