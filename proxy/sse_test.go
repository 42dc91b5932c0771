package proxy

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// read runs an eventReader over stream, rewriting data "x" to "y".
func read(t *testing.T, stream string, max int) (string, []error) {
	t.Helper()
	var errs []error
	r := newEventReader(io.NopCloser(strings.NewReader(stream)), max,
		func(data []byte) []byte {
			if string(data) == "x" {
				return []byte("y")
			}
			return nil
		},
		func(err error) []byte { errs = append(errs, err); return []byte("data: failed\n\n") })
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), errs
}

func TestEventReader(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"passes events unchanged", "event: message\ndata: a\nid: 1\n\n: keep-alive\n\ndata: b\n\n", "event: message\ndata: a\nid: 1\n\n: keep-alive\n\ndata: b\n\n"},
		{"rewrites one event in place", "data: a\n\nevent: message\ndata:x\nid: 2\n\ndata: c\n\n", "data: a\n\nevent: message\ndata: y\nid: 2\n\ndata: c\n\n"},
		{"CRLF", "data: a\r\n\r\ndata: x\r\nid: 3\r\n\r\n", "data: a\r\n\r\ndata: y\nid: 3\r\n\r\n"},
		{"CR", "data: a\r\rdata: x\r\r", "data: a\r\rdata: y\n\r"},
		{"data in several lines joined before judging", "data: x\ndata: z\n\n", "data: x\ndata: z\n\n"},
		{"an event cut by the end", "data: a\n\ndata: x", "data: a\n\ndata: y\n"},
		{"data alone is an empty value", "data\n\n", "data\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := read(t, tc.in, 1<<10)
			if got != tc.want || len(errs) != 0 {
				t.Errorf("got %q, %v; want %q", got, errs, tc.want)
			}
		})
	}
}

func TestEventReader_TooLargeIsAnErrorNeverTruncated(t *testing.T) {
	big := "data: " + strings.Repeat("a", 200) + "\n\n"
	got, errs := read(t, "data: a\n\n"+big+"data: b\n\n", 100)
	if got != "data: a\n\ndata: failed\n\n" || len(errs) != 1 || !errors.Is(errs[0], errEventTooLarge) {
		t.Errorf("got %q, %v; want the first event, then the failure alone", got, errs)
	}
}

// FuzzEventReader: no stream panics the reader, and with nothing to
// rewrite it passes the stream on byte for byte, but for a leading byte
// order mark.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "event: m\r\ndata: {}\r\n\r\n", "data: a\r\r: c\n\nid: 1", "\n\n\n", "data",
		"\uFEFFdata: {}\n\n", "\uFEFF\uFEFFdata: a\n\n", "\uFEFF", "\xEF\xBBdata: a\n\n",
		"data: {\"id\":1,\"result\":{\"requestState\":\"p\"}} trailing\n\n",
		"data: {\"id\":1}\ndata: {\"id\":2}\n\n", "data: {\"result\":{\"requestState\":\"p\",\"requestState\":\"q\"}}\r\n\r\n",
		"id: 1\ndata:\n\n", "data: {\"result\":{\"RequestState\":\"p\"}}\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		failed := false
		r := newEventReader(io.NopCloser(bytes.NewReader(stream)), 1<<12,
			func([]byte) []byte { return nil },
			func(error) []byte { failed = true; return nil })
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !failed && !bytes.Equal(out, bytes.TrimPrefix(stream, byteOrderMark)) {
			t.Fatalf("got %q from %q", out, stream)
		}
	})
}
