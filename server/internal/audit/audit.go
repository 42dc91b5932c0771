// Package audit writes the sealer's audit events: one per authenticated
// Seal, Open and Record, with the time, the method, the tenant, a hash of
// the principal, the state's public header (id and key version) and the
// outcome reason. Never the principal, the state or the payload. Events go
// to the service log, or to a JSON-lines file of their own written by a
// goroutine of its own (writer.go).
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/sealer"
)

// A Log takes the audit events of the calls: one from ToLogger or Open. A
// nil *Log records nothing.
type Log struct {
	log  *slog.Logger // the service log, when there is no file
	file *writer      // the audit file's writer, else nil
	stop func() error
}

// ToLogger returns a Log that writes its events to log.
func ToLogger(log *slog.Logger) *Log {
	return &Log{log: log, stop: func() error { return nil }}
}

// Open returns a Log that writes its events as JSON lines appended to the
// file at path, created 0600 if need be, and registers the counters of its
// writer with reg (sealer_audit_queue_full_total,
// sealer_audit_write_errors_total).
func Open(path string, reg prometheus.Registerer) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %v", err)
	}
	w := newWriter(f, queueLen)
	w.register(reg)
	stop := w.start(drainEvery, flushEvery)
	return &Log{file: w, stop: func() error { return errors.Join(stop(), f.Close()) }}, nil
}

// Close writes what is queued, flushes and closes the audit file.
func (a *Log) Close() error {
	if a == nil {
		return nil
	}
	return a.stop()
}

// Record takes the event of one call of tenant. On the call's path it reads
// only what the event must not keep a reference to (the state's public
// header: the state may be 87 KB); the principal's hash and the line are
// made by the file's writer, off the path.
func (a *Log) Record(ctx context.Context, tenant, method string, req, resp any, reason string) {
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
		if out, ok := resp.(*sealerv1.OpenResponse); ok && out.GetOutcome() != nil {
			reason = replayed // a retry answered with the recorded outcome, no payload
		}
	case *sealerv1.RecordRequest:
		state = r.GetRequestState() // the state's open named its principal
	default:
		return
	}
	e := event{time: time.Now(), method: method, tenant: tenant, principal: principal, reason: reason}
	if h, err := sealer.Inspect(state); err == nil {
		e.stateID, e.keyVersion, e.withState = h.ID, h.KeyVersion, true
	}
	if a.file != nil {
		a.file.add(e)
		return
	}
	a.logEvent(ctx, e)
}

// replayed is the audit reason of an Open answered with a recorded
// outcome, where the metrics say OK: the event tells a replay from an open
// that gave the payload.
const replayed = "REPLAYED"

// event is one event as the call leaves it: the principal is hashed
// only when the event is written.
type event struct {
	time                              time.Time
	method, tenant, principal, reason string
	stateID                           sealer.StateID
	keyVersion                        uint32
	withState                         bool
}

// appendLine appends the event as one JSON object, in the form slog's JSON
// handler gives it. Every value is JSON-safe by construction (registered
// method names, tenant names of a-z 0-9 . _ -, hex, reasons of A-Z and _),
// so none needs escaping; a JSON encoder per event was a twentieth of the
// sealer's CPU under load.
func (e *event) appendLine(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = e.time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"audit","method":"`...)
	b = append(b, e.method...)
	b = append(b, `","tenant":"`...)
	b = append(b, e.tenant...)
	b = append(b, `","principal_hash":"`...)
	b = appendPrincipalHash(b, e.tenant, e.principal)
	b = append(b, `","reason":"`...)
	b = append(b, e.reason...)
	b = append(b, '"')
	if e.withState {
		b = append(b, `,"state_id":"`...)
		b = hex.AppendEncode(b, e.stateID[:])
		b = append(b, `","key_version":`...)
		b = strconv.AppendUint(b, uint64(e.keyVersion), 10)
	}
	return append(b, "}\n"...)
}

// logEvent writes the event to the service log.
func (a *Log) logEvent(ctx context.Context, e event) {
	// Typed attributes: an event per call must not box its values.
	attrs := [6]slog.Attr{
		slog.String("method", e.method), slog.String("tenant", e.tenant),
		slog.String("principal_hash", principalHash(e.tenant, e.principal)), slog.String("reason", e.reason),
	}
	n := 4
	if e.withState {
		attrs[4], attrs[5] = slog.String("state_id", e.stateID.String()), slog.Uint64("key_version", uint64(e.keyVersion))
		n = 6
	}
	// A record made here carries no caller PC: slog would walk the stack for
	// one on every call (a fifth of the event's cost) and never print it.
	r := slog.NewRecord(e.time, slog.LevelInfo, "audit", 0)
	r.AddAttrs(attrs[:n]...)
	a.log.Handler().Handle(ctx, r)
}

// principalHash identifies a principal in the audit log without naming it:
// the first 16 bytes of SHA-256 over a label, the tenant and the principal,
// in hex; "" for no principal.
func principalHash(tenant, principal string) string {
	return string(appendPrincipalHash(nil, tenant, principal))
}

// appendPrincipalHash appends principalHash(tenant, principal) to b,
// without allocating for principals of up to about 160 bytes.
func appendPrincipalHash(b []byte, tenant, principal string) []byte {
	if principal == "" {
		return b
	}
	var buf [256]byte
	in := append(buf[:0], principalHashLabel...)
	in = append(in, tenant...)
	in = append(in, 0)
	in = append(in, principal...)
	sum := sha256.Sum256(in)
	return hex.AppendEncode(b, sum[:16])
}

const principalHashLabel = "mcp-sealer/v1 audit principal\x00"
