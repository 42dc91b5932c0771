// Command sealer-scale measures how the sealer's costs grow with the work
// it holds, in process, and prints Markdown tables for BENCHMARKS.md (the
// scale section of scripts/bench.sh):
//
//	sealer-scale payload                 Seal+Open bytes/s by payload size beside raw XChaCha20-Poly1305
//	sealer-scale ring -versions 1,1000   Open of the oldest and the newest version, memory per version
//	sealer-scale ledger -dir D -states 0,1000000 the embedded ledger beside the durable-append floor
//	sealer-scale redis -addr A -states 0,1000000 the same in Redis, with MEMORY USAGE per state
//
// The ledgers are filled by a bulk loader (the embedded ledger's Import,
// Redis pipelines), not by one consume per state, so that 10 million states
// take minutes; every state then counts as live until its expiry.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scaleTenant is the tenant of every state the measurements write.
const scaleTenant = "default"

func main() {
	if len(os.Args) < 2 {
		fail("usage: sealer-scale payload|ring|ledger|redis [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var err error
	switch os.Args[1] {
	case "payload":
		d := fs.Duration("d", time.Second, "measured time per size and kind")
		fs.Parse(os.Args[2:])
		err = payload(*d)
	case "ring":
		versions := fs.String("versions", "1,10,100,1000", "key versions in the ring")
		d := fs.Duration("d", time.Second, "measured time per open")
		fs.Parse(os.Args[2:])
		err = ring(ints(*versions), *d)
	case "ledger":
		dir := fs.String("dir", "", "directory for the ledgers and the floor's file (the data directory's file system)")
		states := fs.String("states", "0,1000000", "live states preloaded")
		sweep := fs.Int("sweep", 1000000, "states expiring at once for the sweep measurement (0: none)")
		c := fs.Int("c", 16, "concurrent callers beside 1")
		rounds := fs.Int("rounds", 3, "turns through every cell")
		d := fs.Duration("d", 2*time.Second, "measured time per cell and turn")
		fs.Parse(os.Args[2:])
		err = ledgerScale(*dir, ints(*states), *sweep, *c, *rounds, *d)
	case "redis":
		addr := fs.String("addr", "127.0.0.1:6379", "Redis address (loopback)")
		states := fs.String("states", "0,1000000", "live states preloaded")
		expiring := fs.Int("expiring", 1000000, "states expiring at once for the expiry measurement")
		c := fs.Int("c", 16, "concurrent consumers")
		d := fs.Duration("d", 5*time.Second, "measured time per level")
		fs.Parse(os.Args[2:])
		err = redisScale(*addr, ints(*states), *expiring, *c, *d)
	default:
		fail("unknown measurement %q", os.Args[1])
	}
	if err != nil {
		fail("%v", err)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			fail("bad number %q", f)
		}
		out = append(out, n)
	}
	return out
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "sealer-scale: "+format+"\n", a...)
	os.Exit(1)
}

// quantile returns the p-quantile of sorted latencies.
func quantile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(p*float64(len(lat))))]
}

func sorted(lat []time.Duration) []time.Duration { slices.Sort(lat); return lat }

func micro(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1e3) }
