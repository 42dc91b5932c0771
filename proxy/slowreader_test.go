package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// bigAnswer is the size of the text in the answer to a call of tool "big".
const bigAnswer = 4 << 20

// answeringUpstream answers a tools/call of tool "big" with a result
// holding bigAnswer bytes of text, and any other with a small one, as JSON
// (its length given) or as one SSE event; it counts the calls, and the
// answers written whole.
type answeringUpstream struct {
	*upstream
	mu      sync.Mutex
	written int
}

func newAnsweringUpstream(t *testing.T, sse bool) *answeringUpstream {
	big := []byte(strings.Repeat("a", bigAnswer)) // one copy for every call
	u := &answeringUpstream{upstream: &upstream{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct{ Name string }
		}
		json.Unmarshal(body, &req)
		u.upstream.mu.Lock()
		u.calls++
		u.upstream.mu.Unlock()
		text := []byte("ok")
		if req.Params.Name == "big" {
			text = big
		}
		head, tail := `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[{"type":"text","text":"`, `"}]}}`
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			head, tail = "event: message\ndata: "+head, tail+"\n\n"
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(head)+len(text)+len(tail)))
		}
		io.WriteString(w, head)
		w.Write(text)
		if _, err := io.WriteString(w, tail); err == nil {
			u.mu.Lock()
			u.written++
			u.mu.Unlock()
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *answeringUpstream) count() int {
	u.upstream.mu.Lock()
	defer u.upstream.mu.Unlock()
	return u.calls
}

func callBody(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
}

// slowReader sends a call and reads nothing of its answer until told: a
// client on a connection with a small receive buffer, which the proxy
// cannot write the answer past.
type slowReader struct {
	net.Conn
	r *bufio.Reader
}

func startSlowReader(t *testing.T, addr, body string) *slowReader {
	t.Helper()
	c, err := smallWindowDialer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return &slowReader{Conn: c, r: bufio.NewReaderSize(c, 4<<10)}
}

// drain reads the answer to its end, or until the proxy cuts it, and
// returns the bytes of its body read and how it ended.
func (s *slowReader) drain() (int64, error) {
	s.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(io.Discard, resp.Body)
}

// slowProxy serves a proxy with a budget of 24 MiB in front of up: a
// 4 MiB answer without a state takes 12 MiB while the proxy judges it, and
// 4 MiB while it is written.
func slowProxy(t *testing.T, up *answeringUpstream, s Sealer, edit func(*Config)) (*Proxy, *httptest.Server) {
	t.Helper()
	p := newProxy(t, up.upstream, s, func(c *Config) {
		c.MaxBufferedBytes = 24 << 20
		c.MaxResponseBytes = bigAnswer + 4<<10
		if edit != nil {
			edit(c)
		}
	}).(*Proxy)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

// heapInUse returns the bytes of the test's live heap.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// held returns the bytes the proxy holds, and their sum in
// sealer_proxy_buffered_bytes, at one instant.
func held(p *Proxy) (int64, float64) {
	p.buffered.mu.Lock()
	defer p.buffered.mu.Unlock()
	return p.buffered.used, testutil.ToFloat64(p.metrics.buffered.WithLabelValues("request")) +
		testutil.ToFloat64(p.metrics.buffered.WithLabelValues("response"))
}

// TestProxy_SlowReadersHeldWithinTheBudget (issue 50, 2): 12 clients that
// read nothing of a 4 MiB answer hold no more than the budget of 24 MiB:
// the answers that find no room wait for it (the upstream's calls are all
// made, and some answers wait), the bytes held (sealer_proxy_buffered_bytes)
// stay within the budget, the large ones within three quarters of it, and
// the live heap grows by no more than the budget and a margin. Before,
// every answer was read whole and held, with the copies made on the way
// (106 MiB of heap for JSON answers, 285 MiB for SSE events).
func TestProxy_SlowReadersHeldWithinTheBudget(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "SSE"}[sse], func(t *testing.T) {
			up := newAnsweringUpstream(t, sse)
			p, srv := slowProxy(t, up, &fakeSealer{}, func(c *Config) { c.WriteTimeout = 10 * time.Minute })
			before := heapInUse()
			const readers = 12
			for i := range readers {
				startSlowReader(t, srv.Listener.Addr().String(), callBody(i+1, "big"))
			}
			waitFor(t, "every call made and answers waiting for room", func() bool {
				return up.count() == readers && p.buffered.waiting() > 0
			})
			bytes, metric := held(p)
			heap := heapInUse() - before
			t.Logf("%d slow readers: %d MiB held, the heap grown by %d MiB, %d answers waiting", readers, bytes>>20, heap>>20, p.buffered.waiting())
			if limit := p.cfg.MaxBufferedBytes; bytes > limit {
				t.Errorf("got %d bytes held, want at most the budget, %d", bytes, limit)
			}
			if metric != float64(bytes) {
				t.Errorf("sealer_proxy_buffered_bytes: got %v, want the bytes held, %d", metric, bytes)
			}
			if limit := 2 * p.cfg.MaxBufferedBytes; heap > limit {
				t.Errorf("the heap grew by %d MiB, want at most %d MiB (twice the budget)", heap>>20, limit>>20)
			}
		})
	}
}

