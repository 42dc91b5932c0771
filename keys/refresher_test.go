package keys_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/keys"
)

func key(t *testing.T, id uint32, created time.Time) keys.Key {
	t.Helper()
	k, err := keys.NewKey(id, secret, created)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestActivated(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		created []time.Duration // age of versions 1, 2, ...
		sealing uint32
	}{
		{"one old version", []time.Duration{time.Hour}, 1},
		{"new version not yet active", []time.Duration{time.Hour, 30 * time.Second}, 1},
		{"new version exactly at the delay", []time.Duration{time.Hour, time.Minute}, 2},
		{"two rotations, one active", []time.Duration{time.Hour, 2 * time.Minute, 10 * time.Second}, 2},
		{"only new versions: the oldest seals", []time.Duration{20 * time.Second, 10 * time.Second}, 1},
		{"clock behind the source", []time.Duration{time.Hour, -time.Minute}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ks []keys.Key
			for i, age := range tc.created {
				ks = append(ks, key(t, uint32(i+1), now.Add(-age)))
			}
			r, err := keys.Activated(ks, now, time.Minute)
			if err != nil || r.SealingVersion() != tc.sealing {
				t.Fatalf("got %v, %v; want sealing %d", r, err, tc.sealing)
			}
			if len(r.Versions()) != len(ks) {
				t.Fatalf("versions %v: want all %d to open", r.Versions(), len(ks))
			}
		})
	}
	if _, err := keys.Activated(nil, now, time.Minute); !errors.Is(err, keys.ErrNoKey) {
		t.Errorf("no versions: got %v, want ErrNoKey", err)
	}
}

// flakySource is a fake for the error path: it fails while broken.
type flakySource struct {
	ring   atomic.Pointer[keys.Ring]
	broken atomic.Bool
	loads  atomic.Int32
}

func (f *flakySource) Load(context.Context) (*keys.Ring, error) {
	f.loads.Add(1)
	if f.broken.Load() {
		return nil, errors.New("vault unreachable")
	}
	return f.ring.Load(), nil
}

func TestRefresher_KeepsLastGoodRing(t *testing.T) {
	src := &flakySource{}
	r1, _ := keys.NewRing([]keys.Key{key(t, 1, time.Time{})}, 1)
	src.ring.Store(r1)
	var reported atomic.Int32
	ref := keys.NewRefresher(src, time.Hour, func(error) { reported.Add(1) })
	if ref.Ring() != nil {
		t.Fatal("ring before the first load")
	}
	if err := ref.Refresh(context.Background()); err != nil || ref.Ring() != r1 {
		t.Fatalf("first load: %v", err)
	}
	good := ref.LastGood()
	src.broken.Store(true)
	if err := ref.Refresh(context.Background()); err == nil {
		t.Fatal("broken source: got nil error")
	}
	if ref.Ring() != r1 || ref.Errors() != 1 || reported.Load() != 1 || !ref.LastGood().Equal(good) {
		t.Fatalf("after a failure: ring %v, errors %d, reported %d; want the last good ring kept", ref.Ring(), ref.Errors(), reported.Load())
	}
	src.broken.Store(false)
	same, _ := keys.NewRing([]keys.Key{key(t, 1, time.Time{})}, 1)
	src.ring.Store(same)
	ref.Refresh(context.Background())
	if ref.Ring() != r1 {
		t.Fatal("an unchanged ring was published again; tenant keys would be derived again")
	}
	r2, _ := keys.NewRing([]keys.Key{key(t, 1, time.Time{}), key(t, 2, time.Time{})}, 2)
	src.ring.Store(r2)
	ref.Refresh(context.Background())
	if ref.Ring() != r2 {
		t.Fatal("a changed ring was not published")
	}
}

func TestRefresher_DemandIsRateLimited(t *testing.T) {
	src := &flakySource{}
	r1, _ := keys.NewRing([]keys.Key{key(t, 1, time.Time{})}, 1)
	src.ring.Store(r1)
	ref := keys.NewRefresher(src, time.Hour, nil)
	ref.Refresh(context.Background())
	before := src.loads.Load()
	began := time.Now()
	for range 1000 {
		ref.Demand(context.Background())
	}
	// One load a second at most: a loaded machine that took longer over
	// the demands is allowed one more load per second they took.
	allowed := 1 + int32(time.Since(began)/time.Second)
	if n := src.loads.Load() - before; n > allowed {
		t.Fatalf("1000 demands in %v made %d loads; want at most %d", time.Since(began).Round(time.Millisecond), n, allowed)
	}
}

