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
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/internal/secretfile"
	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// keyPrefix and flowPrefix namespace the ledger's keys in a Redis shared
// with others: consumed states, and the highest round opened of flows.
const (
	keyPrefix  = "sealer:v1:consumed:"
	flowPrefix = "sealer:v1:flow:"
)

// An entry is one key whose value is the round it holds, in decimal (a
// state id's entry holds round 1: it opens once), then the state of its
// outcome (Recorder):
//
//	(nothing)          consumed without a claim: no outcome will come
//	'p' deadline       claimed, outcome pending until deadline (Unix ms, Redis's clock)
//	'o' outcome        the outcome recorded, non-empty
//	'n'                recorded that none will come
//
// A flow's claimed round names the state it was claimed for, whose open
// won it, before its outcome state: 'c', the 16 bytes of the state id,
// then 'p'... Only that state records and reads the outcome. A claim with
// answers (ledger.Entry.Answers) keeps them next, before its outcome
// state: 'a' and the 32 bytes of the digest, then 'p'... Only a retry with
// the same answers, or without any for a claim without any, reads the
// outcome; every other gets a conflict.
//
// So "1" and a bare round, all that an earlier release wrote, read as
// consumed without a claim, and an earlier release that reads a claimed
// flow's value fails its script: it refuses the open, never repeats it. A
// flow's 'p', 'o' or 'n' without a claimant, written by a release before
// claimants, is no state's: consumed for every one. An earlier release
// that reads a claim with answers fails its script as for a claimant
// ('a' where it wants an outcome state), and a claim written without
// answers, by such a release or for a caller that sent none, is a
// conflict for a retry with answers.
// An outcome is part of its entry's value: it lives exactly as long as the
// entry, on the same node (one key per script, one slot of a Cluster).

// The scripts judge every deadline on the ledger's clock: an entry lives
// until at least the absolute time the caller gives (PXAT), which the state
// itself fixes (its expiry, or its flow's deadline, plus the retention), so
// no replica's clock, stepped or wrong, shortens it; and a call that
// reaches Redis at or after that time records nothing and answers -2 (too
// late). TIME in a script needs Redis's effects replication, the default
// since Redis 5. claimed is the outcome state a consume or an advance
// writes: none for a negative wait (noClaim), otherwise pending for wait
// ms (a Claim) from now, after the claim's answers when it has any (32
// bytes; empty for none).
const nowScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function claimed(wait, answers)
  if tonumber(wait) < 0 then return '' end
  local v = 'p' .. string.format('%d', now + tonumber(wait))
  if answers ~= '' then v = 'a' .. answers .. v end
  return v
end
`

// consumeScript records KEYS[1] as consumed until ARGV[1] (Unix ms) if it
// is not, claimed for ARGV[2] ms with the answers ARGV[3]: 0, or -1 when
// it is.
var consumeScript = goredis.NewScript(nowScript + `
if now >= tonumber(ARGV[1]) then return -2 end
if redis.call('SET', KEYS[1], '1' .. claimed(ARGV[2], ARGV[3]), 'NX', 'PXAT', ARGV[1]) then return 0 end
return -1`)

// advanceScript is the whole of a latest-only advance, on the flow's one
// key: it records round ARGV[1] as the flow's highest, until at least
// ARGV[2] (Unix ms), claimed for ARGV[3] ms for the state ARGV[4] (16
// bytes) with the answers ARGV[5], if it is above the round recorded; the
// outcome state of the round before goes with it. It returns the round recorded before (0 for
// none), which an undo needs (retreat), or -1 when the round is not above
// it.
var advanceScript = goredis.NewScript(nowScript + `
local round, untilMs, wait, claimant, answers = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if now >= tonumber(untilMs) then return -2 end
-- the round recorded: the value's leading digits (see the format above)
local old = redis.call('GET', KEYS[1])
local prev = 0
if old then
  prev = tonumber(string.match(old, '^%d+'))
  if not prev then return -5 end
end
if prev >= tonumber(round) then return -1 end
-- an entry that already lives past untilMs keeps its expiry: never shortened
local v = round
if tonumber(wait) >= 0 then v = round .. 'c' .. claimant .. claimed(wait, answers) end
if now + redis.call('PTTL', KEYS[1]) > tonumber(untilMs) then
  redis.call('SET', KEYS[1], v, 'KEEPTTL')
else
  redis.call('SET', KEYS[1], v, 'PXAT', untilMs)
end
return prev`)

// retreatScript is the undo of an advance (retreat): if the flow's round
// is still ARGV[1], it goes back to ARGV[2] (deleted for 0), keeping its
// expiry. The round before comes back without the outcome it may have
// had: a retry of it is then refused instead of answered, which fails
// closed. It answers 1 when it went back, 0 when the flow had moved.
var retreatScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.match(v, '^%d+') ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then return redis.call('DEL', KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1`)

