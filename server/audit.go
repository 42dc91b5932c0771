package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/sealer"
)

// auditor records one event per authenticated Seal and Open: time, method,
// tenant, a hash of the principal, the state's public header (id and key
// version) and the outcome reason. Never the principal, the state or the
// payload. Events go to the service log, or to a JSON-lines file of their
// own (--audit-log).
type auditor struct {
	log  *slog.Logger // the service log, when there is no file
	file *flushWriter // the audit file, else nil
	bufs sync.Pool    // *[]byte line buffers for the file
	stop func() error
}

// openAudit returns the auditor: the service log, or a JSON-lines file
// written through a buffer flushed every 200 ms and on Close, so that an
// event costs no write of its own. A crash loses at most the last 200 ms.
func openAudit(path string, log *slog.Logger) (*auditor, error) {
	if path == "" {
		return &auditor{log: log, stop: func() error { return nil }}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %v", err)
	}
	w := &flushWriter{bw: bufio.NewWriterSize(f, 64<<10)}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				w.Flush()
			}
		}
	}()
	return &auditor{file: w, stop: func() error {
		close(done)
		<-stopped
		return errors.Join(w.Flush(), f.Close())
	}}, nil
}

// Close flushes and closes the audit file.
func (a *auditor) Close() error { return a.stop() }

// record writes the event of one call.
func (a *auditor) record(ctx context.Context, t *tenant, method string, req, resp any, reason string) {
	if a == nil || a.file == nil && !a.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var principal, state string
	switch r := req.(type) {
	case *sealerv1.SealRequest:
		principal = r.GetPrincipal()
		if out, ok := resp.(*sealerv1.SealResponse); ok {
			state = out.GetRequestState()
		}
	case *sealerv1.OpenRequest:
		principal, state = r.GetPrincipal(), r.GetRequestState()
	default:
		return
	}
	e := auditEvent{time: time.Now(), method: method, tenant: t.name, principalHash: principalHash(t.name, principal), reason: reason}
	if h, err := sealer.Inspect(state); err == nil {
		e.stateID, e.keyVersion, e.withState = h.ID.String(), h.KeyVersion, true
	}
	if a.file != nil {
		a.writeLine(e)
		return
	}
	a.logEvent(ctx, e)
}

type auditEvent struct {
	time                                  time.Time
	method, tenant, principalHash, reason string
	stateID                               string
	keyVersion                            uint32
	withState                             bool
}

// writeLine appends the event to the file as one JSON object, in the form
// slog's JSON handler gives it. Every value is JSON-safe by construction
// (registered method names, tenant names of a-z 0-9 . _ -, hex, reasons of
// A-Z and _), so none needs escaping; a JSON encoder per event was a
// twentieth of the sealer's CPU under load.
func (a *auditor) writeLine(e auditEvent) {
	bp, _ := a.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := append((*bp)[:0], `{"time":"`...)
	b = e.time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"audit","method":"`...)
	b = append(b, e.method...)
	b = append(b, `","tenant":"`...)
	b = append(b, e.tenant...)
	b = append(b, `","principal_hash":"`...)
	b = append(b, e.principalHash...)
	b = append(b, `","reason":"`...)
	b = append(b, e.reason...)
	b = append(b, '"')
	if e.withState {
		b = append(b, `,"state_id":"`...)
		b = append(b, e.stateID...)
		b = append(b, `","key_version":`...)
		b = strconv.AppendUint(b, uint64(e.keyVersion), 10)
	}
	b = append(b, "}\n"...)
	a.file.Write(b)
	*bp = b
	a.bufs.Put(bp)
}

// logEvent writes the event to the service log.
func (a *auditor) logEvent(ctx context.Context, e auditEvent) {
	// Typed attributes: an event per call must not box its values.
	attrs := [6]slog.Attr{
		slog.String("method", e.method), slog.String("tenant", e.tenant),
		slog.String("principal_hash", e.principalHash), slog.String("reason", e.reason),
	}
	n := 4
	if e.withState {
		attrs[4], attrs[5] = slog.String("state_id", e.stateID), slog.Uint64("key_version", uint64(e.keyVersion))
		n = 6
	}
	// A record made here carries no caller PC: slog would walk the stack for
	// one on every call (a fifth of the event's cost) and never print it.
	r := slog.NewRecord(e.time, slog.LevelInfo, "audit", 0)
	r.AddAttrs(attrs[:n]...)
	a.log.Handler().Handle(ctx, r)
}

// principalHash identifies a principal in the audit log without naming it:
// the first 16 bytes of SHA-256 over a label, the tenant and the principal.
func principalHash(tenant, principal string) string {
	if principal == "" {
		return ""
	}
	h := sha256.New()
	io.WriteString(h, "mcp-sealer/v1 audit principal\x00")
	io.WriteString(h, tenant)
	h.Write([]byte{0})
	io.WriteString(h, principal)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// flushWriter is a buffered writer safe for a writer and a flusher at once.
type flushWriter struct {
	mu sync.Mutex
	bw *bufio.Writer
}

func (w *flushWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Write(p)
}

func (w *flushWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Flush()
}
