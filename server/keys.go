package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"
	"github.com/hashicorp/vault/api/auth/kubernetes"

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
	TransitMount, TransitKey      string // keys=vault-transit
	KVMount, KVPath               string // keys=vault-kv
}

// keySource is a started key source: the refresher readers use, and the
// tasks that keep it fresh.
type keySource struct {
	*keys.Refresher
	tasks []func(context.Context) error
	name  string
}

// openKeys builds the configured key source and loads a first ring. A source
// that cannot load yet (Vault down at start) is not fatal: the refresher
// keeps trying and readiness stays false until it succeeds.
func openKeys(ctx context.Context, cfg Config, log *slog.Logger) (*keySource, error) {
	report := func(err error) { log.Warn("key refresh failed", "cause", err.Error()) }
	ks := &keySource{name: cfg.Keys}
	var src keys.Source
	switch cfg.Keys {
	case "file":
		path, err := keyFile(cfg, log)
		if err != nil {
			return nil, err
		}
		src = keys.File{Path: path}
	case "vault-transit", "vault-kv":
		client, login, err := vaultClient(cfg.Vault, log)
		if err != nil {
			return nil, err
		}
		if cfg.Keys == "vault-transit" {
			src = &vault.Transit{Client: client, Mount: cfg.Vault.TransitMount, Name: cfg.Vault.TransitKey, Activation: cfg.activation()}
		} else {
			src = &vault.KV{Client: client, Mount: cfg.Vault.KVMount, Path: cfg.Vault.KVPath, Activation: cfg.activation()}
		}
		report = func(err error) {
			log.Warn("key refresh failed; serving with the last good keys", "cause", err.Error())
			if errors.Is(err, vault.ErrDenied) {
				login.Relogin()
			}
		}
		first, err := login.Login(ctx)
		if err != nil {
			log.Warn("vault login failed; retrying", "cause", err.Error())
		}
		ks.tasks = append(ks.tasks, func(ctx context.Context) error { return login.Run(ctx, first) })
	default:
		return nil, fmt.Errorf("keys %q: want file, vault-transit or vault-kv", cfg.Keys)
	}
	ks.Refresher = keys.NewRefresher(src, cfg.KeyPoll, report)
	if err := ks.Refresh(ctx); err != nil && cfg.Keys == "file" {
		return nil, err // a broken key file is a configuration error
	}
	ks.tasks = append(ks.tasks, ks.Run)
	return ks, nil
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

// vaultClient returns a Vault client for c and the login that keeps it
// authenticated.
func vaultClient(c VaultConfig, log *slog.Logger) (*vaultapi.Client, *vault.Login, error) {
	vc := vaultapi.DefaultConfig() // reads the VAULT_* variables
	if vc.Error != nil {
		return nil, nil, fmt.Errorf("vault: %v", vc.Error)
	}
	if c.Addr != "" {
		vc.Address = c.Addr
	}
	if c.CAFile != "" || c.ClientCert != "" || c.ClientKey != "" {
		if err := vc.ConfigureTLS(&vaultapi.TLSConfig{CACert: c.CAFile, ClientCert: c.ClientCert, ClientKey: c.ClientKey}); err != nil {
			return nil, nil, fmt.Errorf("vault TLS: %v", err)
		}
	}
	vc.MaxRetries = 1
	vc.Timeout = 10 * time.Second
	client, err := vaultapi.NewClient(vc)
	if err != nil {
		return nil, nil, fmt.Errorf("vault: %v", err)
	}
	if c.Namespace != "" {
		client.SetNamespace(c.Namespace)
	}
	login := &vault.Login{Client: client, Report: func(err error) { log.Warn("vault login", "cause", err.Error()) }}
	switch c.Auth {
	case "", "token":
		if c.TokenFile != "" {
			token, err := readSecretFile(c.TokenFile)
			if err != nil {
				return nil, nil, fmt.Errorf("vault token file: %v", err)
			}
			client.SetToken(token)
		}
		if client.Token() == "" {
			return nil, nil, errors.New("vault token auth: set VAULT_TOKEN or --vault-token-file")
		}
	case "approle":
		roleID, err := readSecretFile(c.RoleIDFile)
		if err != nil {
			return nil, nil, fmt.Errorf("vault approle role id file: %v", err)
		}
		m, err := approle.NewAppRoleAuth(roleID, &approle.SecretID{FromFile: c.SecretIDFile}, approle.WithMountPath(cmp.Or(c.AuthMount, "approle")))
		if err != nil {
			return nil, nil, fmt.Errorf("vault approle: %v", err)
		}
		login.Method = m
	case "kubernetes":
		opts := []kubernetes.LoginOption{kubernetes.WithMountPath(cmp.Or(c.AuthMount, "kubernetes"))}
		if c.KubernetesJWT != "" { // else the pod's own service-account token
			opts = append(opts, kubernetes.WithServiceAccountTokenPath(c.KubernetesJWT))
		}
		m, err := kubernetes.NewKubernetesAuth(c.KubernetesRole, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("vault kubernetes: %v", err)
		}
		login.Method = m
	default:
		return nil, nil, fmt.Errorf("vault-auth %q: want token, approle or kubernetes", c.Auth)
	}
	return client, login, nil
}

func readSecretFile(path string) (string, error) {
	if path == "" {
		return "", errors.New("no file given")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
