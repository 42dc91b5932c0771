// Command sealer-slowread measures sealer-proxy's memory against clients
// that read large answers slowly (issue 50, item 2), and prints a Markdown
// table. For each kind of answer (-kinds: json, a body with its length, or
// sse, one event) and each number of slow readers (-clients), it starts
// the sealer-proxy binary (-proxy) afresh in front of an MCP server of its
// own that answers every tools/call of tool "big" with a result of -size
// bytes of text and any other with a small one. Then the slow readers each
// send a call of "big" and read its answer at -rate bytes a second (1 KiB
// at a time), asking again when an answer ends (a second later when it
// was refused or ended short); meanwhile a normal client
// calls a small tool every 200 ms, and the proxy's resident memory (VmRSS
// of /proc/PID/status) and its buffered bytes (/metrics) are sampled every
// second, for -hold.
//
// The results carry no requestState, so the proxy calls no sealer: it is
// pointed at a closed port. Everything is on loopback.
//
//	sealer-slowread -proxy bin/sealer-proxy -clients 30,300 -kinds json,sse -hold 90s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

type flags struct {
	proxy      string
	proxyFlags []string
	clients    []int
	kinds      []string
	size, rate int
	hold       time.Duration
}

func main() {
	var f flags
	flag.StringVar(&f.proxy, "proxy", "", "the sealer-proxy binary")
	clients := flag.String("clients", "30,300", "numbers of slow readers, comma separated")
	kinds := flag.String("kinds", "json,sse", "kinds of answer, comma separated: json, sse")
	flag.IntVar(&f.size, "size", 4<<20-1<<10, "bytes of text in a large answer (its answer within the default max-response-bytes, 4 MiB)")
	flag.IntVar(&f.rate, "rate", 2<<10, "bytes a second each slow reader reads")
	flag.DurationVar(&f.hold, "hold", 90*time.Second, "how long the slow readers stay, per row")
	proxyFlags := flag.String("proxy-flags", "", "more flags for sealer-proxy, space separated")
	flag.Parse()
	if f.proxy == "" {
		fail(fmt.Errorf("-proxy: the sealer-proxy binary to run"))
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400) // as sealer-load: the generator collects seldom
	}
	f.proxyFlags = strings.Fields(*proxyFlags)
	f.kinds = strings.Split(*kinds, ",")
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			fail(fmt.Errorf("-clients %q: want positive numbers", c))
		}
		f.clients = append(f.clients, n)
	}
	up, err := startUpstream(f.size)
	if err != nil {
		fail(err)
	}
	fmt.Println("| answers | slow readers | proxy RSS at start | RSS peak | RSS at the end | buffered bytes peak | normal calls: p50, p99, max | normal calls failed | slow readers' answers: whole, ended short, refused | cut off (write timeout) | answers dropped |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, kind := range f.kinds {
		if kind != "json" && kind != "sse" {
			fail(fmt.Errorf("-kinds: %q is neither json nor sse", kind))
		}
		for _, n := range f.clients {
			r, err := runRow(context.Background(), f, up, kind, n)
			if err != nil {
				fail(err)
			}
			fmt.Println(r.row(kind, n))
		}
	}
}

// row is what one kind and number of slow readers measured.
type row struct {
	rssStart, rssPeak, rssEnd int64
	bufferedPeak              int64 // -1: not exported
	normal                    []time.Duration
	normalFailed              int
	whole, short, refused     atomic.Int64 // the slow readers' answers
	cut, dropped              float64
}

func (r *row) row(kind string, n int) string {
	slices.Sort(r.normal)
	lat := "none"
	if len(r.normal) > 0 {
		q := func(p float64) time.Duration { return r.normal[int(p*float64(len(r.normal)-1))] }
		lat = fmt.Sprintf("%v, %v, %v", q(0.5).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond),
			r.normal[len(r.normal)-1].Round(10*time.Microsecond))
	}
	buffered := "not exported"
	if r.bufferedPeak >= 0 {
		buffered = mib(r.bufferedPeak)
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s (%d calls) | %d | %d, %d, %d | %.0f | %.0f |", kind, n,
		mib(r.rssStart), mib(r.rssPeak), mib(r.rssEnd), buffered, lat, len(r.normal), r.normalFailed,
		r.whole.Load(), r.short.Load(), r.refused.Load(), r.cut, r.dropped)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sealer-slowread:", err)
	os.Exit(1)
}