// Ledger is the ledger of a fleet: every replica consumes in one Redis (single
// node, Sentinel or Cluster) with one script per call, atomic on the node
// that holds the key (with Options.Replicas, followed there by WAIT; see
// write). Any error, timeout or unexpected reply is ledger.ErrUnavailable:
// it never reports a state as unconsumed when it cannot tell.
type Ledger struct {
	client   goredis.UniversalClient
	timeout  time.Duration
	replicas int
}

var _ ledger.Ledger = (*Ledger)(nil)

// Options configure New.
type Options struct {
	// URL picks the deployment by scheme. Its user and password are always
	// the data nodes' (the ACL user that SETs), whatever the deployment:
	//
	//	redis://user:pass@host:6379/0            single node
	//	rediss://user:pass@host:6380/0           single node over TLS
	//	redis+sentinel://user:pass@s1:26379/0?addr=s2:26379&master=mymaster
	//	redis+cluster://user:pass@n1:6379?addr=n2:6379
	//
	// (rediss+sentinel and rediss+cluster for TLS.) A Sentinel URL names the
	// Sentinels (host and addr) and the monitored master; the Sentinels' own
	// credentials, when they require some, are the query parameters
	// sentinel_username and sentinel_password.
	URL string
	// PasswordFile, when set, holds the data nodes' password instead of the
	// URL. It is read again for every new connection, so that a rotated
	// password is used without a restart.
	PasswordFile string
	// CAFile, when set, is the PEM bundle that verifies the server for TLS.
	CAFile string
	// Timeout bounds every Redis call, dial included. Zero means 500ms.
	Timeout time.Duration
	// Replicas, when above zero, makes a consume, an advance, a claim or
	// a record wait until that many replicas of the primary that holds
	// the key acknowledge it (WAIT), within half of Timeout; one they do
	// not is ErrUnavailable and undone, but for a record (see write,
	// consume, retreat and Record).
	Replicas int
}

