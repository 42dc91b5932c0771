package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/sealer"
)

// meterAt is a fake clock meter for the check's unit tests: it answers
// what it is set to.
type meterAt struct {
	mu             sync.Mutex
	offset, margin time.Duration
	err            error
}

func (m *meterAt) set(offset, margin time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.offset, m.margin, m.err = offset, margin, err
}

func (m *meterAt) ClockOffset(context.Context) (time.Duration, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offset, m.margin, m.err
}

// untilLedger records the until of every call and wins them all.
type untilLedger struct {
	mu    sync.Mutex
	until []time.Time
}

func (l *untilLedger) record(until time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = append(l.until, until)
	return nil
}

func (l *untilLedger) calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.until)
}

func (l *untilLedger) Consume(_ context.Context, _ string, _ sealer.StateID, until time.Time) error {
	return l.record(until)
}

func (l *untilLedger) Advance(_ context.Context, _ string, _ sealer.FlowID, _ uint32, until time.Time) error {
	return l.record(until)
}

func TestClockLimit_HalfTheSkewAndNoLessThanAMeasurementCanTell(t *testing.T) {
	for skew, want := range map[time.Duration]time.Duration{
		2 * time.Second: time.Second,
		MaxSkew:         30 * time.Second,
		0:               100 * time.Millisecond,
	} {
		if got := ClockLimit(skew); got != want {
			t.Errorf("ClockLimit(%v) = %v, want %v", skew, got, want)
		}
	}
}

// openOnce seals a one-time state and opens it, returning the open's reason.
func openOnce(t *testing.T, s *service) string {
	t.Helper()
	binding := &sealerv1.Binding{Method: "tools/call", Params: &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("x")}}}
	resp, err := call(s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "p", Request: binding, OneTime: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: resp.(*sealerv1.SealResponse).RequestState, Principal: "p", Request: binding})
	if err == nil {
		return "OK"
	}
	return reason(err)
}

// TestClock_R6_AClockBeyondItsLimitConsumesNothing: while the measured
// offset is beyond the limit by more than its margin, or not measured, a
// one-time open is refused LEDGER_UNAVAILABLE without asking the ledger,
// and readiness says beyond only for a measured offset.
func TestClock_R6_AClockBeyondItsLimitConsumesNothing(t *testing.T) {
	l := &untilLedger{}
	s := testService(t, l)
	meter := &meterAt{}
	s.clock = newClockCheck(meter, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	for _, tc := range []struct {
		name           string
		offset, margin time.Duration
		err            error
		want           string
		beyond         bool
	}{
		{"within", 900 * time.Millisecond, time.Millisecond, nil, "OK", false},
		{"behind beyond", -1500 * time.Millisecond, time.Millisecond, nil, "LEDGER_UNAVAILABLE", true},
		{"ahead beyond", 4 * time.Second, time.Millisecond, nil, "LEDGER_UNAVAILABLE", true},
		{"beyond by less than the margin", 1050 * time.Millisecond, 100 * time.Millisecond, nil, "OK", false},
		{"back within", 0, time.Millisecond, nil, "OK", false},
	} {
		meter.set(tc.offset, tc.margin, tc.err)
		s.clock.measure(ctx)
		before := l.calls()
		if got := openOnce(t, s); got != tc.want {
			t.Errorf("%s (offset %v): open %s, want %s", tc.name, tc.offset, got, tc.want)
		}
		if asked := l.calls() > before; asked != (tc.want == "OK") {
			t.Errorf("%s: ledger asked %v", tc.name, asked)
		}
		if s.clock.beyond() != tc.beyond {
			t.Errorf("%s: beyond %v, want %v", tc.name, s.clock.beyond(), tc.beyond)
		}
	}

	// A failed measurement keeps the last reading until it is stale.
	meter.set(0, 0, errors.New("ledger unreachable"))
	s.clock.measure(ctx)
	if got := openOnce(t, s); got != "OK" {
		t.Errorf("a fresh reading within, then a failed measurement: open %s, want OK", got)
	}
	stale := *s.clock.last.Load()
	stale.at, stale.wall = stale.at.Add(-4*ClockCheckEvery), stale.wall.Add(-4*ClockCheckEvery)
	s.clock.last.Store(&stale)
	if got := openOnce(t, s); got != "LEDGER_UNAVAILABLE" {
		t.Errorf("stale reading: open %s, want LEDGER_UNAVAILABLE", got)
	}
	if s.clock.beyond() {
		t.Error("a stale reading within the limit made readiness say beyond")
	}
}

// TestClock_NeverMeasuredRefuses: a replica whose first measurement failed
// consumes nothing until one succeeds.
func TestClock_NeverMeasuredRefuses(t *testing.T) {
	s := testService(t, &untilLedger{})
	meter := &meterAt{err: errors.New("ledger unreachable")}
	s.clock = newClockCheck(meter, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.clock.measure(context.Background())
	if got := openOnce(t, s); got != "LEDGER_UNAVAILABLE" {
		t.Fatalf("never measured: open %s, want LEDGER_UNAVAILABLE", got)
	}
}

// TestRetention_R6_OutlivesEveryReplicasWindow: whatever this replica's
// skew, the entry lives past the state's expiry by at least the largest
// skew any replica may have plus twice the clock limit of such a replica.
func TestRetention_R6_OutlivesEveryReplicasWindow(t *testing.T) {
	for _, skew := range []time.Duration{0, 2 * time.Second, MaxSkew} {
		l := &untilLedger{}
		s := testService(t, l)
		s.cfg.Skew = skew
		binding := &sealerv1.Binding{Method: "tools/call", Params: &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("x")}}}
		resp, err := call(s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "p", Request: binding, OneTime: true})
		if err != nil {
			t.Fatal(err)
		}
		sealed := resp.(*sealerv1.SealResponse)
		if _, err := call(s, "Open", s.Open, &sealerv1.OpenRequest{RequestState: sealed.RequestState, Principal: "p", Request: binding}); err != nil {
			t.Fatal(err)
		}
		if got, least := l.until[0].Sub(sealed.ExpiresAt.AsTime()), MaxSkew+2*ClockLimit(MaxSkew); got < least {
			t.Errorf("skew %v: entry lives %v past expiry, want at least %v", skew, got, least)
		}
	}
}

