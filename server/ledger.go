package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/internal/wallclock"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/bolt"
	"github.com/mcp-sealer/sealer/ledger/embedded"
	"github.com/mcp-sealer/sealer/ledger/redis"
)

// openedLedger is the configured ledger with what the server needs of it
// besides consuming: a reachability check, background work (the embedded
// ledger's sweep), a clock to check this replica's against (a shared
// ledger's) or its own judgement of this replica's clock (the embedded
// ledger's), a name for logs, and closing.
type openedLedger struct {
	ledger.Ledger
	ping     func(context.Context) error
	run      func(context.Context) error // nil: none
	clock    clockMeter                  // nil: no clock to measure against
	clockOff func() error                // nil: none of its own
	name     string
	close    func() error
}

func (l *openedLedger) Ping(ctx context.Context) error { return l.ping(ctx) }
func (l *openedLedger) Close() error                   { return l.close() }
func (l *openedLedger) String() string                 { return l.name }

func openLedger(cfg Config, log *slog.Logger, swept func(int)) (*openedLedger, error) {
	if cfg.Ledger == "embedded" {
		l, err := openEmbedded(cfg.DataDir, log)
		if err != nil {
			return nil, err
		}
		sweep := func(ctx context.Context) error {
			return l.SweepEvery(ctx, cfg.SweepInterval, func(n int, err error) {
				swept(n)
				if err != nil {
					log.Error("ledger sweep failed", "cause", err.Error())
				}
			})
		}
		// A broken ledger (a commit failed: the disk full or failing)
		// refuses every one-time open until it has reopened its store:
		// readiness says so.
		ping := func(context.Context) error { return l.Err() }
		return &openedLedger{Ledger: l, ping: ping, run: sweep, clockOff: clockBehind(l, log), name: "embedded", close: l.Close}, nil
	}
	goredis.SetLogger(redisLogger{log})
	r, err := redis.New(redisOptions(cfg))
	if err != nil {
		return nil, err
	}
	return &openedLedger{Ledger: r, ping: r.Ping, clock: r, name: "redis", close: r.Close}, nil
}

// errClockBehind is readiness's answer while this host's clock reads
// before the embedded ledger's last sweep.
var errClockBehind = errors.New("clock behind the ledger's last sweep")

// clockBehind is readiness's question for the embedded ledger l: while the
// clock reads before its last sweep (it stepped back), l refuses every
// consume, and the replica says so, logging each change once.
func clockBehind(l *embedded.Ledger, log *slog.Logger) func() error {
	var was atomic.Bool
	return func() error {
		behind := l.ClockBehind(wallclock.Now()) != nil
		if was.Swap(behind) != behind {
			if behind {
				log.Error("clock behind the ledger's last sweep (stepped back): one-time and latest-only opens refused")
			} else {
				log.Info("clock past the ledger's last sweep again")
			}
		}
		if behind {
			return errClockBehind
		}
		return nil
	}
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
