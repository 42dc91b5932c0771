package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// errEventTooLarge is an SSE line or event longer than the response cap.
var errEventTooLarge = errors.New("proxy: upstream SSE event exceeds the response size cap")

// eventReader reads a text/event-stream body event by event and passes
// each on as received, byte for byte, except an event whose data rewrite
// changes: that one goes on with its other lines as they were and its data
// in one line. It hands each event on as soon as it is complete, so that
// the stream stays in order and unbuffered.
type eventReader struct {
	body    io.ReadCloser
	lines   *bufio.Scanner
	max     int
	rewrite func(data []byte) []byte // nil: unchanged
	onError func(err error) []byte   // the event ending a stream that failed
	pending []byte
	started bool
	done    bool
}

func newEventReader(body io.ReadCloser, max int, rewrite func([]byte) []byte, onError func(error) []byte) *eventReader {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4096), max)
	sc.Split(splitLines)
	return &eventReader{body: body, lines: sc, max: max, rewrite: rewrite, onError: onError}
}

func (e *eventReader) Read(p []byte) (int, error) {
	for len(e.pending) == 0 {
		if e.done {
			return 0, io.EOF
		}
		e.pending = e.next()
	}
	n := copy(p, e.pending)
	e.pending = e.pending[n:]
	return n, nil
}

func (e *eventReader) Close() error { return e.body.Close() }

// next reads one event (through its blank line, or to the end of the
// stream) and returns what to pass on.
func (e *eventReader) next() []byte {
	var raw bytes.Buffer
	var lines [][]byte
	for e.lines.Scan() {
		line := e.lines.Bytes()
		if !e.started {
			// SSE decoders skip a byte order mark that starts the stream.
			line, e.started = bytes.TrimPrefix(line, byteOrderMark), true
		}
		if raw.Len()+len(line) > e.max {
			return e.fail(errEventTooLarge)
		}
		raw.Write(line)
		lines = append(lines, bytes.Clone(line))
		if len(trimEOL(line)) == 0 {
			return e.event(raw.Bytes(), lines)
		}
	}
	e.done = true
	if err := e.lines.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = errEventTooLarge
		}
		return e.fail(err)
	}
	return e.event(raw.Bytes(), lines) // an event cut by the end of the stream
}

// event returns the event as received, or rewritten when its data is a
// message that rewrite changes.
func (e *eventReader) event(raw []byte, lines [][]byte) []byte {
	var data [][]byte
	first := -1
	for i, l := range lines {
		if v, ok := field(l, "data"); ok {
			data = append(data, v)
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return raw
	}
	msg := e.rewrite(bytes.Join(data, []byte("\n")))
	if msg == nil {
		return raw
	}
	var out bytes.Buffer
	for i, l := range lines {
		switch _, isData := field(l, "data"); {
		case i == first:
			out.WriteString("data: ")
			out.Write(msg)
			out.WriteByte('\n')
		case !isData:
			out.Write(l)
		}
	}
	return out.Bytes()
}

// fail ends the stream with the event onError gives for err.
func (e *eventReader) fail(err error) []byte {
	e.done = true
	return e.onError(err)
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

// splitLines splits an event stream into lines, each with its end of line
// (CRLF, LF or CR, as the SSE format allows).
func splitLines(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i+1], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i+2], nil
				}
				return i + 1, data[:i+1], nil
			}
			if atEOF {
				return i + 1, data[:i+1], nil
			}
			return 0, nil, nil // a CR at the end: an LF may follow
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
