// Command sealer-load measures a running sealer over gRPC and prints a
// Markdown table. Operations (-ops):
//
//	seal-open     a Seal, then an Open of the state it returned
//	open          an Open of an ordinary state sealed before the clock started
//	              (the same state again and again: ordinary states reopen)
//	open-onetime  the same with one-time states (each Open consumes in the ledger)
//	health        the gRPC health Check: the floor any gRPC service reaches here
//
//	sealer-load -addr 127.0.0.1:7443 -c 1,16,64 -d 10s -warmup 2s -ops seal-open,health
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7443", "sealer gRPC address")
	levels := flag.String("c", "1,16,64", "concurrency levels, comma separated")
	dur := flag.Duration("d", 10*time.Second, "measured duration per level")
	warmup := flag.Duration("warmup", 2*time.Second, "unmeasured warm-up per level")
	size := flag.Int("payload", 1024, "payload bytes")
	ops := flag.String("ops", "seal-open,health", "operations to measure, comma separated")
	poolRate := flag.Int("pool-rate", 20000, "open ops: states sealed beforehand per second of warmup+duration")
	flag.Parse()

	conns := make([]*grpc.ClientConn, 4)
	for i := range conns {
		c, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer c.Close()
		conns[i] = c
	}
	params, _ := structpb.NewStruct(map[string]any{"name": "get_weather", "arguments": map[string]any{"location": "New York"}})
	binding := &sealerv1.Binding{Method: "tools/call", Params: params}
	payload := make([]byte, *size)

	seal := func(ctx context.Context, conn *grpc.ClientConn, oneTime bool) (string, error) {
		s, err := sealerv1.NewSealerClient(conn).Seal(ctx, &sealerv1.SealRequest{Principal: "alice", Request: binding, Payload: payload, OneTime: oneTime})
		return s.GetRequestState(), err
	}
	open := func(ctx context.Context, conn *grpc.ClientConn, state string) error {
		_, err := sealerv1.NewSealerClient(conn).Open(ctx, &sealerv1.OpenRequest{RequestState: state, Principal: "alice", Request: binding})
		return err
	}
	pair := func(ctx context.Context, conn *grpc.ClientConn) error {
		state, err := seal(ctx, conn, false)
		if err != nil {
			return err
		}
		return open(ctx, conn, state)
	}
	health := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	// opener returns an op that opens count states sealed beforehand.
	opener := func(oneTime bool, count int) func(context.Context, *grpc.ClientConn) error {
		states := make(chan string, count)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < count; i += 8 {
					st, err := seal(context.Background(), conns[w%len(conns)], oneTime)
					if err != nil {
						fmt.Fprintln(os.Stderr, "sealing the pool:", err)
						os.Exit(1)
					}
					states <- st
				}
			})
		}
		wg.Wait()
		close(states)
		return func(ctx context.Context, conn *grpc.ClientConn) error {
			st, ok := <-states
			if !ok {
				return errPoolEmpty
			}
			return open(ctx, conn, st)
		}
	}

	fmt.Printf("| call | concurrency | ops/s | p50 | p99 | errors |\n|---|---|---|---|---|---|\n")
	for _, l := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad concurrency %q\n", l)
			os.Exit(2)
		}
		for _, op := range strings.Split(*ops, ",") {
			switch op {
			case "seal-open":
				report(fmt.Sprintf("Seal+Open (%d B)", *size), n, measure(conns, n, *warmup, *dur, pair))
			case "open":
				st, err := seal(context.Background(), conns[0], false)
				if err != nil {
					fmt.Fprintln(os.Stderr, "seal:", err)
					os.Exit(1)
				}
				report(fmt.Sprintf("Open (%d B)", *size), n, measure(conns, n, *warmup, *dur,
					func(ctx context.Context, conn *grpc.ClientConn) error { return open(ctx, conn, st) }))
			case "open-onetime":
				pool := int(float64(*poolRate) * (*warmup + *dur).Seconds())
				report(fmt.Sprintf("Open one-time (%d B)", *size), n, measure(conns, n, *warmup, *dur, opener(true, pool)))
			case "health":
				report("health Check", n, measure(conns, n, *warmup, *dur, health))
			default:
				fmt.Fprintf(os.Stderr, "unknown op %q\n", op)
				os.Exit(2)
			}
		}
	}
}

var errPoolEmpty = errors.New("pool of sealed states is empty")

type result struct {
	lat    []time.Duration
	errors int
	dur    time.Duration
}

// measure runs op from n workers for warmup, then for dur, and returns the
// latencies of the measured part.
func measure(conns []*grpc.ClientConn, n int, warmup, dur time.Duration, op func(context.Context, *grpc.ClientConn) error) result {
	var mu sync.Mutex
	var all result
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+dur)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			conn := conns[w%len(conns)]
			var lat []time.Duration
			errs := 0
			for {
				t := time.Now()
				if t.After(end) {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := op(ctx, conn)
				cancel()
				if errors.Is(err, errPoolEmpty) {
					fmt.Fprintln(os.Stderr, "the pool of sealed states ran out: raise -pool-rate")
					os.Exit(1)
				}
				if t.After(measureFrom) {
					lat = append(lat, time.Since(t))
					if err != nil {
						errs++
					}
				}
			}
			mu.Lock()
			all.lat = append(all.lat, lat...)
			all.errors += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	all.dur = dur
	return all
}

func report(name string, n int, r result) {
	slices.Sort(r.lat)
	q := func(p float64) time.Duration {
		if len(r.lat) == 0 {
			return 0
		}
		return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
	}
	fmt.Printf("| %s | %d | %.0f | %v | %v | %d |\n", name, n, float64(len(r.lat))/r.dur.Seconds(),
		q(0.50).Round(time.Microsecond), q(0.99).Round(time.Microsecond), r.errors)
}