// stalledSource is a fake for the error path: after its first load it
// hangs, as a Vault that accepts connections and never answers does, until
// released, whatever its context says.
type stalledSource struct {
	first, ring *keys.Ring
	release     chan struct{}
	loads       atomic.Int32
}

func (s *stalledSource) Load(context.Context) (*keys.Ring, error) {
	if s.loads.Add(1) == 1 {
		return s.first, nil
	}
	<-s.release
	return s.ring, nil
}

func TestRefresher_DemandDuringAStallIsSharedAndEndsWithTheCaller(t *testing.T) {
	r1, _ := keys.NewRing([]keys.Key{key(t, 1, time.Time{})}, 1)
	r2, _ := keys.NewRing([]keys.Key{key(t, 1, time.Time{}), key(t, 2, time.Time{})}, 2)
	src := &stalledSource{first: r1, ring: r2, release: make(chan struct{})}
	ref := keys.NewRefresher(src, time.Hour, nil)
	if err := ref.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past any rate limit of the first load

	const callers = 64
	returned := make(chan *keys.Ring, callers)
	for range callers {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			returned <- ref.Demand(ctx)
		}()
	}
	for range callers {
		select {
		case got := <-returned:
			if got != r1 {
				t.Fatalf("a caller that gave up got ring %v, want the current one", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("callers are held past their deadline by a stalled load")
		}
	}
	if n := src.loads.Load() - 1; n != 1 {
		t.Fatalf("%d callers during one stall made %d loads; want 1, shared", callers, n)
	}
	// A caller without a deadline gets the shared load's result.
	got := make(chan *keys.Ring)
	go func() { got <- ref.Demand(context.Background()) }()
	close(src.release)
	if r := <-got; r != r2 {
		t.Fatalf("after the stall: got ring %v, want the new one", r)
	}
	if n := src.loads.Load() - 1; n != 1 {
		t.Fatalf("loads after the stall: %d, want still 1", n)
	}
}

// TestRefresher_LogsRingChanges: an operator sees in the log each version
// loaded, the version that starts sealing and each version that left the
// ring, once each, by number, never its bytes; and a failed load says what
// the replica serves meanwhile: the last good keys, or none at all (it
// said "serving with the last good keys" also when it had never loaded any).
func TestRefresher_LogsRingChanges(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	src := &flakySource{}
	ref := keys.NewRefresher(src, time.Hour, nil)
	ref.SetLog(log)
	ring := func(sealing uint32, ids ...uint32) *keys.Ring {
		var ks []keys.Key
		for _, id := range ids {
			ks = append(ks, key(t, id, time.Time{}))
		}
		r, err := keys.NewRing(ks, sealing)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, step := range []struct {
		name   string
		ring   *keys.Ring // nil: the source fails
		want   []string   // the lines logged, in order
		absent string
	}{
		{"never loaded, source down", nil, []string{`level=ERROR msg="key refresh failed; no keys loaded yet: seals and opens fail (KEYS_UNAVAILABLE) until one succeeds"`}, "last good"},
		{"first ring", ring(1, 1), []string{`msg="key version loaded" version=1`, `msg="key version activated: it seals from now on" version=1 previous=0`}, ""},
		{"same ring again", ring(1, 1), nil, ""},
		{"a new version, not yet sealing", ring(1, 1, 2), []string{`msg="key version loaded" version=2`}, ""},
		{"the new version activated", ring(2, 1, 2), []string{`msg="key version activated: it seals from now on" version=2 previous=1`}, ""},
		{"the old version retired", ring(2, 2), []string{`msg="key version retired: states sealed with it no longer open" version=1`}, ""},
		{"source down after", nil, []string{`level=WARN msg="key refresh failed; serving with the last good keys" versions=[2] sealing=2`}, ""},
	} {
		buf.Reset()
		src.broken.Store(step.ring == nil)
		src.ring.Store(step.ring)
		ref.Refresh(context.Background())
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if buf.Len() == 0 {
			lines = nil
		}
		if len(lines) != len(step.want) {
			t.Fatalf("%s: got %d lines %q, want %d", step.name, len(lines), lines, len(step.want))
		}
		for i, want := range step.want {
			if !strings.Contains(lines[i], want) {
				t.Errorf("%s: line %d %q, want it to hold %q", step.name, i, lines[i], want)
			}
		}
		if step.absent != "" && strings.Contains(buf.String(), step.absent) {
			t.Errorf("%s: %q logged:\n%s", step.name, step.absent, buf.String())
		}
		if strings.Contains(buf.String(), base64.StdEncoding.EncodeToString(secret)) || bytes.Contains(buf.Bytes(), secret) {
			t.Fatalf("%s: key bytes logged", step.name)
		}
	}
}
