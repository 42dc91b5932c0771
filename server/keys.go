package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/keys/vault"
)

// VaultConfig says how to reach Vault and where the keys are. Empty fields
// fall back to the standard VAULT_* variables (VAULT_ADDR, VAULT_CACERT,
// VAULT_CLIENT_CERT, VAULT_CLIENT_KEY, VAULT_NAMESPACE, VAULT_TOKEN).
type VaultConfig struct {
	Addr, Namespace               string
	CAFile, ClientCert, ClientKey string
	Auth                          string // token, approle or kubernetes
	AuthMount                     string // the auth method's mount, its type by default
	TokenFile                     string // token auth: a file instead of VAULT_TOKEN
	RoleIDFile, SecretIDFile      string // approle auth
	KubernetesRole, KubernetesJWT string // kubernetes auth: role, service-account token file
	TransitMount, TransitKey      string // keys=vault-transit, vault-transit-exportable
	// TransitPrevious (keys=vault-transit) names the exportable key a fleet
	// moves from: its versions still open and seal until the new key's
	// versions pass them (vault.Transit.Previous).
	TransitPrevious string
	KVMount, KVPath string // keys=vault-kv
}

// keySource is a started key source: the refresher readers use, and the
// tasks that keep it fresh.
type keySource struct {
	*keys.Refresher
	tasks []func(context.Context) error
	name  string
	login *vault.Login // nil but for Vault
}

// openedSource is a key source as its opener builds it: the source, the
// tasks that keep it usable, the handler of its failed loads, and its Vault
// login if it has one.
type openedSource struct {
	src    keys.Source
	tasks  []func(context.Context) error
	report func(error)
	login  *vault.Login
	// tried is closed once the first login was tried: the first load waits
	// for it, so that it does not run without a token and ask for a second
	// login. Nil: no login to wait for.
	tried <-chan struct{}
}

// keySources are the key sources --keys names, in the one table that both
// Validate and openKeys read. check reports what the source's part of the
// configuration lacks; open builds the source, with the tasks that keep it
// usable and the handler of its failed loads.
var keySources = map[string]struct {
	check func(Config) error
	open  func(context.Context, Config, *slog.Logger) (openedSource, error)
}{
	"file":                     {check: func(Config) error { return nil }, open: openKeyFile},
	"vault-transit":            {check: checkTransit, open: openVault},
	"vault-transit-exportable": {check: checkTransit, open: openVault},
	"vault-kv":                 {check: needs("vault-kv-path", func(c Config) string { return c.Vault.KVPath }), open: openVault},
}

// checkTransit checks the Transit modes' flags: a key, and a previous key
// only to move from it to another.
func checkTransit(c Config) error {
	if err := needs("vault-transit-key", func(c Config) string { return c.Vault.TransitKey })(c); err != nil {
		return err
	}
	switch p := c.Vault.TransitPrevious; {
	case p == "":
	case c.Keys != "vault-transit":
		return fmt.Errorf("keys %s: --vault-transit-previous-key is for --keys vault-transit only", c.Keys)
	case p == c.Vault.TransitKey:
		return errors.New("keys vault-transit: --vault-transit-previous-key names the key itself; it names the exportable key moved from")
	}
	return nil
}

// KeySources returns the names --keys accepts.
func KeySources() []string { return slices.Sorted(maps.Keys(keySources)) }

// needs checks that a key source's flag is set.
func needs(flag string, value func(Config) string) func(Config) error {
	return func(c Config) error {
		if value(c) == "" {
			return fmt.Errorf("keys %s: set --%s", c.Keys, flag)
		}
		return nil
	}
}