// TestProxy_SlowReaderIsCutOff (issue 50, 2): a client that does not read
// its answer within the write timeout is cut off: it gets part of the
// answer and then the end of the connection, the cut is counted, and the
// bytes it held are given back. Before, it held them as long as it stayed.
func TestProxy_SlowReaderIsCutOff(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "SSE"}[sse], func(t *testing.T) {
			up := newAnsweringUpstream(t, sse)
			p, srv := slowProxy(t, up, &fakeSealer{}, func(c *Config) { c.WriteTimeout = 200 * time.Millisecond })
			slow := startSlowReader(t, srv.Listener.Addr().String(), callBody(1, "big"))
			waitFor(t, "the slow reader cut off", func() bool { return testutil.ToFloat64(p.metrics.cut) == 1 })
			n, err := slow.drain()
			if err == nil || n >= bigAnswer {
				t.Errorf("the slow reader got %d bytes of the body and %v, want part of the answer and an error", n, err)
			}
			waitFor(t, "the bytes given back", func() bool { n, metric := held(p); return n == 0 && metric == 0 })
		})
	}
}

// TestProxy_NormalClientServedWhileSlowReadersHoldTheBudget (issue 50, 2):
// while slow readers of 4 MiB answers hold all the budget they may, and
// other 4 MiB answers wait for room, a client whose answer is small is
// served at once.
func TestProxy_NormalClientServedWhileSlowReadersHoldTheBudget(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "SSE"}[sse], func(t *testing.T) {
			up := newAnsweringUpstream(t, sse)
			p, srv := slowProxy(t, up, &fakeSealer{}, func(c *Config) { c.WriteTimeout = 10 * time.Minute })
			for i := range 8 {
				startSlowReader(t, srv.Listener.Addr().String(), callBody(i+1, "big"))
			}
			waitFor(t, "answers waiting for room", func() bool { return up.count() == 8 && p.buffered.waiting() > 0 })
			for i := range 20 {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(callBody(100+i, "small")))
				req.Header.Set("Authorization", "Bearer tok")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := fmt.Sprintf(`"id":%d,"result":{"content":[{"type":"text","text":"ok"}]}`, 100+i); resp.StatusCode != 200 || !strings.Contains(string(body), want) {
					t.Fatalf("call %d: got %d %s, want 200 with %s", i, resp.StatusCode, body, want)
				}
			}
			if p.buffered.waiting() == 0 {
				t.Error("no answer waits for room any more: the budget was not held while the small ones were served")
			}
		})
	}
}

// TestProxy_AnswerWithoutRoomIsDropped: an answer that finds no room in
// the budget within its wait is replaced by the proxy's JSON-RPC error,
// and the exchange records no outcome (its retries are refused at once).
func TestProxy_AnswerWithoutRoomIsDropped(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "JSON", true: "SSE"}[sse], func(t *testing.T) {
			up := newAnsweringUpstream(t, sse)
			s := &fakeSealer{recording: true}
			p, _ := slowProxy(t, up, s, func(c *Config) { c.MaxBufferedBytes = 48 << 20; c.WriteTimeout = 10 * time.Minute })
			p.roomWait = 50 * time.Millisecond
			// 20 MiB held: the 24 MiB that a recorded answer of 4 MiB needs
			// (read, judged, kept) are not left below three quarters of the
			// budget, nor, in a stream, the room to judge and keep an event.
			hog := p.buffered.reserve(kindResponse)
			if !hog.tryGrow(20 << 20) {
				t.Fatal("20 MiB of an empty budget of 48 MiB: refused")
			}
			retry := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big","arguments":{},"requestState":"S"}}`
			status, _, body := serve(p, retry)
			var m map[string]any
			if sse {
				_, data, _ := strings.Cut(body, "data: ") // the event in place of the answer
				body = data
			}
			json.Unmarshal([]byte(body), &m)
			wantStatus := http.StatusServiceUnavailable
			if sse {
				wantStatus = http.StatusOK // the stream had begun
			}
			if status != wantStatus || errorCode(m) != "id 7 code -32603" {
				t.Errorf("got %d %s, want %d and id 7 code -32603", status, body, wantStatus)
			}
			if hog.release(); p.buffered.Load() != 0 {
				t.Errorf("%d bytes held after the answer, want none", p.buffered.Load())
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.records) != 1 || s.records[0].outcome != "" {
				t.Errorf("recorded %v, want one record of no outcome", s.records)
			}
		})
	}
}

