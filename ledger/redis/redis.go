// Package redis is the one-time ledger of a fleet: every sealer consumes in
// one Redis (single node, Sentinel or Cluster).
package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// keyPrefix namespaces the ledger's keys in a Redis shared with others.
const keyPrefix = "sealer:v1:consumed:"

// Ledger is the ledger of a fleet: every replica consumes in one Redis (single
// node, Sentinel or Cluster) with one atomic SET NX PXAT per one-time state.
// Any error, timeout or unexpected reply is ledger.ErrUnavailable: it never reports
// a state as unconsumed when it cannot tell.
type Ledger struct {
	client  goredis.UniversalClient
	timeout time.Duration
}

var _ ledger.Ledger = (*Ledger)(nil)

// Options configure New.
type Options struct {
	// URL picks the deployment by scheme, with user and password for ACLs:
	//
	//	redis://user:pass@host:6379/0            single node
	//	rediss://user:pass@host:6380/0           single node over TLS
	//	redis+sentinel://user:pass@h1:26379/0?addr=h2:26379&master=mymaster
	//	redis+cluster://user:pass@h1:6379?addr=h2:6379
	//
	// (rediss+sentinel and rediss+cluster for TLS.)
	URL string
	// PasswordFile, when set, holds the password instead of the URL.
	PasswordFile string
	// CAFile, when set, is the PEM bundle that verifies the server for TLS.
	CAFile string
	// Timeout bounds every Redis call, dial included. Zero means 500ms.
	Timeout time.Duration
}

// New returns a Redis ledger. It does not connect: the first call does,
// and Ping checks reachability.
func New(o Options) (*Ledger, error) {
	if o.Timeout <= 0 {
		o.Timeout = 500 * time.Millisecond
	}
	password := ""
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("ledger: redis password file: %v", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	var roots *x509.CertPool
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ledger: redis CA file: %v", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ledger: redis CA file %s holds no PEM certificate", o.CAFile)
		}
	}
	client, err := redisClient(o.URL, password, roots, o.Timeout)
	if err != nil {
		return nil, err
	}
	return &Ledger{client: client, timeout: o.Timeout}, nil
}

// redisClient builds the universal client for the URL's scheme. The URL
// gives the addresses, user, password, database and TLS; the timeouts are
// the ledger's. Retries are off: a retried SET NX whose first attempt landed
// would report the caller's own consume as someone else's.
func redisClient(raw, password string, roots *x509.CertPool, timeout time.Duration) (goredis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("ledger: redis URL does not parse") // the URL may hold a password: not quoted
	}
	base, kind, ok := scheme(u)
	if !ok {
		return nil, fmt.Errorf("ledger: redis URL scheme %q: want redis, rediss, redis+sentinel or redis+cluster", u.Scheme)
	}
	u.Scheme = base
	var o goredis.UniversalOptions
	switch kind {
	case "":
		p, err := goredis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("ledger: redis URL: %v", redactErr(err, u))
		}
		o = goredis.UniversalOptions{Addrs: []string{p.Addr}, Username: p.Username, Password: p.Password, DB: p.DB, TLSConfig: p.TLSConfig}
	case "sentinel":
		q := u.Query()
		master := q.Get("master")
		if master == "" {
			return nil, errors.New("ledger: redis+sentinel URL needs ?master=NAME")
		}
		q.Del("master")
		u.RawQuery = q.Encode()
		p, err := goredis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("ledger: redis URL: %v", redactErr(err, u))
		}
		o = goredis.UniversalOptions{Addrs: p.SentinelAddrs, MasterName: master, Username: p.Username, Password: p.Password,
			SentinelUsername: p.SentinelUsername, SentinelPassword: p.SentinelPassword, DB: p.DB, TLSConfig: p.TLSConfig}
	case "cluster":
		p, err := goredis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("ledger: redis URL: %v", redactErr(err, u))
		}
		o = goredis.UniversalOptions{Addrs: p.Addrs, IsClusterMode: true, Username: p.Username, Password: p.Password, TLSConfig: p.TLSConfig}
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
	o.MaxRetries, o.DialerRetries = -1, 1
	if password != "" {
		o.Password = password
	}
	if o.TLSConfig != nil {
		o.TLSConfig.MinVersion = tls.VersionTLS12
		if roots != nil {
			o.TLSConfig.RootCAs = roots
		}
	}
	return goredis.NewUniversalClient(&o), nil
}

// IsURL reports whether raw is a URL New accepts the scheme of: redis://,
// rediss://, redis+sentinel://, redis+cluster:// (and rediss+ for TLS).
func IsURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	_, _, ok := scheme(u)
	return ok
}

// scheme splits a URL's scheme into its base (redis or rediss) and its kind
// ("", sentinel or cluster).
func scheme(u *url.URL) (base, kind string, ok bool) {
	base, kind, _ = strings.Cut(u.Scheme, "+")
	ok = (base == "redis" || base == "rediss") && (kind == "" || kind == "sentinel" || kind == "cluster")
	return base, kind, ok
}

// redactErr removes the URL's password from a parser's message.
func redactErr(err error, u *url.URL) string {
	msg := err.Error()
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}

// redisKey is the key of a state: prefix, tenant length, tenant, id in hex.
func redisKey(tenant string, id sealer.StateID) string {
	return keyPrefix + strconv.Itoa(len(tenant)) + ":" + tenant + ":" + hex.EncodeToString(id[:])
}

// Consume implements ledger.Ledger with SET key 1 NX PX ttl, ttl counted from now
// on the sealer's clock and rounded up to the millisecond. A relative expiry
// does not depend on Redis's clock agreeing with ours, and the entry lives at
// least until until, since Redis starts counting when the command arrives.
// An until not in the future is refused: Redis would answer OK to an
// absolute expiry in the past and store nothing.
func (r *Ledger) Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error {
	ttl, err := ledger.Remaining(until)
	if err != nil {
		return err
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := r.client.SetArgs(ctx, redisKey(tenant, id), "1", goredis.SetArgs{Mode: "NX", TTL: ttl}).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return ledger.ErrConsumed
	case err != nil:
		return fmt.Errorf("%w: redis: %v", ledger.ErrUnavailable, err)
	case res != "OK":
		return fmt.Errorf("%w: redis answered SET NX with %.20q", ledger.ErrUnavailable, res)
	}
	return nil
}

// Ping reports whether Redis answers within the timeout.
func (r *Ledger) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: redis: %v", ledger.ErrUnavailable, err)
	}
	return nil
}

// Close closes the client's connections.
func (r *Ledger) Close() error { return r.client.Close() }