// New returns a Redis ledger. It does not connect: the first call does,
// and Ping checks reachability.
func New(o Options) (*Ledger, error) {
	if o.Timeout <= 0 {
		o.Timeout = 500 * time.Millisecond
	}
	if o.Replicas < 0 {
		return nil, fmt.Errorf("ledger: redis replicas %d: want 0 or more", o.Replicas)
	}
	var password *passwordFile
	if o.PasswordFile != "" {
		password = &passwordFile{path: o.PasswordFile}
		if err := password.read(); err != nil {
			return nil, fmt.Errorf("ledger: redis password file: %v", err)
		}
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
	return &Ledger{client: client, timeout: o.Timeout, replicas: o.Replicas}, nil
}

// passwordFile is a password in a file that an operator or a secrets agent
// may replace at any time. It is read again for every new connection, so a
// connection refused after a rotation (WRONGPASS) is followed by one with
// the file's new content; a file that cannot be read then keeps the last
// password read.
type passwordFile struct {
	path string
	mu   sync.Mutex
	last string
}

func (f *passwordFile) read() error {
	s, err := secretfile.Read(f.path)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = s
	return nil
}

func (f *passwordFile) password() string {
	f.read() // on error, the last one read
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// redisClient builds the universal client for the URL's scheme. The URL
// gives the addresses, user, password, database and TLS; the timeouts are
// the ledger's. Retries are off: a retried SET NX whose first attempt landed
// would report the caller's own consume as someone else's. A Cluster client
// retries within its redirections, so those are off too: a MOVED or ASK
// answer (a failover, a resharding) refuses that one call, and the client
// learns the new slots for the next.
func redisClient(raw string, password *passwordFile, roots *x509.CertPool, timeout time.Duration) (goredis.UniversalClient, error) {
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
		if q.Has("username") || q.Has("password") {
			return nil, errors.New("ledger: redis+sentinel URL: the master's user and password go in the URL's user info (user:pass@), the Sentinels' in sentinel_username and sentinel_password")
		}
		sentinelUser, sentinelPassword := q.Get("sentinel_username"), q.Get("sentinel_password")
		for _, k := range []string{"master", "sentinel_username", "sentinel_password"} {
			q.Del(k)
		}
		u.RawQuery = q.Encode()
		p, err := goredis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("ledger: redis URL: %v", redactErr(err, u))
		}
		// go-redis reads the user info as the Sentinels' credentials; here,
		// as for the other schemes, it is the data nodes' (the master's).
		o = goredis.UniversalOptions{Addrs: p.SentinelAddrs, MasterName: master, Username: p.SentinelUsername, Password: p.SentinelPassword,
			SentinelUsername: sentinelUser, SentinelPassword: sentinelPassword, DB: p.DB, TLSConfig: p.TLSConfig}
	case "cluster":
		p, err := goredis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("ledger: redis URL: %v", redactErr(err, u))
		}
		o = goredis.UniversalOptions{Addrs: p.Addrs, IsClusterMode: true, Username: p.Username, Password: p.Password, TLSConfig: p.TLSConfig}
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
	o.MaxRetries, o.MaxRedirects, o.DialerRetries = -1, -1, 1
	if password != nil {
		user := o.Username
		o.CredentialsProvider = func() (string, string) { return user, password.password() }
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

// flowKey is the key of a flow, in the same shape.
func flowKey(tenant string, flow sealer.FlowID) string {
	return flowPrefix + strconv.Itoa(len(tenant)) + ":" + tenant + ":" + hex.EncodeToString(flow[:])
}

// noClaim is the wait of a consume or an advance that claims no outcome:
// a Claim's is 0 or more (see nowScript).
const noClaim int64 = -1

// Consume implements ledger.Ledger with consumeScript: SET NX PXAT until,
// on Redis's clock (see nowScript).
func (r *Ledger) Consume(ctx context.Context, tenant string, id sealer.StateID, until time.Time) error {
	return r.consume(ctx, redisKey(tenant, id), until.UnixMilli(), noClaim, []byte{})
}

// consume runs consumeScript on key, claimed for wait ms with answers (32
// bytes, or empty for none) unless wait is noClaim. A consume the replicas
// do not acknowledge is deleted again, so that a retry can consume the
// state once they do; if the delete does not land, the state stays
// consumed: refused, never opened twice.
func (r *Ledger) consume(ctx context.Context, key string, until, wait int64, answers []byte) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, undoOn, err := r.write(ctx, consumeScript, key, until, wait, answers)
	if undoOn != nil {
		undoOn.Del(ctx, key)
		undoOn.Close()
	}
	return err
}

// Advance implements ledger.Ledger with advanceScript on the flow's key, so
// one node (one slot of a Cluster) decides atomically, on its clock.
func (r *Ledger) Advance(ctx context.Context, tenant string, flow sealer.FlowID, round uint32, until time.Time) error {
	return r.advance(ctx, flowKey(tenant, flow), round, until.UnixMilli(), noClaim, []byte{}, []byte{})
}

// advance runs advanceScript on key, claimed for wait ms for the state
// claimant with answers (32 bytes, or empty for none) unless wait is
// noClaim. An advance the replicas do not acknowledge goes back to the
// round the script found (retreat).
func (r *Ledger) advance(ctx context.Context, key string, round uint32, until, wait int64, claimant, answers []byte) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	prev, undoOn, err := r.write(ctx, advanceScript, key, round, until, wait, claimant, answers)
	if undoOn != nil {
		retreat(ctx, undoOn, key, round, prev)
		undoOn.Close()
	}
	return err
}

// retreat undoes, on conn, an advance of key from round prev to round that
// the replicas did not acknowledge, with retreatScript: if the flow is
// still at round it goes back to prev, so that a retry can advance once
// they do. If the undo does not land, the flow stays at round: refused,
// never opened twice.
func retreat(ctx context.Context, conn *goredis.Conn, key string, round uint32, prev int64) {
	retreatScript.Eval(ctx, conn, []string{key}, round, prev)
}

// write runs script on key with args and returns its answer, or the error
// scriptResult maps it to.
//
// With Replicas set, the script runs on a connection to the primary that
// holds key, followed on it, in the same round trip, by WAIT Replicas for
// half the timeout (WAIT names no key: it must go where the script went).
// A write that fewer replicas acknowledge landed on the primary, but a
// failover may lose it: write returns ErrUnavailable and that connection,
// undoOn, still open, for the caller to undo the write on and close.
// Otherwise undoOn is nil.
func (r *Ledger) write(ctx context.Context, script *goredis.Script, key string, args ...any) (answer int64, undoOn *goredis.Conn, err error) {
	if r.replicas == 0 {
		answer, err = script.Run(ctx, r.client, []string{key}, args...).Int64()
		err = scriptResult(answer, err)
		r.reloadOn(ctx, err)
		return answer, nil, err
	}
	node, err := r.primaryFor(ctx, key)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: redis: %v", ledger.ErrUnavailable, err)
	}
	conn := node.Conn()
	// One round trip; WAIT's timeout is in ms, and 0 would wait for ever.
	p := conn.Pipeline()
	written := script.Eval(ctx, p, []string{key}, args...)
	wait := p.Do(ctx, "wait", r.replicas, max(1, (r.timeout/2).Milliseconds()))
	p.Exec(ctx) // each command keeps its own error
	answer, err = written.Int64()
	if err = scriptResult(answer, err); err != nil {
		conn.Close()
		r.reloadOn(ctx, err)
		return answer, nil, err
	}
	switch acked, err := wait.Int64(); {
	case err != nil:
		return answer, conn, fmt.Errorf("%w: redis: WAIT: %v", ledger.ErrUnavailable, err)
	case acked < int64(r.replicas):
		return answer, conn, fmt.Errorf("%w: redis: %d of %d replicas acknowledged the write", ledger.ErrUnavailable, acked, r.replicas)
	}
	conn.Close()
	return answer, nil, nil
}

