package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/bolt"
	"github.com/mcp-sealer/sealer/ledger/embedded"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/sealer"
)

// A servedLedger is the configured ledger with what the server needs of it
// besides consuming: a reachability check for readiness, a name for logs,
// closing. Its other parts only some ledgers have, and the server asks for
// them by interface: background work (a runner: the embedded ledger's
// sweep), a clock to measure this replica's against (a clockMeter: a
// shared ledger's), its own judgement of this replica's clock (a
// clockJudge: the embedded ledger's), recorded outcomes (ledger.Recorder).
type servedLedger interface {
	ledger.Ledger
	Ping(context.Context) error
	String() string
	Close() error
}

// A runner is a part with background work, run until ctx ends.
type runner interface {
	run(ctx context.Context) error
}

// A clockJudge says why this replica's clock cannot be trusted, nil when
// it can.
type clockJudge interface {
	clockOff() error
}

// noJudge is the clockJudge of a replica whose clock nothing checks.
type noJudge struct{}

func (noJudge) clockOff() error { return nil }

// What each ledger is asked for by interface, held at compile time: a
// method renamed would otherwise turn its part off without a word.
var (
	_ runner          = (*localLedger)(nil)
	_ clockJudge      = (*localLedger)(nil)
	_ ledger.Recorder = (*localLedger)(nil)
	_ clockMeter      = (*sharedLedger)(nil)
	_ ledger.Recorder = (*sharedLedger)(nil)
)

func openLedger(cfg Config, log *slog.Logger, swept func(int)) (servedLedger, error) {
	if cfg.Ledger == "embedded" {
		l, err := openEmbedded(cfg.DataDir, log)
		if err != nil {
			return nil, err
		}
		return &localLedger{Ledger: l, sweepEvery: cfg.SweepInterval, swept: swept, log: log}, nil
	}
	goredis.SetLogger(redisLogger{log})
	r, err := redis.New(redisOptions(cfg))
	if err != nil {
		return nil, err
	}
	return &sharedLedger{Ledger: r}, nil
}

// localLedger is the embedded ledger as the server runs it.
type localLedger struct {
	*embedded.Ledger
	sweepEvery time.Duration
	swept      func(int)
	log        *slog.Logger
	behind     atomic.Bool // the clock read before the last sweep at the last clockOff
}

// Ping reports a broken ledger (a commit failed: the disk full or failing),
// which refuses every one-time open until it has reopened its store:
// readiness says so.
func (l *localLedger) Ping(context.Context) error { return l.Err() }

func (l *localLedger) String() string { return "embedded" }

// run sweeps the expired entries every sweepEvery.
func (l *localLedger) run(ctx context.Context) error {
	return l.SweepEvery(ctx, l.sweepEvery, func(n int, err error) {
		l.swept(n)
		if err != nil {
			l.log.Error("ledger sweep failed", "cause", err.Error())
		}
	})
}

// errClockBehind is readiness's answer while this host's clock reads
// before the embedded ledger's last sweep.
var errClockBehind = errors.New("clock behind the ledger's last sweep")

// clockOff is errClockBehind while the clock reads before the ledger's last
// sweep (it stepped back): the ledger then refuses every consume, and the
// replica says so, logging each change once.
func (l *localLedger) clockOff() error {
	behind := l.ClockBehind(wallclock.Now()) != nil
	if l.behind.Swap(behind) != behind {
		if behind {
			l.log.Error("clock behind the ledger's last sweep (stepped back): one-time and latest-only opens refused")
		} else {
			l.log.Info("clock past the ledger's last sweep again")
		}
	}
	if behind {
		return errClockBehind
	}
	return nil
}

// sharedLedger is the Redis ledger as the server runs it. Its clock is the
// one every replica's is measured against (clockMeter).
type sharedLedger struct {
	*redis.Ledger
	accepted atomic.Bool // a probe passed once
}

func (l *sharedLedger) String() string { return "redis" }

// probeTenant is the tenant of the ledger probe's keys. No tenants file can
// name it (a tenant name is [a-z0-9._-]), so a probe key is never a real
// state's or flow's; it expires probeLife after it was written.
const (
	probeTenant = "sealer probe"
	probeLife   = 10 * time.Second
)

// errLedgerRefused is readiness's answer while the Redis ledger refuses this
// replica (its password, its TLS verification, its ACL) and has not once
// accepted what an open needs since the start.
var errLedgerRefused = errors.New("ledger refuses this replica (password, TLS or ACL)")

// errLedgerEvicts is readiness's answer while the Redis ledger may evict
// its keys before they expire.
var errLedgerEvicts = errors.New("ledger: Redis may evict the ledger's keys")

