package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/sealer"
)

// redisKey is the Redis ledger's key of a state (ledger/redis): the preload
// writes what Consume writes, which redisScale checks by consuming a
// preloaded state.
func redisKey(tenant string, id sealer.StateID) string {
	return "sealer:v1:consumed:" + strconv.Itoa(len(tenant)) + ":" + tenant + ":" + hex.EncodeToString(id[:])
}

// redisScale prints consume latency and memory per state of a Redis ledger
// by the live states it holds, then the consume latency while Redis expires
// expiring states at once beside the same before.
func redisScale(addr string, levels []int, expiring, c int, d time.Duration) error {
	ctx := context.Background()
	rc := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rc.Close()
	l, err := redis.New(redis.Options{URL: "redis://" + addr + "/0", Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Println("| live states | consumes/s | consume p50 | consume p99 | errors | used_memory per state | MEMORY USAGE of a key | states per GiB | preload took |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	loaded, preloadRate := 0, 0.0
	for _, n := range levels {
		if err := rc.FlushAll(ctx).Err(); err != nil {
			return err
		}
		base := infoInt(ctx, rc, "memory", "used_memory")
		start := time.Now()
		ids, err := preloadRedis(ctx, rc, n, time.Now().Add(24*time.Hour))
		if err != nil {
			return err
		}
		took := time.Since(start)
		if n > 0 {
			if err := l.Consume(ctx, scaleTenant, ids[0], time.Now().Add(time.Hour)); err == nil {
				return fmt.Errorf("redis: a preloaded state was not consumed: the preload's keys are not the ledger's")
			}
		}
		lat, failed := load(l.Consume, c, d)
		perState, usage, perGiB := "-", "-", "-"
		if n > 0 {
			b := float64(infoInt(ctx, rc, "memory", "used_memory")-base) / float64(n+len(lat)) // the consumed states are keys too
			perState = fmt.Sprintf("%.0f B", b)
			perGiB = fmt.Sprintf("%.1f M", float64(1<<30)/b/1e6)
			if u, err := rc.MemoryUsage(ctx, redisKey(scaleTenant, ids[0])).Result(); err == nil {
				usage = fmt.Sprintf("%d B", u)
			}
		}
		fmt.Printf("| %d | %.0f | %s | %s | %d | %s | %s | %s | %v |\n", n, float64(len(lat))/d.Seconds(), micro(quantile(lat, 0.5)),
			micro(quantile(lat, 0.99)), failed, perState, usage, perGiB, took.Round(time.Second))
		loaded = n
		if n > 0 {
			preloadRate = float64(n) / took.Seconds()
		}
	}
	// Expiry: expiring states that all expire at one instant, on top of the
	// largest level; consumes measured before, then while Redis deletes them.
	// They expire after the preload (timed at the rate of the last one) and
	// the measurement before the expiry.
	if preloadRate == 0 {
		preloadRate = 50000
	}
	expireAt := time.Now().Add(time.Duration(3*float64(expiring)/preloadRate*float64(time.Second)) + d + 5*time.Second)
	if _, err := preloadRedis(ctx, rc, expiring, expireAt); err != nil {
		return err
	}
	expiredBefore := infoInt(ctx, rc, "stats", "expired_keys")
	if time.Until(expireAt) < d {
		return fmt.Errorf("redis: the expiring preload ended too late to measure before its expiry")
	}
	idle, _ := load(l.Consume, c, d)
	time.Sleep(time.Until(expireAt))
	done := make(chan struct{})
	var expiredIn time.Duration
	go func() {
		defer close(done)
		start := time.Now()
		for time.Since(start) < 60*time.Second {
			if infoInt(ctx, rc, "stats", "expired_keys")-expiredBefore >= int64(expiring) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		expiredIn = time.Since(start)
	}()
	during, failed := loadWhile(l.Consume, c, done)
	fmt.Printf("\nExpiry of %d states at one instant in a Redis of %d live ones: all expired (INFO expired_keys) in %v.\n\n", expiring, loaded, expiredIn.Round(time.Millisecond))
	printBeside("before the expiry", "while Redis expires them", idle, during, failed)
	return nil
}

// preloadRedis sets n random states as the ledger does (SET key 1 PXAT
// until), in pipelines of 10,000, and returns their ids.
func preloadRedis(ctx context.Context, rc *goredis.Client, n int, until time.Time) ([]sealer.StateID, error) {
	ids := randomIDs(n)
	for i := 0; i < n; i += 10000 {
		p := rc.Pipeline()
		for _, id := range ids[i:min(n, i+10000)] {
			p.SetArgs(ctx, redisKey(scaleTenant, id), "1", goredis.SetArgs{ExpireAt: until})
		}
		if _, err := p.Exec(ctx); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// infoInt returns a number of Redis's INFO section, 0 when missing.
func infoInt(ctx context.Context, rc *goredis.Client, section, field string) int64 {
	info, err := rc.Info(ctx, section).Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// randomIDs returns n random state ids in ascending order.
func randomIDs(n int) []sealer.StateID {
	ids := make([]sealer.StateID, n)
	for i := range ids {
		rand.Read(ids[i][:])
	}
	slices.SortFunc(ids, func(a, b sealer.StateID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}
