package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var errBacklog = errors.New("no free slot")

// result is what one measured step saw.
type result struct {
	lat    []time.Duration
	errors map[string]int
	// errLat holds how long each refused call took, by reason: an overloaded
	// server must refuse quickly rather than time out.
	errLat map[string][]time.Duration
	// perSecond counts successes and failures in each second of the run.
	perSecond []struct{ ok, failed int }
	dur       time.Duration
	fatal     error
	serverCPU time.Duration // CPU time of the server in the window, 0: not measured
	mu        sync.Mutex
}

func (r *result) record(start, measureFrom time.Time, took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sec := int(time.Since(measureFrom).Seconds())
	if start.Before(measureFrom) || sec < 0 || sec >= len(r.perSecond) {
		return
	}
	if errors.Is(err, errPoolEmpty) {
		r.fatal = err
	}
	if err != nil {
		why := reason(err)
		r.errors[why]++
		if !errors.Is(err, errBacklog) {
			r.errLat[why] = append(r.errLat[why], took)
		}
		r.perSecond[sec].failed++
		return
	}
	r.lat = append(r.lat, took)
	r.perSecond[sec].ok++
}

func newResult(dur time.Duration) *result {
	r := &result{errors: map[string]int{}, errLat: map[string][]time.Duration{}, dur: dur}
	r.perSecond = make([]struct{ ok, failed int }, int(dur.Seconds()+0.999))
	return r
}

// closedLoop runs o from n workers for warmup, then measures for dur.
func closedLoop(o op, n int, warmup, dur time.Duration) *result {
	r := newResult(dur)
	measureFrom := time.Now().Add(warmup)
	end := measureFrom.Add(dur)
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range n {
		wg.Go(func() {
			for {
				t := time.Now()
				if t.After(end) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := o(ctx, int(seq.Add(1)))
				cancel()
				r.record(t, measureFrom, time.Since(t), err)
			}
		})
	}
	wg.Wait()
	return r.final()
}

// openLoop offers o at rate per second, at most n in flight, and measures
// latency from the moment each operation was due.
func openLoop(o op, n int, rate float64, warmup, dur time.Duration) *result {
	r := newResult(dur)
	measureFrom := time.Now().Add(warmup)
	end := measureFrom.Add(dur)
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * interval)
		if due.After(end) {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		select {
		case slots <- struct{}{}:
		default:
			r.record(due, measureFrom, 0, errBacklog)
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := o(ctx, k)
			cancel()
			r.record(due, measureFrom, time.Since(due), err)
		})
	}
	wg.Wait()
	return r.final()
}

func (r *result) final() *result {
	slices.Sort(r.lat)
	for _, l := range r.errLat {
		slices.Sort(l)
	}
	return r
}

// quantile returns the p-quantile of sorted latencies.
func quantile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(p*float64(len(lat))))]
}

// rate is the successful operations per second.
func (r *result) rate() float64 { return float64(len(r.lat)) / r.dur.Seconds() }

// cpuPerOp is the server's CPU time per successful operation, "-" when not
// measured.
func (r *result) cpuPerOp() string {
	if r.serverCPU == 0 || len(r.lat) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f µs", float64(r.serverCPU.Microseconds())/float64(len(r.lat)))
}

func (r *result) report(name string, n int) {
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.errors)) {
		total += r.errors[k]
		part := fmt.Sprintf("%s %d", k, r.errors[k])
		if l := r.errLat[k]; len(l) > 0 {
			part += fmt.Sprintf(" in p50 %v, p99 %v", quantile(l, 0.50).Round(time.Microsecond), quantile(l, 0.99).Round(time.Microsecond))
		}
		parts = append(parts, part)
	}
	errs := "0"
	if total > 0 {
		errs = fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
	}
	fmt.Printf("| %s | %d | %.0f | %v | %v | %s |\n", name, n, r.rate(),
		quantile(r.lat, 0.50).Round(time.Microsecond), quantile(r.lat, 0.99).Round(time.Microsecond), errs)
}

func (r *result) writeTimeline(path string) error {
	var b strings.Builder
	b.WriteString("second,ok,failed\n")
	for i, s := range r.perSecond {
		fmt.Fprintf(&b, "%d,%d,%d\n", i, s.ok, s.failed)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