// probeLedger runs once what the ledger's calls run: TIME (the clock check)
// and the consume script of a one-time open, and with flows the advance
// script of a latest-only flow and the scripts of recorded outcomes, each
// on a fresh key of probeTenant; and, where INFO is allowed, that no primary
// evicts keys (errLedgerEvicts). PING
// alone would pass an ACL that lacks the scripts' commands. A refusal (see
// ledgerRefusal) is wrapped in errLedgerRefused; the error names the call
// that failed, never a credential.
func probeLedger(ctx context.Context, r *redis.Ledger, flows bool) error {
	offset, _, err := r.ClockOffset(ctx)
	if err != nil {
		return ledgerProblem("the clock check (TIME)", err)
	}
	// INFO may be refused (the least-privilege ACL has no +info) or renamed
	// (a managed Redis): then the policy is the operator's to check.
	if policy, err := r.Evicting(ctx); err == nil && policy != "" {
		return fmt.Errorf("%w (maxmemory-policy %s): an evicted consumed entry opens its state again; set maxmemory-policy noeviction", errLedgerEvicts, policy)
	}
	// The deadline is judged on Redis's clock: ours corrected by the offset.
	until := wallclock.Now().Add(offset + probeLife)
	var id sealer.StateID
	rand.Read(id[:])
	if err := r.Consume(ctx, probeTenant, id, until); err != nil && !errors.Is(err, ledger.ErrConsumed) {
		return ledgerProblem("a one-time open (the consume script: EVALSHA, EVAL, TIME, SET)", err)
	}
	if !flows {
		return nil
	}
	var flow sealer.FlowID
	rand.Read(flow[:])
	if err := r.Advance(ctx, probeTenant, flow, 1, until); err != nil && !errors.Is(err, ledger.ErrConsumed) {
		return ledgerProblem("a latest-only flow open (the advance script: EVALSHA, EVAL, TIME, GET, PTTL, SET on sealer:v1:flow:*)", err)
	}
	rand.Read(id[:])
	e := ledger.Entry{ID: id}
	if err := r.Claim(ctx, probeTenant, e, until, time.Second); err != nil && !errors.Is(err, ledger.ErrConsumed) {
		return ledgerProblem("a recording open (the claim script: EVALSHA, EVAL, TIME, SET)", err)
	}
	if err := r.Record(ctx, probeTenant, e, nil); err != nil && !errors.Is(err, ledger.ErrConsumed) && !errors.Is(err, ledger.ErrGone) {
		return ledgerProblem("recording an outcome (the record script: EVALSHA, EVAL, GET, SET on sealer:v1:consumed:*)", err)
	}
	if _, err := r.Outcome(ctx, probeTenant, e); err != nil && !errors.Is(err, ledger.ErrConsumed) && !errors.Is(err, ledger.ErrGone) {
		return ledgerProblem("reading an outcome (the outcome script: EVALSHA, EVAL, TIME, GET on sealer:v1:consumed:*)", err)
	}
	return nil
}

// ledgerProblem says which call failed and, for a refusal, what to fix.
func ledgerProblem(call string, err error) error {
	if why := ledgerRefusal(err); why != "" {
		return fmt.Errorf("%w: %s would fail: %s: %v", errLedgerRefused, call, why, err)
	}
	return fmt.Errorf("ledger: redis: %s failed: %v", call, err)
}

// ledgerRefusal names what Redis refuses in err, a configuration problem
// rather than an outage: "" when it is neither. go-redis and Redis report
// these as text only.
func ledgerRefusal(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "invalid password"):
		return "Redis refused the user or password (the URL's user, --ledger-password-file)"
	case strings.Contains(msg, "NOPERM"), strings.Contains(msg, "user executing the script can't run"):
		return "the ACL user lacks a permission the ledger needs (docs/OPERATIONS.md, \"Redis ledger\")"
	case strings.Contains(msg, "x509:"), strings.Contains(msg, "tls:"):
		return "TLS: the server's certificate does not verify (--ledger-ca-file names the CA that signed it; the URL's host must be among its SANs)"
	}
	return ""
}

// Ping is readiness's check of a Redis ledger: probeLedger (one-time opens
// only: flows' permissions are documented as optional) until it succeeds
// once, then PING. A replica whose ledger refuses it from the start (a
// wrong password file, a private CA not given, an ACL short of the consume
// script) is then not ready, so a rollout with a bad configuration stops at
// its first replica; a refusal that begins later (a password rotated in
// Redis first) is treated as an outage, as PING sees it, so that it does
// not take every replica out of rotation at once.
func (l *sharedLedger) Ping(ctx context.Context) error {
	if l.accepted.Load() {
		return l.Ledger.Ping(ctx)
	}
	if err := probeLedger(ctx, l.Ledger, false); err != nil {
		return err
	}
	l.accepted.Store(true)
	return nil
}

// openEmbedded opens the embedded ledger in dataDir/ledger. A ledger file
// of an earlier release (dataDir/ledger.db, bbolt) is imported into it
// first, once: every consumed state and every flow's round stays, and the
// old file is renamed ledger.db.imported, kept for the operator to delete.
// An import cut short by a crash runs again whole at the next start.
func openEmbedded(dataDir string, log *slog.Logger) (*embedded.Ledger, error) {
	l, err := embedded.Open(filepath.Join(dataDir, "ledger"), log)
	if err != nil {
		return nil, err
	}
	old := filepath.Join(dataDir, "ledger.db")
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	n, err := l.Import(func(put func(bool, []byte, []byte) error) error { return bolt.Each(old, put) })
	if err == nil {
		err = os.Rename(old, old+".imported")
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("ledger: import %s: %v", old, err)
	}
	log.Info("ledger imported", "from", old, "entries", n, "kept as", old+".imported")
	return l, nil
}

// redisOptions are the Redis ledger's options of cfg.
func redisOptions(cfg Config) redis.Options {
	return redis.Options{
		URL: cfg.Ledger, PasswordFile: cfg.LedgerPasswordFile, CAFile: cfg.LedgerCAFile, Timeout: cfg.LedgerTimeout,
		Replicas: cfg.LedgerReplicas,
	}
}

// redisLogger sends go-redis's own messages (connection pool trouble) to the
// service's log. They name addresses, never credentials.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis", "message", fmt.Sprintf(format, v...))
}
