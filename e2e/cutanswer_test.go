package e2e

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// answerCutter stands between an MCP client and an MCP server (or
// sealer-proxy) over HTTP and loses answers as a network does: for a
// request its cut function picks, it forwards the request, reads the whole
// answer (so the handler has run and answered), then closes the client's
// connection without a byte of it. Every other request passes through
// unchanged, and other methods than POST (a session's event stream) are
// relayed as they come.
type answerCutter struct {
	// Addr is where clients connect instead of the upstream.
	Addr string
	// Cut counts the answers lost; Passed the ones delivered.
	Cut, Passed atomic.Int32
}

// cutAnswers starts an answerCutter in front of upstream (host:port). cut
// sees each request's body and says whether to lose its answer; it may be
// called concurrently.
func cutAnswers(t *testing.T, upstream string, cut func(body []byte) bool) *answerCutter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &answerCutter{Addr: l.Addr().String()}
	client := &http.Client{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+upstream+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if r.Method != http.MethodPost {
			// A GET's event stream may stay open for the session: relayed as
			// it comes, never cut.
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			flush := http.NewResponseController(w)
			buf := make([]byte, 4096)
			for {
				n, err := resp.Body.Read(buf)
				if n > 0 {
					w.Write(buf[:n])
					flush.Flush()
				}
				if err != nil {
					return
				}
			}
		}
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if cut(body) {
			c.Cut.Add(1)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // the answer is lost: the client sees the connection end
				return
			}
			panic(http.ErrAbortHandler) // no hijacking (HTTP/2): abort the stream
		}
		c.Passed.Add(1)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return c
}
