package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testredis"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/sealer"
)

// BenchmarkAdvance is one latest-only Advance, each a round above the one
// before on one flow, on a local Redis: alone, and with Replicas 1 (the
// script and WAIT in one round trip, a local replica acknowledging).
//
//	go test -run XXX -bench Advance ./ledger/redis/
func BenchmarkAdvance(b *testing.B) {
	for _, replicas := range []int{0, 1} {
		name := "alone"
		if replicas > 0 {
			name = "replicas_1"
		}
		b.Run(name, func(b *testing.B) {
			primary := testredis.Start(b, false)
			if replicas > 0 {
				_, port, _ := strings.Cut(primary.Addr, ":")
				testredis.WaitLinked(b, testredis.Start(b, false, "--replicaof", "127.0.0.1", port))
			}
			r, err := redis.New(redis.Options{URL: primary.URL(), Timeout: replicasTimeout, Replicas: replicas})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			ctx, until := context.Background(), time.Now().Add(time.Hour)
			round := uint32(0)
			for b.Loop() {
				round++
				if err := r.Advance(ctx, "tenant", sealer.FlowID{7}, round, until); err != nil {
					b.Fatalf("round %d: %v", round, err)
				}
			}
		})
	}
}
