package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/bolt"
	"github.com/mcp-sealer/sealer/ledger/redis"
)

// openedLedger is the configured ledger with what the server needs of it
// besides consuming: a reachability check, background work (the embedded
// ledger's sweep), a name for logs, and closing.
type openedLedger struct {
	ledger.Ledger
	ping  func(context.Context) error
	run   func(context.Context) error // nil: none
	name  string
	close func() error
}

func (l *openedLedger) Ping(ctx context.Context) error { return l.ping(ctx) }
func (l *openedLedger) Close() error                   { return l.close() }
func (l *openedLedger) String() string                 { return l.name }

func openLedger(cfg Config, log *slog.Logger, swept func(int)) (*openedLedger, error) {
	if cfg.Ledger == "embedded" {
		b, err := bolt.Open(filepath.Join(cfg.DataDir, "ledger.db"))
		if err != nil {
			return nil, err
		}
		sweep := func(ctx context.Context) error {
			return b.SweepEvery(ctx, cfg.SweepInterval, func(n int, err error) {
				swept(n)
				if err != nil {
					log.Error("ledger sweep failed", "cause", err.Error())
				}
			})
		}
		return &openedLedger{Ledger: b, ping: func(context.Context) error { return nil }, run: sweep, name: "embedded", close: b.Close}, nil
	}
	goredis.SetLogger(redisLogger{log})
	r, err := redis.New(redisOptions(cfg))
	if err != nil {
		return nil, err
	}
	return &openedLedger{Ledger: r, ping: r.Ping, name: "redis", close: r.Close}, nil
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
