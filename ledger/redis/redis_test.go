package redis_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testpki"
	"github.com/mcp-sealer/sealer/internal/testredis"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/ledgertest"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/sealer"
)

// newRedis is a ledger on url whose timeout only bounds a call that hangs:
// a loaded machine's Redis may take a while to answer, and the tests time
// no answer.
func newRedis(t *testing.T, url string) *redis.Ledger {
	t.Helper()
	return newRedisWithin(t, url, 5*time.Second)
}

// newRedisWithin is newRedis with the ledger's timeout.
func newRedisWithin(t *testing.T, url string, timeout time.Duration) *redis.Ledger {
	t.Helper()
	r, err := redis.New(redis.Options{URL: url, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRedis_Conformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Subject {
		// Each subject gets its own server so that Break stops only its own.
		own := testredis.Start(t, false)
		r := newRedis(t, own.URL())
		return ledgertest.Subject{
			Ledger: r,
			// An entry expires at its until on Redis's clock (PXAT, whole
			// milliseconds, expired once the clock's millisecond is past
			// it): wait until that clock has passed it, however slow the
			// machine.
			Expire: func(t *testing.T, until time.Time) {
				c := own.Client(t)
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					now, err := c.Time(t.Context()).Result()
					if err == nil && now.UnixMilli() > until.UnixMilli() {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("Redis's clock did not pass %v within 30s: %v, %v", until, now, err)
					}
				}
			},
			Break: func(t *testing.T) { own.Stop(t) },
		}
	})
}

func TestRedis_R6_ConsumedSurvivesRestartWithPersistence(t *testing.T) {
	srv := testredis.Start(t, true)
	// Each write waits for Redis's fsync (appendfsync always), which a disk
	// busy with other tests may hold past newRedis's 300 ms; refusals of a
	// stopped server come at once, whatever the timeout.
	r := newRedisWithin(t, srv.URL(), 5*time.Second)
	id := sealer.StateID{9}
	if err := r.Consume(context.Background(), "t", id, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	if err := r.Consume(context.Background(), "t", sealer.StateID{8}, time.Now().Add(time.Hour)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("redis stopped: got %v, want ErrUnavailable", err)
	}
	srv.Restart(t)
	if err := r.Consume(context.Background(), "t", id, time.Now().Add(time.Hour)); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("after restart: got %v, want ErrConsumed", err)
	}
}

func TestRedis_UnavailableWithinTimeout(t *testing.T) {
	srv := testredis.Start(t, false)
	r := newRedisWithin(t, srv.URL(), 300*time.Millisecond)
	srv.Stop(t)
	start := time.Now()
	err := r.Consume(context.Background(), "t", sealer.StateID{1}, time.Now().Add(time.Hour))
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if err := r.Ping(context.Background()); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("ping: got %v, want ErrUnavailable", err)
	}
	t.Logf("refused after %v", time.Since(start))
}

func TestNew_URLs(t *testing.T) {
	for _, tc := range []struct{ url, err string }{
		{"redis://127.0.0.1:6379/0", ""},
		{"rediss://user:secret@127.0.0.1:6380/1", ""},
		{"redis+cluster://user:secret@127.0.0.1:7000?addr=127.0.0.1:7001", ""},
		{"redis+sentinel://127.0.0.1:26379/0?addr=127.0.0.1:26380&master=mymaster", ""},
		{"redis+sentinel://127.0.0.1:26379/0", "master"},
		{"redis+sentinel://u:hunter2@127.0.0.1:26379/0?master=m&sentinel_username=s&sentinel_password=hunter2", ""},
		{"redis+sentinel://127.0.0.1:26379/0?master=m&password=hunter2", "user info"},
		{"redis+sentinel://127.0.0.1:26379/0?master=m&username=u", "user info"},
		{"redis+sentinel://127.0.0.1:26379/0?master=m&addr=nohostport", "addr"},
		{"http://127.0.0.1", "scheme"},
		{"redis://user:hunter2@127.0.0.1:6379/notanumber", "redis URL"},
		{"::", "does not parse"},
	} {
		r, err := redis.New(redis.Options{URL: tc.url})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.url, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want an error about %s", tc.url, err, tc.err)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("%s: error %q shows the password", tc.url, err)
		}
		if r != nil {
			r.Close()
		}
	}
}