// deadlineWriter is a ResponseWriter that keeps the write deadlines set
// on it, as http.ResponseController sets them.
type deadlineWriter struct {
	http.ResponseWriter
	mu        sync.Mutex
	deadlines []time.Time
}

func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deadlines = append(d.deadlines, t)
	return nil
}

func (d *deadlineWriter) last() (time.Time, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.deadlines) == 0 {
		return time.Time{}, 0
	}
	return d.deadlines[len(d.deadlines)-1], len(d.deadlines)
}

// TestEventReader_DeadlineForEachEventNotForTheWait: the write timeout
// bounds the writing of each SSE event, never the wait for the next: a
// deadline is set when an event is handed on, and lifted before the reader
// waits for the upstream's next event, however long the stream lives.
func TestEventReader_DeadlineForEachEventNotForTheWait(t *testing.T) {
	w := &deadlineWriter{ResponseWriter: httptest.NewRecorder()}
	upR, upW := io.Pipe()
	e := newEventReader(upR, 1<<10, func([]byte) []byte { return nil }, func(error) []byte { return nil })
	b, _ := testBudget(1 << 20)
	e.bounds = &eventBounds{ctx: t.Context(), held: b.reserve(kindResponse), wait: time.Minute,
		room: func(data []byte) int64 { return int64(len(data)) },
		rc:   http.NewResponseController(w), timeout: time.Minute, cut: func() {}}
	got := make(chan string)
	read := func() {
		buf := make([]byte, 64)
		n, err := e.Read(buf)
		if err != nil {
			n = copy(buf, err.Error())
		}
		got <- string(buf[:n])
	}
	for i := range 3 {
		go read()
		if i > 0 {
			// The event before is written: waiting for this one, no deadline.
			waitFor(t, "the deadline lifted", func() bool { d, n := w.last(); return n == 2*i && d.IsZero() })
			if b.Load() > 4<<10 {
				t.Errorf("waiting for event %d: %d bytes held, want at most the buffer kept", i+1, b.Load())
			}
		}
		event := fmt.Sprintf("data: %d\n\n", i)
		go io.WriteString(upW, event)
		if s := <-got; s != event {
			t.Fatalf("read %q, want %q", s, event)
		}
		if d, n := w.last(); n != 2*i+1 || d.IsZero() {
			t.Errorf("event %d handed on: deadlines %v, want one set for it", i+1, w.deadlines)
		}
	}
	upW.Close()
	go read()
	if s := <-got; s != io.EOF.Error() {
		t.Errorf("read %q at the end, want EOF", s)
	}
	if d, _ := w.last(); !d.IsZero() {
		t.Error("the stream ended with a write deadline set")
	}
	e.Close()
	if b.Load() != 0 {
		t.Errorf("closed: %d bytes held, want none", b.Load())
	}
}

// TestProxy_DeadlineForTheAnswerLiftedOnceWritten: a JSON answer the
// proxy held is written under the write timeout, and the deadline is
// lifted once it is written, for the next request on the connection.
func TestProxy_DeadlineForTheAnswerLiftedOnceWritten(t *testing.T) {
	up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`)
	p := newProxy(t, up, &fakeSealer{}, nil).(*Proxy)
	w := &deadlineWriter{ResponseWriter: httptest.NewRecorder()}
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(callBody(1, "t")))
	req.Header.Set("Authorization", "Bearer tok")
	p.ServeHTTP(w, req)
	if len(w.deadlines) != 2 || w.deadlines[0].IsZero() || !w.deadlines[1].IsZero() {
		t.Errorf("got deadlines %v, want one set, then lifted", w.deadlines)
	}
	if p.buffered.Load() != 0 {
		t.Errorf("%d bytes held after the answer, want none", p.buffered.Load())
	}
}