// openKeys builds the configured key source. The key file is loaded at once
// (a broken one is configuration: fatal). Vault is not waited for: its
// login and first load run in the background, so the sealer listens and its
// probes answer (not ready) while Vault is slow or down, and readiness turns
// true when the first ring loads.
func openKeys(ctx context.Context, cfg Config, log *slog.Logger, tr *tracing) (*keySource, error) {
	kind, ok := keySources[cfg.Keys]
	if !ok {
		return nil, fmt.Errorf("keys %q: want one of %s", cfg.Keys, strings.Join(KeySources(), ", "))
	}
	o, err := kind.open(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	ks := &keySource{name: cfg.Keys, Refresher: keys.NewRefresher(tr.keys(o.src), cfg.KeyPoll, o.report), login: o.login}
	ks.SetLog(log) // versions loaded, activated, retired, and failed loads
	if cfg.Keys == "file" {
		if err := ks.Refresh(ctx); err != nil {
			return nil, err
		}
	}
	refresh := ks.Run
	if o.tried != nil {
		refresh = func(ctx context.Context) error {
			select {
			case <-o.tried:
			case <-ctx.Done():
				return nil
			}
			return ks.Run(ctx)
		}
	}
	ks.tasks = append(o.tasks, refresh)
	return ks, nil
}

// openKeyFile opens the key file source.
func openKeyFile(_ context.Context, cfg Config, log *slog.Logger) (openedSource, error) {
	path, err := keyFile(cfg, log)
	if err != nil {
		return openedSource{}, err
	}
	return openedSource{src: keys.File{Path: path, Activation: cfg.activation()}}, nil
}

// openVault opens a Vault source (Transit or KV v2) with the login that
// keeps its client authenticated: logged in again when Vault denies it.
func openVault(ctx context.Context, cfg Config, log *slog.Logger) (openedSource, error) {
	login, err := vaultLogin(cfg.Vault, log)
	if err != nil {
		return openedSource{}, err
	}
	client := login.Client
	var src keys.Source
	switch v := cfg.Vault; cfg.Keys {
	case "vault-transit":
		src = &vault.Transit{Client: client, Mount: v.TransitMount, Name: v.TransitKey, Previous: v.TransitPrevious, Activation: cfg.activation()}
		if v.TransitPrevious != "" {
			log.Warn("moving from an exportable Transit key: its versions still open and seal until the new key's versions pass them; "+
				"retire them with the new key's min_decryption_version (docs/OPERATIONS.md, Keys from Vault)",
				"key", v.TransitKey, "previous_key", v.TransitPrevious)
		}
	case "vault-transit-exportable":
		src = &vault.TransitExport{Client: client, Mount: v.TransitMount, Name: v.TransitKey, Activation: cfg.activation()}
		log.Warn("the Transit key is exportable: every replica reads the master key out of Vault; "+
			"move to a non-exportable key with --keys vault-transit (docs/OPERATIONS.md, Keys from Vault)", "key", v.TransitKey)
	default:
		src = &vault.KV{Client: client, Mount: v.KVMount, Path: v.KVPath, Activation: cfg.activation()}
	}
	report := func(err error) { // the refresher logs the failure
		if errors.Is(err, vault.ErrDenied) {
			login.Relogin()
		}
	}
	tasks := []func(context.Context) error{}
	if cfg.Vault.TokenFile != "" {
		tasks = append(tasks, func(ctx context.Context) error {
			return onChange(ctx, cfg.Vault.TokenFile, time.Second, func() {
				log.Info("vault token file changed; logging in with it")
				login.Relogin()
			})
		})
	}
	tried := make(chan struct{})
	run := func(ctx context.Context) error {
		first, err := login.Login(ctx)
		close(tried)
		if err != nil {
			log.Warn("vault login failed; retrying", "cause", err.Error())
		}
		return login.Run(ctx, first)
	}
	return openedSource{src: src, tasks: append(tasks, run), report: report, login: login, tried: tried}, nil
}

// keyFile returns the configured key file, or the data directory's,
// generating that one when missing.
func keyFile(cfg Config, log *slog.Logger) (string, error) {
	if cfg.KeyFile != "" {
		return cfg.KeyFile, nil
	}
	path := filepath.Join(cfg.DataDir, "keys.json")
	if !(keys.File{Path: path}).Exists() {
		if err := keys.GenerateFile(path, time.Now()); err != nil {
			return "", err
		}
		log.Info("generated a new key file", "path", path)
	}
	return path, nil
}

// vaultLogin maps c to vault.Options: the Vault client and the login that
// keeps it authenticated are built in keys/vault.
func vaultLogin(c VaultConfig, log *slog.Logger) (*vault.Login, error) {
	return vault.NewLogin(vault.Options{
		Addr: c.Addr, Namespace: c.Namespace,
		CAFile: c.CAFile, ClientCert: c.ClientCert, ClientKey: c.ClientKey,
		Auth: c.Auth, AuthMount: c.AuthMount, TokenFile: c.TokenFile,
		RoleIDFile: c.RoleIDFile, SecretIDFile: c.SecretIDFile,
		KubernetesRole: c.KubernetesRole, KubernetesJWT: c.KubernetesJWT,
		Report: func(err error) { log.Warn("vault login", "cause", err.Error()) },
		Info:   func(msg string, args ...any) { log.Info(msg, args...) },
	})
}

// onChange calls changed whenever the file at path changes (its modification
// time or size), checking every interval, until ctx is done.
func onChange(ctx context.Context, path string, every time.Duration, changed func()) error {
	last := fileStamp(path)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
		if now := fileStamp(path); now != last {
			last = now
			changed()
		}
	}
}
