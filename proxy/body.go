package proxy

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// readBody reads a request body within the proxy's bounds: at most
// MaxRequestBytes (413), within BodyTimeout of its headers (408), and only
// while the bodies held at once stay within MaxBufferedBytes (503). It
// answers the request itself when it returns false; otherwise release
// gives the body's reservation back, once the body is no longer held.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	size := int64(p.cfg.MaxRequestBytes) // unknown length: the most it may be
	if r.ContentLength > size {
		p.refuse(w, nil, "body_too_large", http.StatusRequestEntityTooLarge, errBodyTooLarge)
		return nil, nil, false
	}
	if r.ContentLength >= 0 {
		size = r.ContentLength
	}
	if p.buffered.Add(size) > p.cfg.MaxBufferedBytes {
		p.buffered.Add(-size)
		p.overloaded(w, "buffer")
		return nil, nil, false
	}
	p.metrics.buffered.Add(float64(size))
	release = func() { p.buffered.Add(-size); p.metrics.buffered.Sub(float64(size)) }

	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(p.cfg.BodyTimeout))
	in := http.MaxBytesReader(w, r.Body, int64(p.cfg.MaxRequestBytes))
	var err error
	if r.ContentLength >= 0 {
		body = make([]byte, r.ContentLength) // never grown past what was declared
		_, err = io.ReadFull(in, body)
	} else {
		body, err = io.ReadAll(in)
	}
	rc.SetReadDeadline(time.Time{})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		p.refuse(w, nil, "body_timeout", http.StatusRequestTimeout, errBodyTimeout)
	case err != nil:
		p.refuse(w, nil, "body_too_large", http.StatusRequestEntityTooLarge, errBodyTooLarge)
	default:
		return body, release, true
	}
	release()
	return nil, nil, false
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