// TestRedis_ACLUser checks docs/OPERATIONS.md's minimal ACL: an ACL user with only
// SET on the ledger's keys and PING can consume; a wrong password cannot.
func TestRedis_ACLUser(t *testing.T) {
	srv := testredis.Start(t, false, "--user", "sealer", "on", ">s3cret-pw", "~sealer:v1:consumed:*", "+evalsha", "+eval", "+set", "+time", "+ping")
	ok := newRedis(t, "redis://sealer:s3cret-pw@"+srv.Addr+"/0")
	if err := ok.Ping(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	id := sealer.StateID{7}
	if err := ok.Consume(context.Background(), "t", id, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("consume as the ACL user: %v", err)
	}
	if err := ok.Consume(context.Background(), "t", id, time.Now().Add(time.Minute)); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("again: got %v, want ErrConsumed", err)
	}
	bad := newRedis(t, "redis://sealer:wrong@"+srv.Addr+"/0")
	err := bad.Consume(context.Background(), "t", sealer.StateID{8}, time.Now().Add(time.Minute))
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("wrong password: got %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error %q shows a password", err)
	}
}

// TestRedis_TLS: a rediss:// ledger verifies the server with the CA file,
// and refuses a server its CA did not sign.
func TestRedis_TLS(t *testing.T) {
	ca := testpki.NewCA(t, "redis-test")
	cert := ca.Server(t, "redis")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsAddr := l.Addr().String()
	l.Close()
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	testredis.Start(t, false, "--tls-port", tlsPort, "--tls-cert-file", cert.CertFile,
		"--tls-key-file", cert.KeyFile, "--tls-ca-cert-file", ca.CertFile, "--tls-auth-clients", "no")

	r, err := redis.New(redis.Options{URL: "rediss://" + tlsAddr + "/0", CAFile: ca.CertFile, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Consume(context.Background(), "t", sealer.StateID{1}, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("consume over TLS: %v", err)
	}

	other := testpki.NewCA(t, "other")
	untrusting, err := redis.New(redis.Options{URL: "rediss://" + tlsAddr + "/0", CAFile: other.CertFile, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	if err := untrusting.Consume(context.Background(), "t", sealer.StateID{2}, time.Now().Add(time.Minute)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("server signed by another CA: got %v, want ErrUnavailable", err)
	}
}

// FuzzNew: no URL makes New panic, and no error quotes the URL's password.
func FuzzNew(f *testing.F) {
	for _, seed := range []string{
		"redis://u:hunter2@h:6379/0", "rediss+cluster://u:hunter2@h:1?addr=i:2",
		"redis+sentinel://u:hunter2@h:1/0?master=m&sentinel_password=hunter2&addr=x",
		"redis+sentinel://h/9999999999999999999?master=m", "redis://%zz", "redis+sentinel://h?master=m&db=x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := redis.New(redis.Options{URL: raw})
		if err != nil {
			if u, perr := url.Parse(raw); perr == nil {
				if p, ok := u.User.Password(); ok && len(p) >= 4 && strings.Contains(err.Error(), p) {
					t.Fatalf("error %q quotes the password", err)
				}
			}
			return
		}
		r.Close()
	})
}

func TestIsURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"redis://h:6379/0": true, "rediss://u:p@h/0": true, "redis+sentinel://h?master=m": true,
		"redis+cluster://h?addr=i": true, "rediss+cluster://h": true,
		"redisx://h": false, "http://h": false, "redis+shard://h": false, "embedded": false, "redis": false, "://": false,
	} {
		if got := redis.IsURL(raw); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", raw, got, want)
		}
	}
}

