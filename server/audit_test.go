package server

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

// The audit file's lines are written by hand for speed; they must be what
// slog's JSON handler writes for the same event, byte for byte.
func TestAuditFileLineIsSlogJSON(t *testing.T) {
	for _, e := range []auditEvent{
		{time: time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC), method: sealMethod, tenant: "team-a.b_c",
			principalHash: "2cd650a61c7b0655a037902563896e7f", reason: "OK", stateID: "fcfe949caca3f3817078d050768e5bf0", keyVersion: 4294967295, withState: true},
		{time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), method: openMethod, tenant: "default", reason: "INVALID_ARGUMENT"},
		{time: time.Date(2026, 1, 2, 3, 4, 5, 100, time.UTC), method: openMethod, tenant: "x", reason: "DeadlineExceeded"},
	} {
		var want bytes.Buffer
		(&auditor{log: slog.New(slog.NewJSONHandler(&want, nil))}).logEvent(context.Background(), e)
		var got bytes.Buffer
		a := &auditor{file: &flushWriter{bw: bufio.NewWriter(&got)}}
		a.writeLine(e)
		a.file.Flush()
		if got.String() != want.String() {
			t.Errorf("got  %s\nwant %s", got.String(), want.String())
		}
	}
}