// TestClock_R6_AStepBetweenMeasurementsIsJudgedAtOnce: a wall clock that
// steps after a measurement within the limit is judged at once, by how far
// it moved from what the monotonic clock says passed: a step that puts the
// offset beyond the limit refuses the next consume and makes readiness say
// beyond, without waiting for the next measurement (issue 40, finding 1: a
// replica stepped 10m50s ahead opened a state and gave its entry 70 s of
// life); a step that keeps it within (or brings it back) refuses nothing.
func TestClock_R6_AStepBetweenMeasurementsIsJudgedAtOnce(t *testing.T) {
	l := &untilLedger{}
	s := testService(t, l)
	s.clock = newClockCheck(&meterAt{offset: 200 * time.Millisecond, margin: time.Millisecond}, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var step atomic.Int64
	s.clock.wall = func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
	s.clock.measure(context.Background())

	for _, tc := range []struct {
		name   string
		step   time.Duration
		want   string
		beyond bool
	}{
		{"no step", 0, "OK", false},
		{"forward 10m50s", 10*time.Minute + 50*time.Second, "LEDGER_UNAVAILABLE", true},
		{"back 1.5s", -1500 * time.Millisecond, "LEDGER_UNAVAILABLE", true},
		{"forward within the limit", 700 * time.Millisecond, "OK", false},
		{"back within the limit", -700 * time.Millisecond, "OK", false},
	} {
		step.Store(int64(tc.step))
		before := l.calls()
		if got := openOnce(t, s); got != tc.want {
			t.Errorf("%s: open %s, want %s", tc.name, got, tc.want)
		}
		if asked := l.calls() > before; asked != (tc.want == "OK") {
			t.Errorf("%s: ledger asked %v", tc.name, asked)
		}
		if got := s.clock.beyond(); got != tc.beyond {
			t.Errorf("%s: beyond %v, want %v", tc.name, got, tc.beyond)
		}
	}
}

// steppingMeter steps the wall clock of the check it measures for while
// it measures.
type steppingMeter struct {
	meterAt
	step func()
}

func (m *steppingMeter) ClockOffset(ctx context.Context) (time.Duration, time.Duration, error) {
	m.step()
	return m.meterAt.ClockOffset(ctx)
}

// TestClock_R6_AStepDuringAMeasurementIsNoMeasurement: a wall clock that
// steps while the offset is measured would pair the offset of the clock
// before the step with the reading after it, and hide the step until the
// next measurement; such a measurement counts as failed, so the check goes
// on judging by the reading before it, which sees the step at once.
func TestClock_R6_AStepDuringAMeasurementIsNoMeasurement(t *testing.T) {
	l := &untilLedger{}
	s := testService(t, l)
	var step atomic.Int64
	meter := &steppingMeter{meterAt: meterAt{margin: time.Millisecond}}
	s.clock = newClockCheck(meter, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.clock.wall = func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
	meter.step = func() {}
	if !s.clock.measure(context.Background()) {
		t.Fatal("a measurement without a step failed")
	}
	meter.step = func() { step.Store(int64(-2 * time.Minute)) }
	if s.clock.measure(context.Background()) {
		t.Error("a measurement during which the wall clock stepped 2 minutes back counted")
	}
	if got := openOnce(t, s); got != "LEDGER_UNAVAILABLE" {
		t.Errorf("after a step during a measurement: open %s, want LEDGER_UNAVAILABLE", got)
	}
}
