package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/ledger"
)

// ClockLimit is how far a replica's clock may be from the ledger's before
// it stops consuming: half the skew, so that two replicas within it are
// within skew of each other (the meaning of --skew), and no less than
// minClockLimit, which a measurement over a network can tell apart.
func ClockLimit(skew time.Duration) time.Duration {
	return max(skew/2, minClockLimit)
}

const minClockLimit = 100 * time.Millisecond

// errClockBeyondLimit and errClockNotMeasured refuse a consume while this
// replica's clock is, or may be, wrong: a state's fate is then unknown, so
// they are ErrUnavailable (LEDGER_UNAVAILABLE), fail closed.
var (
	errClockBeyondLimit = fmt.Errorf("%w: this replica's clock is beyond its limit from the ledger's", ledger.ErrUnavailable)
	errClockNotMeasured = fmt.Errorf("%w: this replica's clock offset from the ledger's is not measured", ledger.ErrUnavailable)
	errClockStepped     = fmt.Errorf("%w: this replica's clock stepped beyond its limit since it was last measured against the ledger's", ledger.ErrUnavailable)
)

// errClockOff is readiness's answer for a clock beyond its limit: probes
// answer fixed words.
var errClockOff = errors.New("clock beyond its limit from the ledger's")

// clockMeter measures this process's clock against the ledger's: the
// offset (the ledger's time minus ours) and the margin of error.
type clockMeter interface {
	ClockOffset(ctx context.Context) (offset, margin time.Duration, err error)
}

// clockCheck keeps a replica whose clock is wrong from consuming. Every
// ledger entry lives until a deadline the state fixes, on the ledger's
// clock, but every replica accepts a state by its own clock
// (ledgerRetention): a replica whose clock runs behind the others' by more
// than the retention's margin would open states whose entries are gone. So
// a replica with a shared ledger measures its offset from the ledger's
// clock every ClockCheckEvery and, while the offset is beyond the limit (or
// not measured for three checks), refuses every consume and, when measured
// beyond, reports unready. Between two measurements, the monotonic clock
// tells how much time really passed: a wall clock that stepped since the
// last measurement is judged at once, as if measured again (refusal). A nil
// clockCheck (the embedded ledger: one process, one clock; or the check
// turned off) refuses nothing.
type clockCheck struct {
	meter  clockMeter
	limit  time.Duration
	log    *slog.Logger
	failed *sampledLog
	wall   func() time.Time // the clock states are judged by: wallclock.Now

	last atomic.Pointer[clockReading] // nil: never measured
}

// clockReading is one measurement: taken at (this process's monotonic
// clock) when the wall clock read wall, the offset and margin measured,
// and its verdict, nil within the limit.
type clockReading struct {
	at, wall       time.Time
	offset, margin time.Duration
	verdict        error
}

// stepped returns errClockStepped if the wall clock, read now, has moved
// since r by so much more or less than the monotonic clock that the offset
// r measured, corrected by that step, is beyond the limit.
func (c *clockCheck) stepped(r *clockReading) error {
	step := c.wall().Round(0).Sub(r.wall) - time.Since(r.at)
	if (r.offset-step).Abs()-r.margin > c.limit {
		return errClockStepped
	}
	return nil
}

func newClockCheck(meter clockMeter, skew time.Duration, log *slog.Logger) *clockCheck {
	// A failed measurement is logged at most twice a minute: readiness
	// already logs an unreachable ledger; this says why no one-time state
	// opens when the ledger answers all but TIME (an ACL without +time).
	failed := &sampledLog{msg: "clock offset not measured: one-time and latest-only opens refused", every: rate.NewLimiter(rate.Every(30*time.Second), 1)}
	return &clockCheck{meter: meter, limit: ClockLimit(skew), log: log, failed: failed, wall: wallclock.Now}
}

// refusal returns the error a consume must fail with now, or nil.
func (c *clockCheck) refusal() error {
	if c == nil {
		return nil
	}
	r := c.last.Load()
	if r == nil || time.Since(r.at) > 3*ClockCheckEvery {
		return errClockNotMeasured
	}
	if r.verdict != nil {
		return r.verdict
	}
	return c.stepped(r)
}

// beyond reports whether the last measurement, or a step of the wall clock
// since, put the clock beyond its limit. Not measured is not beyond: a
// ledger outage alone leaves readiness as --ready-requires-ledger says.
func (c *clockCheck) beyond() bool {
	if c == nil {
		return false
	}
	r := c.last.Load()
	return r != nil && (r.verdict != nil || c.stepped(r) != nil)
}

// clockOff is readiness's question: errClockOff while beyond (nil for no
// check).
func (c *clockCheck) clockOff() error {
	if c.beyond() {
		return errClockOff
	}
	return nil
}

// offset is the last measured offset in seconds, for the metric.
func (c *clockCheck) offset() float64 {
	if r := c.last.Load(); r != nil {
		return r.offset.Seconds()
	}
	return 0
}

// measure measures once, keeps the reading and reports whether it got
// one; a failed measurement keeps the last reading, which goes stale
// (refusal). The offset counts as beyond only when it is beyond by more
// than the margin of error.
func (c *clockCheck) measure(ctx context.Context) bool {
	// The wall clock without its monotonic reading: stepped compares the
	// two clocks, so the wall reading must be the wall clock's alone. Both
	// are read before the measurement and again after it: a wall clock that
	// stepped meanwhile would pair an offset of one clock with the reading
	// of another, so that measurement counts as failed.
	at, wall := time.Now(), c.wall().Round(0)
	offset, margin, err := c.meter.ClockOffset(ctx)
	if err == nil {
		if step := c.wall().Round(0).Sub(wall) - time.Since(at); step.Abs() > max(margin, time.Millisecond) {
			err = fmt.Errorf("the wall clock stepped %v while it was measured", step)
		}
	}
	if err != nil {
		c.failed.log(c.log, err)
		return false
	}
	r := &clockReading{at: at, wall: wall, offset: offset, margin: margin}
	if offset.Abs()-margin > c.limit {
		r.verdict = errClockBeyondLimit
	}
	if prev := c.last.Swap(r); (prev == nil || prev.verdict == nil) != (r.verdict == nil) {
		if r.verdict != nil {
			c.log.Error("clock beyond its limit from the ledger's: one-time and latest-only opens refused",
				"offset", offset.String(), "margin", margin.String(), "limit", c.limit.String())
		} else if prev != nil {
			c.log.Info("clock back within its limit from the ledger's", "offset", offset.String(), "limit", c.limit.String())
		}
	}
	return true
}

// run measures every ClockCheckEvery until ctx is done, and ten times as
// often after a failed measurement: once the ledger is back (a failover),
// a stale reading must not refuse consumes the ledger would take. The
// first measurement is start-up's (openParts), so run waits first.
func (c *clockCheck) run(ctx context.Context) error {
	measured := c.last.Load() != nil
	for {
		next := ClockCheckEvery
		if !measured {
			next /= 10
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
		measured = c.measure(ctx)
	}
}