// On one machine Redis and this process read one clock: the offset is
// within the measurement's margin (and TIME's microsecond). A stopped Redis
// is unavailable, not an offset of zero.
func TestRedis_ClockOffsetOfOneClockIsWithinItsMargin(t *testing.T) {
	srv := testredis.Start(t, false)
	r := newRedis(t, srv.URL())
	offset, margin, err := r.ClockOffset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if margin <= 0 || offset.Abs() > margin+time.Millisecond {
		t.Fatalf("offset %v, margin %v: want |offset| within the margin", offset, margin)
	}
	srv.Stop(t)
	if _, _, err := r.ClockOffset(context.Background()); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("redis stopped: got %v, want ErrUnavailable", err)
	}
}

// TestRedis_ACLUser_Outcomes checks the ACL that recorded outcomes need:
// docs/OPERATIONS.md's user with flows (GET and PTTL besides SET) claims,
// records and reads outcomes of states and flows. Without +get a state's
// claim still wins (it only SETs), and recording or reading its outcome
// is refused.
func TestRedis_ACLUser_Outcomes(t *testing.T) {
	keys := []string{"~sealer:v1:consumed:*", "~sealer:v1:flow:*", "+eval", "+evalsha", "+set", "+pttl", "+time", "+ping"}
	args := append(append([]string{"--user", "sealer", "on", ">s3cret-pw", "+get"}, keys...), "--user", "noget", "on", ">s3cret-pw")
	srv := testredis.Start(t, false, append(args, keys...)...)
	ok := newRedis(t, "redis://sealer:s3cret-pw@"+srv.Addr+"/0")
	narrow := newRedis(t, "redis://noget:s3cret-pw@"+srv.Addr+"/0")
	ctx, until := context.Background(), time.Now().Add(time.Minute)
	for _, e := range []ledger.Entry{{ID: sealer.StateID{7}}, {Flow: sealer.FlowID{7}, Round: 3}} {
		if err := ok.Claim(ctx, "t", e, until, time.Minute); err != nil {
			t.Fatalf("claim %+v: %v", e, err)
		}
		if _, err := ok.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrPending) {
			t.Fatalf("outcome %+v before the record: got %v, want ErrPending", e, err)
		}
		if err := ok.Record(ctx, "t", e, []byte("answer")); err != nil {
			t.Fatalf("record %+v: %v", e, err)
		}
		if got, err := ok.Outcome(ctx, "t", e); err != nil || string(got) != "answer" {
			t.Fatalf("outcome %+v: got %q, %v, want answer", e, got, err)
		}
	}

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "can't run") {
			t.Errorf("%s without +get: got %v, want ErrUnavailable: can't run", what, err)
		}
	}
	state := ledger.Entry{ID: sealer.StateID{8}}
	if err := narrow.Claim(ctx, "t", state, until, time.Minute); err != nil {
		t.Fatalf("claim of a state without +get: %v", err)
	}
	refused("record", narrow.Record(ctx, "t", state, []byte("answer")))
	_, err := narrow.Outcome(ctx, "t", state)
	refused("outcome", err)
	refused("claim of a flow", narrow.Claim(ctx, "t", ledger.Entry{Flow: sealer.FlowID{8}, Round: 1}, until, time.Minute))
}

