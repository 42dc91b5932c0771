package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/ledger"
)

// openedLedger is the configured ledger with what the server needs of it
// besides consuming: a reachability check, a name for logs, and closing.
type openedLedger struct {
	ledger.Ledger
	ping  func(context.Context) error
	name  string
	close func() error
}

func (l *openedLedger) Ping(ctx context.Context) error { return l.ping(ctx) }
func (l *openedLedger) Close() error                   { return l.close() }
func (l *openedLedger) String() string                 { return l.name }

func openLedger(cfg Config, log *slog.Logger) (*openedLedger, error) {
	if cfg.Ledger == "embedded" {
		b, err := ledger.OpenBolt(filepath.Join(cfg.DataDir, "ledger.db"))
		if err != nil {
			return nil, err
		}
		return &openedLedger{Ledger: b, ping: func(context.Context) error { return nil }, name: "embedded", close: b.Close}, nil
	}
	redis.SetLogger(redisLogger{log})
	r, err := ledger.NewRedis(ledger.RedisOptions{
		URL: cfg.Ledger, PasswordFile: cfg.LedgerPasswordFile, CAFile: cfg.LedgerCAFile, Timeout: cfg.LedgerTimeout,
	})
	if err != nil {
		return nil, err
	}
	return &openedLedger{Ledger: r, ping: r.Ping, name: "redis", close: r.Close}, nil
}

// redisLogger sends go-redis's own messages (connection pool trouble) to the
// service's log. They name addresses, never credentials.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis", "message", fmt.Sprintf(format, v...))
}
