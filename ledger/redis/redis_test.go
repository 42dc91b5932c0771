package redis_test

import (
	"context"
	"errors"
	"net"
	"net/url"
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

func newRedis(t *testing.T, url string) *redis.Ledger {
	t.Helper()
	return newRedisWithin(t, url, 300*time.Millisecond)
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
			// An entry expires at its until on Redis's clock (PXAT): wait
			// until that clock has passed it, however slow the machine.
			Expire: func(t *testing.T, until time.Time) {
				c := own.Client(t)
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					now, err := c.Time(t.Context()).Result()
					if err == nil && now.After(until) {
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
	r := newRedis(t, srv.URL())
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

	r, err := redis.New(redis.Options{URL: "rediss://" + tlsAddr + "/0", CAFile: ca.CertFile, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Consume(context.Background(), "t", sealer.StateID{1}, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("consume over TLS: %v", err)
	}

	other := testpki.NewCA(t, "other")
	untrusting, err := redis.New(redis.Options{URL: "rediss://" + tlsAddr + "/0", CAFile: other.CertFile, Timeout: time.Second})
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