// TestRedis_OutcomeValues pins the values an entry takes, which replicas
// of other releases read: a claim is pending until a deadline on Redis's
// clock, a flow's names the state it was claimed for, a record keeps the
// key's expiry and the claimant, and the values an earlier release wrote
// ("1", a bare round, a flow's claim naming no state) read as consumed.
func TestRedis_OutcomeValues(t *testing.T) {
	srv := testredis.Start(t, false)
	r := newRedis(t, srv.URL())
	admin := srv.Client(t)
	ctx := context.Background()
	until := time.Now().Add(time.Minute)
	state, flow := ledger.Entry{ID: sealer.StateID{1}}, ledger.Entry{ID: sealer.StateID{3}, Flow: sealer.FlowID{2}, Round: 5}
	claimant := "c\x03" + strings.Repeat("\x00", 15)
	stateKey := "sealer:v1:consumed:1:t:01000000000000000000000000000000"
	flowKey := "sealer:v1:flow:1:t:02000000000000000000000000000000"
	value := func(key string) string {
		t.Helper()
		v, err := admin.Get(ctx, key).Result()
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		return v
	}

	before, err := admin.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []ledger.Entry{state, flow} {
		if err := r.Claim(ctx, "t", e, until, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for key, head := range map[string]string{stateKey: "1", flowKey: "5" + claimant} {
		v := value(key)
		deadline, err := strconv.ParseInt(strings.TrimPrefix(v, head+"p"), 10, 64)
		if err != nil || !strings.HasPrefix(v, head+"p") {
			t.Fatalf("claimed %s: got %q, want %qp and a deadline", key, v, head)
		}
		if lo := before.Add(10 * time.Second).UnixMilli(); deadline < lo || deadline > lo+10_000 {
			t.Errorf("claimed %s: deadline %d, want 10 s after Redis's time of the claim, %d", key, deadline, lo)
		}
	}
	if err := r.Record(ctx, "t", state, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(ctx, "t", flow, nil); err != nil {
		t.Fatal(err)
	}
	if v := value(stateKey); v != "1oanswer" {
		t.Errorf("recorded state: got %q, want 1oanswer", v)
	}
	if v := value(flowKey); v != "5"+claimant+"n" {
		t.Errorf("flow recorded with none: got %q, want %q", v, "5"+claimant+"n")
	}
	for _, key := range []string{stateKey, flowKey} {
		if got := admin.PExpireTime(ctx, key).Val().Milliseconds(); got != until.UnixMilli() {
			t.Errorf("%s expires after the record at %d, want %d, the until claimed", key, got, until.UnixMilli())
		}
	}

	// What an earlier release wrote.
	admin.Set(ctx, stateKey, "1", time.Minute)
	admin.Set(ctx, flowKey, "5", time.Minute)
	for _, e := range []ledger.Entry{state, flow} {
		if _, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("outcome %+v of an earlier release's entry: got %v, want ErrConsumed", e, err)
		}
		if err := r.Record(ctx, "t", e, []byte("answer")); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("record %+v on an earlier release's entry: got %v, want ErrConsumed", e, err)
		}
	}
	// A flow's claim, or its outcome, that an earlier release wrote names
	// no state: no state records or reads it, and it stays as it is.
	for _, v := range []string{"5p99999999999999", "5oanswer", "5n"} {
		admin.Set(ctx, flowKey, v, time.Minute)
		if got, err := r.Outcome(ctx, "t", flow); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("outcome of an earlier release's flow %q: got %q, %v, want ErrConsumed", v, got, err)
		}
		if err := r.Record(ctx, "t", flow, []byte("answer")); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("record on an earlier release's flow %q: got %v, want ErrConsumed", v, err)
		}
		if got := value(flowKey); got != v {
			t.Errorf("an earlier release's flow %q after a record: got %q", v, got)
		}
	}
	if err := r.Advance(ctx, "t", flow.Flow, 5, until); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("round 5 again: got %v, want ErrConsumed", err)
	}
	if err := r.Claim(ctx, "t", ledger.Entry{Flow: flow.Flow, Round: 6}, until, time.Minute); err != nil {
		t.Errorf("claim of round 6 after an earlier release's round 5: got %v, want nil", err)
	}
	if err := r.Advance(ctx, "t", flow.Flow, 6, until); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("round 6 after its claim: got %v, want ErrConsumed", err)
	}
	admin.Set(ctx, flowKey, "7cshort", time.Minute)
	if _, err := r.Outcome(ctx, "t", ledger.Entry{ID: flow.ID, Flow: flow.Flow, Round: 7}); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a claimant no release writes: got %v, want ErrUnavailable", err)
	}
	admin.Set(ctx, flowKey, "x5", time.Minute)
	if err := r.Advance(ctx, "t", flow.Flow, 7, until); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a value no release writes: got %v, want ErrUnavailable", err)
	}
}

