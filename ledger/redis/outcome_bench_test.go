package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testredis"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/sealer"
)

// BenchmarkOutcomeBytes reports what a live entry costs in Redis's memory
// (used_memory, INFO memory, after N entries, less before them): a state
// consumed without an outcome, and one claimed with an outcome recorded
// (sealed: 53 bytes more than the answer, FORMAT.md) of 1 KiB and of the
// default limit, 64 KiB.
//
//	go test -run XXX -bench OutcomeBytes -benchtime 1x ./ledger/redis/
func BenchmarkOutcomeBytes(b *testing.B) {
	for _, c := range []struct {
		size    int
		answers bool
	}{{-1, false}, {1 << 10, false}, {1 << 10, true}, {64 << 10, false}} {
		size, answers, name := c.size, c.answers, "consumed"
		if size >= 0 {
			name = fmt.Sprintf("outcome_%dB", size)
		}
		if answers {
			name += "_answers"
		}
		b.Run(name, func(b *testing.B) {
			srv := testredis.Start(b, false)
			r, err := redis.New(redis.Options{URL: srv.URL(), Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			c := srv.Client(b)
			ctx := context.Background()
			usedMemory := func() int64 {
				info, err := c.Info(ctx, "memory").Result()
				if err != nil {
					b.Fatal(err)
				}
				for _, line := range strings.Split(info, "\r\n") {
					if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
						n, err := strconv.ParseInt(v, 10, 64)
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				}
				b.Fatal("no used_memory in INFO memory")
				return 0
			}
			const n = 2000
			blob := make([]byte, size+53)
			rand.Read(blob)
			until := time.Now().Add(time.Hour)
			before := usedMemory()
			for range b.N {
				for range n {
					var id sealer.StateID
					rand.Read(id[:])
					rand.Read(blob) // each its own: no answer compresses against another
					if size < 0 {
						if err := r.Consume(ctx, "tenant", id, until); err != nil {
							b.Fatal(err)
						}
						continue
					}
					e := ledger.Entry{ID: id}
					if answers {
						e.Answers = new(sealer.Digest)
						rand.Read(e.Answers[:])
					}
					if err := r.Claim(ctx, "tenant", e, until, time.Minute); err != nil {
						b.Fatal(err)
					}
					if err := r.Record(ctx, "tenant", e, blob); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(usedMemory()-before)/float64(n*b.N), "bytes/entry")
		})
	}
}