// The scripts' negative answers: what scriptResult maps them to.
const (
	answerConsumed = -1 // ledger.ErrConsumed
	answerTooLate  = -2 // ledger.ErrTooLate
	answerGone     = -3 // ledger.ErrGone
	answerPending  = -4 // ledger.ErrPending
	answerDamaged  = -5 // a value no release writes
	answerConflict = -6 // ledger.ErrConflict
)

// scriptResult maps the answer of a script: a negative one is one of the
// answers above, or a surprise.
func scriptResult(res int64, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: redis: %v", ledger.ErrUnavailable, err)
	case res == answerConsumed:
		return ledger.ErrConsumed
	case res == answerTooLate:
		return ledger.ErrTooLate
	case res == answerGone:
		return ledger.ErrGone
	case res == answerPending:
		return ledger.ErrPending
	case res == answerConflict:
		return ledger.ErrConflict
	case res == answerDamaged:
		return fmt.Errorf("%w: redis holds an entry no release writes", ledger.ErrUnavailable)
	case res < 0:
		return fmt.Errorf("%w: redis answered %d", ledger.ErrUnavailable, res)
	}
	return nil
}

// primaryFor is the client of the primary that holds key: the one client
// of a single node or Sentinel deployment, the master of key's slot in a
// Cluster (WAIT names no key, so it must go where the SET went).
func (r *Ledger) primaryFor(ctx context.Context, key string) (*goredis.Client, error) {
	switch c := r.client.(type) {
	case *goredis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *goredis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redis client %T", r.client)
}

// reloadOn asks a Cluster client to learn the slots again after a call
// failed: the client does so by itself on MOVED, but not when a master is
// dead (it would go on dialling it after its replica took over) nor for the
// calls that bypass its routing (MasterForKey).
func (r *Ledger) reloadOn(ctx context.Context, err error) {
	if c, ok := r.client.(*goredis.ClusterClient); ok && errors.Is(err, ledger.ErrUnavailable) {
		c.ReloadState(ctx)
	}
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

// ClockOffset measures this process's clock against the clock of every
// primary (each master of a Cluster) with TIME, corrected for the round
// trip, and returns the farthest: its offset (the primary's time minus
// ours) and the measurement's margin of error, half the round trip.
func (r *Ledger) ClockOffset(ctx context.Context) (offset, margin time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var mu sync.Mutex
	far := time.Duration(-1 << 63)
	measure := func(ctx context.Context, c *goredis.Client) error {
		sent := wallclock.Now()
		theirs, err := c.Time(ctx).Result()
		if err != nil {
			return err
		}
		rtt := wallclock.Now().Sub(sent)
		o, m := theirs.Sub(sent.Add(rtt/2)), rtt/2
		mu.Lock()
		defer mu.Unlock()
		if o.Abs()-m > far {
			far, offset, margin = o.Abs()-m, o, m
		}
		return nil
	}
	if err := r.forEachPrimary(ctx, measure); err != nil {
		return 0, 0, fmt.Errorf("%w: redis: TIME: %v", ledger.ErrUnavailable, err)
	}
	return offset, margin, nil
}

// forEachPrimary calls f with the client of every primary: the one of a
// single node or Sentinel deployment, each master of a Cluster.
func (r *Ledger) forEachPrimary(ctx context.Context, f func(context.Context, *goredis.Client) error) error {
	switch c := r.client.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, f)
	case *goredis.Client:
		return f(ctx, c)
	}
	return fmt.Errorf("redis client %T", r.client)
}

// Evicting returns the maxmemory-policy of a primary that may evict the
// ledger's keys (any policy but noeviction), "" when none may. An evicted
// consumed entry opens its state again. It reads INFO memory, which the
// ACL user needs +info for; the error of a refusal says NOPERM.
func (r *Ledger) Evicting(ctx context.Context) (policy string, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var mu sync.Mutex
	err = r.forEachPrimary(ctx, func(ctx context.Context, c *goredis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		for line := range strings.Lines(info) {
			if p, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok && p != "noeviction" {
				mu.Lock()
				policy = p
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("redis: INFO memory: %v", err)
	}
	return policy, nil
}
