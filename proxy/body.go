package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// readBody reads a request body within the proxy's bounds: at most
// MaxRequestBytes (413), within BodyTimeout of its headers (408), and only
// while its reservation in the budget fits (503). It answers the request
// itself when it returns false; otherwise held is the body's reservation,
// to be released once the body is no longer held.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held *reservation, ok bool) {
	size := int64(p.cfg.MaxRequestBytes) // unknown length: the most it may be
	if r.ContentLength > size {
		p.refuse(w, nil, "body_too_large", http.StatusRequestEntityTooLarge, errBodyTooLarge)
		return nil, nil, false
	}
	if r.ContentLength >= 0 {
		size = r.ContentLength
	}
	held = p.buffered.reserve(kindRequest)
	if !held.tryGrow(size) {
		p.overloaded(w, "buffer")
		return nil, nil, false
	}

	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(p.cfg.BodyTimeout))
	in := http.MaxBytesReader(w, r.Body, int64(p.cfg.MaxRequestBytes))
	var err error
	if r.ContentLength >= 0 {
		body = make([]byte, r.ContentLength) // never grown past what was declared
		_, err = io.ReadFull(in, body)
	} else {
		body, err = io.ReadAll(in)
		held.resize(int64(cap(body))) // what it holds, no longer the most it might
	}
	rc.SetReadDeadline(time.Time{})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		p.refuse(w, nil, "body_timeout", http.StatusRequestTimeout, errBodyTimeout)
	case err != nil:
		p.refuse(w, nil, "body_too_large", http.StatusRequestEntityTooLarge, errBodyTooLarge)
	default:
		return body, held, true
	}
	held.release()
	return nil, nil, false
}

// readAnswer reads the upstream's JSON answer whole, at most
// MaxResponseBytes, reserving in held its bytes, and then the room that
// working on n of them needs, before it holds them: all at once when the
// upstream gave its length, else as the buffer grows. With no room in time
// it returns errBufferFull.
func (p *Proxy) readAnswer(ctx context.Context, resp *http.Response, held *reservation, room func(n int) int64) ([]byte, error) {
	limit := int64(p.cfg.MaxResponseBytes)
	if resp.ContentLength > limit {
		return nil, errResponseTooLarge
	}
	if resp.ContentLength >= 0 {
		if err := held.grow(ctx, resp.ContentLength+room(int(resp.ContentLength)), p.roomWait); err != nil {
			return nil, err
		}
		data := make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, fmt.Errorf("proxy: reading the upstream's response: %v", err)
		}
		return data, nil
	}
	var data []byte
	for {
		if len(data) == cap(data) {
			if int64(len(data)) > limit {
				return nil, errResponseTooLarge
			}
			// Grown by doubling, as append does, the old buffer counted
			// until the new one holds its bytes.
			next := min(max(2*int64(cap(data)), 16<<10), limit+1)
			if err := held.grow(ctx, next, p.roomWait); err != nil {
				return nil, err
			}
			grown := make([]byte, len(data), next)
			copy(grown, data)
			held.shrink(int64(cap(data)))
			data = grown
		}
		n, err := resp.Body.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("proxy: reading the upstream's response: %v", err)
		}
	}
	if int64(len(data)) > limit {
		return nil, errResponseTooLarge
	}
	if err := held.grow(ctx, room(len(data)), p.roomWait); err != nil {
		return nil, err
	}
	return data, nil
}

// heldBody is an answer the proxy holds while the client reads it. Once
// it is written (read to its end), or the client is cut off (closed
// before), it gives back its n bytes of held and lifts the write deadline.
type heldBody struct {
	*bytes.Reader
	p        *Proxy
	held     *reservation
	n        int64
	rc       *http.ResponseController
	deadline time.Time
	done     bool
}

func (h *heldBody) Read(b []byte) (int, error) {
	n, err := h.Reader.Read(b)
	if err == io.EOF {
		h.finish(true)
	}
	return n, err
}

func (h *heldBody) Close() error {
	h.finish(false)
	return nil
}

func (h *heldBody) finish(written bool) {
	if h.done {
		return
	}
	h.done = true
	h.held.shrink(h.n)
	if written {
		h.rc.SetWriteDeadline(time.Time{})
	} else if !h.deadline.IsZero() && !time.Now().Before(h.deadline) {
		h.p.metrics.cut.Inc()
	}
}

var (
	errBodyTooLarge = &requestError{-32600, "invalid request: body too large or unreadable"}
	errBodyTimeout  = &requestError{-32600, "invalid request: the body did not arrive in time"}
	errOverloaded   = &requestError{-32603, "the proxy is at its bound of requests: retry later"}
)

// overloaded answers a request past the proxy's bounds (why: concurrency or
// buffer) with 503 and a Retry-After, without reading its body.
func (p *Proxy) overloaded(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", strconv.Itoa(1))
	w.Header().Set("Connection", "close")
	p.refuse(w, nil, "overloaded_"+why, http.StatusServiceUnavailable, errOverloaded)
}