// TestRedis_AnswersValues pins where a claim keeps its answers, which
// replicas of other releases read: 'a' and the 32 bytes of the digest
// after the round's digits and a flow's claimant, kept by a record; a
// retry with other answers, or with none, is a conflict, and so is one
// with answers of a claim an earlier release wrote (none kept); answers
// cut short are a value no release writes.
func TestRedis_AnswersValues(t *testing.T) {
	srv := testredis.Start(t, false)
	r := newRedis(t, srv.URL())
	admin := srv.Client(t)
	ctx := context.Background()
	until := time.Now().Add(time.Minute)
	ran, other := sealer.Digest{0xa1, '1', 'p'}, sealer.Digest{0xa2}
	state := ledger.Entry{ID: sealer.StateID{1}, Answers: &ran}
	flow := ledger.Entry{ID: sealer.StateID{3}, Flow: sealer.FlowID{2}, Round: 5, Answers: &ran}
	claimant := "c\x03" + strings.Repeat("\x00", 15)
	stateKey := "sealer:v1:consumed:1:t:01000000000000000000000000000000"
	flowKey := "sealer:v1:flow:1:t:02000000000000000000000000000000"
	value := func(key string) string {
		t.Helper()
		v, err := admin.Get(ctx, key).Result()
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		return v
	}
	for _, e := range []ledger.Entry{state, flow} {
		if err := r.Claim(ctx, "t", e, until, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	heads := map[string]string{stateKey: "1a" + string(ran[:]), flowKey: "5" + claimant + "a" + string(ran[:])}
	for key, head := range heads {
		if v := value(key); !strings.HasPrefix(v, head+"p") {
			t.Fatalf("claimed %s: got %q, want %qp and a deadline", key, v, head)
		}
	}
	for _, e := range []ledger.Entry{state, flow} {
		e.Answers = nil // Record keeps the claim's, whatever it is given
		if err := r.Record(ctx, "t", e, []byte("answer")); err != nil {
			t.Fatal(err)
		}
	}
	for key, head := range heads {
		if v := value(key); v != head+"oanswer" {
			t.Errorf("recorded %s: got %q, want %q", key, v, head+"oanswer")
		}
	}
	for _, e := range []ledger.Entry{state, flow} {
		if got, err := r.Outcome(ctx, "t", e); err != nil || string(got) != "answer" {
			t.Errorf("outcome %+v with its answers: got %q, %v, want answer", e, got, err)
		}
		for _, a := range []*sealer.Digest{&other, nil} {
			e.Answers = a
			if got, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrConflict) {
				t.Errorf("outcome %+v with other answers: got %q, %v, want ErrConflict", e, got, err)
			}
		}
	}

	// A claim an earlier release wrote (no answers): a conflict for a
	// retry with answers, the outcome for one without.
	admin.Set(ctx, stateKey, "1oanswer", time.Minute)
	admin.Set(ctx, flowKey, "5"+claimant+"oanswer", time.Minute)
	for _, e := range []ledger.Entry{state, flow} {
		if got, err := r.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("outcome %+v of an earlier release's claim: got %q, %v, want ErrConflict", e, got, err)
		}
		e.Answers = nil
		if got, err := r.Outcome(ctx, "t", e); err != nil || string(got) != "answer" {
			t.Errorf("outcome %+v without answers of an earlier release's claim: got %q, %v, want answer", e, got, err)
		}
	}
	admin.Set(ctx, stateKey, "1ashort", time.Minute)
	if _, err := r.Outcome(ctx, "t", state); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("answers no release writes: got %v, want ErrUnavailable", err)
	}
	if err := r.Record(ctx, "t", state, []byte("answer")); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("record on answers no release writes: got %v, want ErrUnavailable", err)
	}
	admin.Set(ctx, stateKey, "1a"+string(ran[:]), time.Minute)
	if _, err := r.Outcome(ctx, "t", state); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("answers and no outcome state: got %v, want ErrUnavailable", err)
	}
}

// TestRedis_Evicting names a policy that may evict the ledger's keys, and
// none for noeviction, Redis's default.
func TestRedis_Evicting(t *testing.T) {
	srv := testredis.Start(t, false)
	r := newRedis(t, srv.URL())
	for _, policy := range []string{"noeviction", "volatile-lru", "allkeys-random", "noeviction"} {
		if err := srv.Client(t).ConfigSet(context.Background(), "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		want := policy
		if policy == "noeviction" {
			want = ""
		}
		if got, err := r.Evicting(context.Background()); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", policy, got, err, want)
		}
	}
}
