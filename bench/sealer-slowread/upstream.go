package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// upstream is the MCP server behind the proxy: a tools/call of tool "big"
// gets a result holding the large text, as JSON (with its length) or as
// one SSE event as the path says (/json, /sse); any other call a small one.
type upstream struct {
	addr string
	big  []byte
}

func startUpstream(size int) (*upstream, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{addr: l.Addr().String(), big: []byte(strings.Repeat("a", size))}
	go (&http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}).Serve(l)
	return u, nil
}

func (u *upstream) url(kind string) string { return "http://" + u.addr + "/" + kind }

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Params struct{ Name string }
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	text := []byte("ok")
	if req.Params.Name == "big" {
		text = u.big // the same bytes for every call: the server holds no copy
	}
	head := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":[{"type":"text","text":"`
	tail := `"}]}}`
	if r.URL.Path == "/sse" {
		w.Header().Set("Content-Type", "text/event-stream")
		head, tail = "event: message\ndata: "+head, tail+"\n\n"
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(text)+len(tail)))
	}
	io.WriteString(w, head)
	w.Write(text)
	io.WriteString(w, tail)
}
