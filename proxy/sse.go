package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// errEventTooLarge is an SSE line or event longer than the response cap.
var errEventTooLarge = errors.New("proxy: upstream SSE event exceeds the response size cap")

// eventReader reads a text/event-stream body event by event and passes
// each on as received, byte for byte, except an event whose data rewrite
// changes: that one goes on with its other lines as they were and its data
// in one line. It hands each event on as soon as it is complete, so that
// the stream stays in order and unbuffered.
//
// It holds one copy of the event (raw; its lines are offsets into it), and
// while rewriting it, the data joined when it spans several lines and the
// message rewritten; with bounds, it reserves them in the budget before it
// holds them, gives them back once the event is written, and bounds the
// writing of each event, not the wait for the next one.
type eventReader struct {
	body    io.ReadCloser
	in      *bufio.Reader
	max     int
	rewrite func(data []byte) []byte // nil: unchanged
	onError func(err error) []byte   // the event ending a stream that failed
	bounds  *eventBounds             // nil: nothing counted, no deadline

	raw      []byte   // the event being read or written, as received
	ends     []int    // the end of each of its lines in raw
	pending  [][]byte // what is left to write of the event
	deadline time.Time
	started  bool
	done     bool
}

// eventBounds are what an eventReader of an exchange counts and bounds.
type eventBounds struct {
	ctx     context.Context
	held    *reservation // the event's bytes
	wait    time.Duration
	room    func(data []byte) int64 // to judge data and rewrite it
	rc      *http.ResponseController
	timeout time.Duration // to write one event
	cut     func()        // a client cut off by timeout
}

func newEventReader(body io.ReadCloser, max int, rewrite func([]byte) []byte, onError func(error) []byte) *eventReader {
	return &eventReader{body: body, in: bufio.NewReaderSize(body, 8<<10), max: max, rewrite: rewrite, onError: onError}
}

func (e *eventReader) Read(p []byte) (int, error) {
	for len(e.pending) == 0 {
		e.written()
		if e.done {
			return 0, io.EOF
		}
		for _, seg := range e.next() {
			if len(seg) > 0 {
				e.pending = append(e.pending, seg)
			}
		}
		if len(e.pending) > 0 && e.bounds != nil {
			e.deadline = time.Now().Add(e.bounds.timeout)
			e.bounds.rc.SetWriteDeadline(e.deadline)
		}
	}
	n := 0
	for n < len(p) && len(e.pending) > 0 {
		c := copy(p[n:], e.pending[0])
		n += c
		if e.pending[0] = e.pending[0][c:]; len(e.pending[0]) == 0 {
			e.pending[0] = nil
			e.pending = e.pending[1:]
		}
	}
	return n, nil
}

// written is called once the event has been written: its bytes are given
// back (a small buffer is kept for the next), and the wait for the next
// event has no deadline.
func (e *eventReader) written() {
	e.pending = nil
	if cap(e.raw) > 4<<10 {
		e.raw = nil
	}
	e.raw, e.ends = e.raw[:0], e.ends[:0]
	if e.bounds == nil {
		return
	}
	e.bounds.held.resize(int64(cap(e.raw)))
	if !e.deadline.IsZero() {
		e.deadline = time.Time{}
		e.bounds.rc.SetWriteDeadline(time.Time{})
	}
}

func (e *eventReader) Close() error {
	if e.bounds != nil {
		if len(e.pending) > 0 && !e.deadline.IsZero() && !time.Now().Before(e.deadline) {
			e.bounds.cut()
		}
		e.bounds.held.release()
	}
	e.pending, e.raw = nil, nil
	return e.body.Close()
}

// next reads one event (through its blank line, or to the end of the
// stream) and returns what to pass on.
func (e *eventReader) next() [][]byte {
	for {
		err := e.readLine()
		if err == io.EOF {
			e.done = true
			return e.event() // an event cut by the end of the stream, if any
		}
		if err != nil {
			return e.fail(err)
		}
		if !e.started {
			// SSE decoders skip a byte order mark that starts the stream.
			e.started = true
			if bytes.HasPrefix(e.raw, byteOrderMark) {
				e.raw = e.raw[:copy(e.raw, e.raw[len(byteOrderMark):])]
				e.ends[0] -= len(byteOrderMark)
			}
			if len(e.raw) > e.max {
				return e.fail(errEventTooLarge)
			}
		}
		if len(trimEOL(e.line(len(e.ends)-1))) == 0 {
			return e.event()
		}
	}
}

