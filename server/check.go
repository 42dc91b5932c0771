package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mcp-sealer/sealer/internal/netaddr"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/keys/vault"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/server/internal/metrics"
)

// Check validates cfg as New would, without serving: the flags, the TLS
// files, the tenants file, one load of the key source (a Vault login and
// read included) and, for a Redis ledger, what a one-time open and a flow
// run there (checkLedger), bounded by ctx. It writes nothing but the Redis
// probe's two short-lived keys. It returns every problem at once, joined,
// or nil.
func Check(ctx context.Context, cfg Config) error {
	errs := []error{cfg.Validate()}
	discard := slog.New(slog.DiscardHandler)
	if _, _, err := newAuthenticator(cfg, discard, metrics.New(time.Second)); err != nil {
		errs = append(errs, err)
	}
	if kind, ok := keySources[cfg.Keys]; ok && kind.check(cfg) == nil {
		errs = append(errs, checkKeys(ctx, cfg, discard))
	}
	if redis.IsURL(cfg.Ledger) {
		errs = append(errs, checkLedger(ctx, cfg))
	}
	if cfg.AuditLog != "" {
		if st, err := os.Stat(filepath.Dir(cfg.AuditLog)); err != nil || !st.IsDir() {
			errs = append(errs, fmt.Errorf("audit-log %s: its directory does not exist", cfg.AuditLog))
		}
	}
	return errors.Join(errs...)
}

// checkLedger connects to the Redis ledger with the credentials and CA
// given and runs what serving needs of it (probeLedger): a wrong password,
// a server certificate the CA does not verify, an ACL short of the scripts'
// commands are each named. The probe leaves three keys that no state or flow
// can have, which expire within seconds.
func checkLedger(ctx context.Context, cfg Config) error {
	r, err := redis.New(redisOptions(cfg))
	if err != nil {
		return err
	}
	defer r.Close()
	// Flows too: any tenant may open a latest-only flow, so an ACL without
	// their commands fails those opens.
	return probeLedger(ctx, r, true)
}

// checkKeys loads the key source once. A missing default key file is no
// problem: serve generates it.
func checkKeys(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.Keys == "file" {
		f := keys.File{Path: cfg.KeyFile, Activation: cfg.activation()}
		if f.Path == "" {
			if f.Path = filepath.Join(cfg.DataDir, "keys.json"); !f.Exists() {
				return nil
			}
		}
		_, err := f.Load(ctx)
		return err
	}
	o, err := keySources[cfg.Keys].open(ctx, cfg, log)
	if err != nil {
		return err
	}
	if o.login != nil {
		secret, err := o.login.Login(ctx)
		if err != nil {
			return err
		}
		if _, given := o.login.Method.(vault.TokenFile); o.login.Method != nil && !given && secret != nil {
			// The check's own login (AppRole, Kubernetes) made a token: revoke
			// it when done, so that checks leave no tokens behind.
			defer o.login.Client.Auth().Token().RevokeSelfWithContext(context.WithoutCancel(ctx), "")
		}
		if err := checkVault(ctx, cfg, o.login.Client); err != nil {
			return err
		}
	}
	if _, err := o.src.Load(ctx); err != nil {
		return fmt.Errorf("keys %s: %v", cfg.Keys, err)
	}
	return nil
}

// Warnings lists what the configuration allows but an operator most likely
// did not mean: a sealer others can reach is one replica of several, and
// replicas must share their keys and their ledger.
func (c *Config) Warnings() []string {
	var w []string
	if c.Ledger != "embedded" && !c.ClockCheck {
		w = append(w, "CLOCKS UNCHECKED (--clock-check=false): a replica whose clock runs behind the others' by more than "+
			"the ledger's margin can open a state another replica consumed")
	}
	if netaddr.IsLoopback(c.GRPCAddr) && netaddr.IsLoopback(c.HTTPAddr) {
		return w
	}
	if c.Keys == "file" && c.KeyFile == "" {
		w = append(w, "REPLICAS WILL NOT SHARE KEYS: this replica seals with the key file it generated in its own data directory, "+
			"so no other replica can open its states; give every replica the same --key-file, or use Vault (--keys vault-transit)")
	}
	if c.Ledger == "embedded" {
		w = append(w, "REPLICAS WILL NOT SHARE CONSUMPTIONS: the embedded ledger is this replica's own, "+
			"so a one-time state can open once on every replica; use a Redis ledger (--ledger redis://...)")
	}
	return w
}
