package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

const (
	sealMethod = sealerv1.Sealer_Seal_FullMethodName
	openMethod = sealerv1.Sealer_Open_FullMethodName
)

var testAuditEvents = []event{
	{time: time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC), method: sealMethod, tenant: "team-a.b_c", principal: "alice@example.com",
		reason: "OK", stateID: sealer.StateID{0xfc, 0xfe, 0x94, 0x9c, 0xac, 0xa3, 0xf3, 0x81, 0x70, 0x78, 0xd0, 0x50, 0x76, 0x8e, 0x5b, 0xf0},
		keyVersion: 4294967295, withState: true},
	{time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), method: openMethod, tenant: "default", reason: "INVALID_ARGUMENT"},
	{time: time.Date(2026, 1, 2, 3, 4, 5, 100, time.UTC), method: openMethod, tenant: "x", principal: "p", reason: "DeadlineExceeded"},
}

// The audit file's lines are written by hand for speed; they must be what
// slog's JSON handler writes for the same event, byte for byte.
func TestAuditFileLineIsSlogJSON(t *testing.T) {
	for _, e := range testAuditEvents {
		var want bytes.Buffer
		(&Log{log: slog.New(slog.NewJSONHandler(&want, nil))}).logEvent(context.Background(), e)
		if got := string(e.appendLine(nil)); got != want.String() {
			t.Errorf("got  %s\nwant %s", got, want.String())
		}
	}
}

// A full queue moves the event's work back onto its call, counted, and
// never drops an event: every event added is in the file once stop returns.
func TestAuditWriter_FullQueueIsCountedNeverDropped(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&out, 2)
	// No goroutine drains yet: the first 2 events queue, the other 5 are
	// written by their callers.
	for i := range 7 {
		e := testAuditEvents[1]
		e.tenant = strings.Repeat("t", i+1)
		w.add(e)
	}
	if got := w.queueFull.Load(); got != 5 {
		t.Errorf("queue full: got %d, want 5", got)
	}
	stop := w.start(time.Hour, time.Hour) // only stop drains and flushes
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	w.add(testAuditEvents[2]) // after stop: written at once, not queued
	w.flush()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8 {
		t.Fatalf("got %d lines, want 8:\n%s", len(lines), out.String())
	}
	seen := map[int]bool{}
	for _, l := range lines {
		for i := range 7 {
			if strings.Contains(l, `"tenant":"`+strings.Repeat("t", i+1)+`"`) {
				seen[i] = true
			}
		}
	}
	if len(seen) != 7 {
		t.Errorf("got the events %v, want all 7", seen)
	}
	if got := w.failed.Load(); got != 0 {
		t.Errorf("failed writes: got %d, want 0", got)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errFailingWrite }

var errFailingWrite = bytes.ErrTooLarge

// A file that cannot be written is counted, never silent.
func TestAuditWriter_WriteErrorsAreCounted(t *testing.T) {
	w := newWriter(failingWriter{}, 4)
	w.add(testAuditEvents[0])
	if err := w.start(time.Hour, time.Hour)(); err == nil {
		t.Error("stop: got nil, want the write error")
	}
	if w.failed.Load() == 0 {
		t.Error("failed writes: got 0, want at least 1")
	}
}

// BenchmarkAuditRecord is the audit work left on a call's path with an
// audit file: the state's header read, the event queued (queue_full/op says
// how many found the queue full: the loop outruns the writer's drain).
func BenchmarkAuditRecord(b *testing.B) {
	w := newWriter(io.Discard, queueLen)
	defer w.start(100*time.Microsecond, flushEvery)()
	benchmarkRecord(b, &Log{file: w})
	b.ReportMetric(float64(w.queueFull.Load())/float64(b.N), "queue_full/op")
}

// BenchmarkAuditRecordInline is the whole work of an event done on the
// call's path, as before the writer's queue and as its overflow does: the
// header, the principal's hash, the line, the buffered write.
func BenchmarkAuditRecordInline(b *testing.B) {
	benchmarkRecord(b, &Log{file: newWriter(io.Discard, 0)})
}

func benchmarkRecord(b *testing.B, a *Log) {
	k, err := keys.NewKey(1, bytes.Repeat([]byte{1}, keys.Size), time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	ring, err := keys.NewRing([]keys.Key{k}, 1)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	state, err := sealer.Seal(ring, "default", sealer.Claims{Principal: "alice", IssuedAt: now, ExpiresAt: now.Add(time.Minute)}, make([]byte, 1024))
	if err != nil {
		b.Fatal(err)
	}
	req, resp := &sealerv1.SealRequest{Principal: "alice"}, &sealerv1.SealResponse{RequestState: state}
	b.ReportAllocs()
	for b.Loop() {
		a.Record(context.Background(), "default", sealMethod, req, resp, "OK")
	}
}

// The principal's hash is the one the README describes: the first 16 bytes
// of SHA-256 over the label, the tenant, a zero byte and the principal.
func TestPrincipalHash(t *testing.T) {
	for _, tc := range []struct{ tenant, principal string }{
		{"team-a", "alice@example.com"}, {"x", strings.Repeat("p", 1000)}, {"default", ""},
	} {
		want := ""
		if tc.principal != "" {
			sum := sha256.Sum256([]byte("mcp-sealer/v1 audit principal\x00" + tc.tenant + "\x00" + tc.principal))
			want = hex.EncodeToString(sum[:16])
		}
		if got := principalHash(tc.tenant, tc.principal); got != want {
			t.Errorf("principalHash(%q, %d bytes): got %s, want %s", tc.tenant, len(tc.principal), got, want)
		}
	}
}