// readLine appends the next line of the stream, with its end of line
// (CRLF, LF or CR, as the SSE format allows), to raw; io.EOF when the
// stream ends before it.
func (e *eventReader) readLine() error {
	start := len(e.raw)
	for {
		if _, err := e.in.Peek(1); err != nil {
			if err == io.EOF && len(e.raw) > start {
				break // a line cut by the end of the stream
			}
			return err
		}
		buf, _ := e.in.Peek(e.in.Buffered())
		n, eol := len(buf), bytes.IndexAny(buf, "\r\n")
		cr := eol >= 0 && buf[eol] == '\r'
		if eol >= 0 {
			n = eol + 1
		}
		if err := e.append(buf[:n]); err != nil {
			return err
		}
		e.in.Discard(n)
		if eol < 0 {
			continue
		}
		// A CR may be the first half of a CRLF, whose LF comes later.
		if cr {
			if next, err := e.in.Peek(1); err == nil && next[0] == '\n' {
				if err := e.append(next); err != nil {
					return err
				}
				e.in.Discard(1)
			}
		}
		break
	}
	e.ends = append(e.ends, len(e.raw))
	return nil
}

// append appends b to raw, within max, reserving a grown buffer before it
// holds it.
func (e *eventReader) append(b []byte) error {
	limit := e.max
	if !e.started {
		limit += len(byteOrderMark) // to be trimmed
	}
	need := len(e.raw) + len(b)
	if need > limit {
		return errEventTooLarge
	}
	if need > cap(e.raw) {
		next := min(max(2*cap(e.raw), need, 4<<10), limit)
		if err := e.reserve(next); err != nil {
			return err
		}
		grown := make([]byte, len(e.raw), next)
		copy(grown, e.raw)
		e.unreserve(cap(e.raw))
		e.raw = grown
	}
	e.raw = append(e.raw, b...)
	return nil
}

func (e *eventReader) reserve(n int) error {
	if e.bounds == nil {
		return nil
	}
	return e.bounds.held.grow(e.bounds.ctx, int64(n), e.bounds.wait)
}

func (e *eventReader) unreserve(n int) {
	if e.bounds != nil {
		e.bounds.held.shrink(int64(n))
	}
}

// line returns the i-th line of the event, with its end of line.
func (e *eventReader) line(i int) []byte {
	start := 0
	if i > 0 {
		start = e.ends[i-1]
	}
	return e.raw[start:e.ends[i]]
}

// event returns the event as received, or rewritten when its data is a
// message that rewrite changes.
func (e *eventReader) event() [][]byte {
	var data [][]byte
	first := -1
	for i := range e.ends {
		if v, ok := field(e.line(i), "data"); ok {
			data = append(data, v)
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return [][]byte{e.raw}
	}
	joined := data[0]
	if len(data) > 1 {
		n := len(data) - 1
		for _, d := range data {
			n += len(d)
		}
		if err := e.reserve(n); err != nil {
			return e.fail(err)
		}
		joined = bytes.Join(data, []byte("\n"))
		defer e.unreserve(n)
	}
	room := 0 // to judge the message and rewrite it
	if e.bounds != nil {
		room = int(e.bounds.room(joined))
	}
	if err := e.reserve(room); err != nil {
		return e.fail(err)
	}
	msg := e.rewrite(joined)
	e.unreserve(room - min(cap(msg), room))
	if msg == nil {
		return [][]byte{e.raw}
	}
	var out [][]byte
	for i := range e.ends {
		l := e.line(i)
		switch _, isData := field(l, "data"); {
		case i == first:
			out = append(out, []byte("data: "), msg, []byte("\n"))
		case !isData:
			out = append(out, l)
		}
	}
	return out
}

// fail ends the stream with the event onError gives for err.
func (e *eventReader) fail(err error) [][]byte {
	e.done = true
	return [][]byte{e.onError(err)}
}

// field returns the value of an SSE line "name: value" (one space after the
// colon removed, as the SSE parsing rules say).
func field(line []byte, name string) ([]byte, bool) {
	l := trimEOL(line)
	if !bytes.HasPrefix(l, []byte(name)) {
		return nil, false
	}
	l = l[len(name):]
	if len(l) == 0 {
		return l, true // "data" alone: an empty value
	}
	if l[0] != ':' {
		return nil, false
	}
	return bytes.TrimPrefix(l[1:], []byte(" ")), true
}

func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}
