package embedded_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/embedded"
	"github.com/mcp-sealer/sealer/sealer"
)

// BenchmarkOutcomeBytes reports what a live entry costs on disk: the size
// of the store's tables and value files (*.sst, *.blob) after N entries and a close (which
// flushes), over N, for a state consumed without an outcome, and one
// claimed with an outcome recorded (sealed: 53 bytes more than the
// answer, FORMAT.md) of 1 KiB, with and without the answers digest of its
// claim, and of the default limit, 64 KiB. The
// outcome is ciphertext: Pebble's compression gains nothing on it.
//
//	go test -run XXX -bench OutcomeBytes -benchtime 1x ./ledger/embedded/
func BenchmarkOutcomeBytes(b *testing.B) {
	for _, c := range []struct {
		size    int
		answers bool
	}{{-1, false}, {1 << 10, false}, {1 << 10, true}, {64 << 10, false}} {
		size, name := c.size, "consumed"
		if size >= 0 {
			name = fmt.Sprintf("outcome_%dB", size)
		}
		if c.answers {
			name += "_answers"
		}
		b.Run(name, func(b *testing.B) {
			const n = 2000
			blob := make([]byte, size+53)
			rand.Read(blob)
			ctx, until := context.Background(), time.Now().Add(time.Hour)
			var total int64
			for range b.N {
				dir := b.TempDir()
				l, err := embedded.Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				for range n {
					var id sealer.StateID
					rand.Read(id[:])
					rand.Read(blob) // each its own: no answer compresses against another
					if size < 0 {
						err = l.Consume(ctx, "tenant", id, until)
					} else if err = l.Claim(ctx, "tenant", entry(id, c.answers), until, time.Minute); err == nil {
						err = l.Record(ctx, "tenant", ledger.Entry{ID: id}, blob)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				files, err := os.ReadDir(dir)
				if err != nil {
					b.Fatal(err)
				}
				for _, f := range files {
					if strings.HasSuffix(f.Name(), ".sst") || strings.HasSuffix(f.Name(), ".blob") {
						fi, err := os.Stat(filepath.Join(dir, f.Name()))
						if err != nil {
							b.Fatal(err)
						}
						total += fi.Size()
					}
				}
			}
			b.ReportMetric(float64(total)/float64(n*b.N), "bytes/entry")
		})
	}
}

// entry is the entry of id, with a random answers digest when answers.
func entry(id sealer.StateID, answers bool) ledger.Entry {
	e := ledger.Entry{ID: id}
	if answers {
		e.Answers = new(sealer.Digest)
		rand.Read(e.Answers[:])
	}
	return e
}
