// Command sealer runs the sealer service and its operator commands.
//
//	sealer serve     run the service (flags or SEALER_* variables)
//	sealer keygen    write a new key file
//	sealer inspect   print the public header of a requestState
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server"
)

const usage = `usage: sealer <command> [flags]

commands:
  serve     run the sealer (sealer serve -h for flags)
  keygen    write a new key file: sealer keygen PATH
  inspect   print the public header of a state: sealer inspect STATE
`

// gcPercent is the default GOGC. A sealer's live heap is small and nearly all
// of its garbage is per call (request, state and payload buffers), so at Go's
// default of 100 it collects every few hundred calls: collecting at 4x the
// live heap instead of 1x gave 30% to 50% more Seal+Open pairs per second
// (BENCHMARKS.md, "Runtime") for about 15 MiB more memory. GOGC, when set,
// still decides.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sealer:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return serve(nil, stderr)
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "keygen":
		if len(args) != 2 {
			return fmt.Errorf("keygen wants one path\n%s", usage)
		}
		return keys.GenerateFile(args[1], time.Now())
	case "inspect":
		if len(args) != 2 {
			return fmt.Errorf("inspect wants one state\n%s", usage)
		}
		h, err := sealer.Inspect(args[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "version %d\nkey version %d\nstate id %s\n", h.Version, h.KeyVersion, h.ID)
		return nil
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// serve turns flags and SEALER_* variables into a server.Config and runs it
// until SIGINT or SIGTERM.
func serve(args []string, stderr io.Writer) error {
	cfg := server.Defaults()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP listen address (REST gateway, /metrics, /healthz, /readyz)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the key file and the embedded ledger")
	fs.StringVar(&cfg.TenantsFile, "tenants", "", "tenants file (YAML): who may call, how they authenticate, their policy; reloaded on SIGHUP")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate (PEM) of both listeners; reloaded when it changes")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "TLS private key (PEM)")
	fs.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "CA bundle (PEM) that verifies client certificates (mTLS)")
	fs.BoolVar(&cfg.Insecure, "insecure", false, "allow listening beyond loopback without TLS and client authentication")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "calls served at once; past it RESOURCE_EXHAUSTED (0: unlimited)")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback address (off when empty)")
	fs.StringVar(&cfg.AuditLog, "audit-log", "", "audit events: empty for the service log, or a file (JSON lines)")
	fs.StringVar(&cfg.Keys, "keys", cfg.Keys, "key source: "+strings.Join(server.KeySources(), ", "))
	fs.DurationVar(&cfg.KeyPoll, "key-poll", cfg.KeyPoll, "how often the key source is read again")
	fs.DurationVar(&cfg.KeyActivation, "key-activation", cfg.KeyActivation, "how old a new key version must be before it seals (0: twice key-poll)")
	v := &cfg.Vault
	fs.StringVar(&v.Addr, "vault-addr", "", "Vault address (default: VAULT_ADDR)")
	fs.StringVar(&v.Namespace, "vault-namespace", "", "Vault namespace (default: VAULT_NAMESPACE)")
	fs.StringVar(&v.CAFile, "vault-ca-file", "", "PEM bundle verifying Vault (default: VAULT_CACERT)")
	fs.StringVar(&v.ClientCert, "vault-client-cert", "", "client certificate for Vault (default: VAULT_CLIENT_CERT)")
	fs.StringVar(&v.ClientKey, "vault-client-key", "", "client key for Vault (default: VAULT_CLIENT_KEY)")
	fs.StringVar(&v.Auth, "vault-auth", "token", "Vault login: token, approle or kubernetes")
	fs.StringVar(&v.AuthMount, "vault-auth-mount", "", "mount of the Vault auth method (default: approle or kubernetes)")
	fs.StringVar(&v.TokenFile, "vault-token-file", "", "token auth: file holding the token (default: VAULT_TOKEN)")
	fs.StringVar(&v.RoleIDFile, "vault-role-id-file", "", "approle auth: file holding the role id")
	fs.StringVar(&v.SecretIDFile, "vault-secret-id-file", "", "approle auth: file holding the secret id")
	fs.StringVar(&v.KubernetesRole, "vault-kubernetes-role", "", "kubernetes auth: Vault role")
	fs.StringVar(&v.KubernetesJWT, "vault-kubernetes-token-file", "", "kubernetes auth: service-account token file (default: the pod's)")
	fs.StringVar(&v.TransitMount, "vault-transit-mount", "transit", "keys=vault-transit: Transit mount")
	fs.StringVar(&v.TransitKey, "vault-transit-key", "", "keys=vault-transit: name of the exportable Transit key")
	fs.StringVar(&v.KVMount, "vault-kv-mount", "secret", "keys=vault-kv: KV v2 mount")
	fs.StringVar(&v.KVPath, "vault-kv-path", "", "keys=vault-kv: path of the secret whose versions are the keys")
	fs.StringVar(&cfg.KeyFile, "key-file", cfg.KeyFile, "key file shared by replicas (default: keys.json in the data directory, generated when missing)")
	fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "one-time ledger: embedded, or a Redis URL (redis://, rediss://, redis+sentinel://, redis+cluster://)")
	fs.DurationVar(&cfg.LedgerTimeout, "ledger-timeout", cfg.LedgerTimeout, "bound on each Redis ledger call")
	fs.StringVar(&cfg.LedgerPasswordFile, "ledger-password-file", cfg.LedgerPasswordFile, "file holding the Redis password (instead of the URL)")
	fs.StringVar(&cfg.LedgerCAFile, "ledger-ca-file", cfg.LedgerCAFile, "PEM bundle verifying a rediss:// server")
	fs.IntVar(&cfg.LedgerReplicas, "ledger-replicas", cfg.LedgerReplicas, "Redis replicas that must acknowledge each consume (WAIT) for it to count (0: none)")
	fs.DurationVar(&cfg.DefaultTTL, "default-ttl", cfg.DefaultTTL, "life of a state sealed without a ttl")
	fs.DurationVar(&cfg.MinTTL, "min-ttl", cfg.MinTTL, "shortest ttl accepted")
	fs.DurationVar(&cfg.MaxTTL, "max-ttl", cfg.MaxTTL, "longest ttl accepted; longer is refused, not clamped")
	fs.DurationVar(&cfg.Skew, "skew", cfg.Skew, "clock skew allowed past a state's expiry")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "how long in-flight calls may drain on SIGTERM")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", cfg.SweepInterval, "how often expired ledger entries are deleted")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	if err := fromEnv(fs); err != nil {
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch *logFormat {
	case "text":
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, opts))
	case "json":
		cfg.Logger = slog.New(slog.NewJSONHandler(stderr, opts))
	default:
		return fmt.Errorf("log-format %q: want text or json", *logFormat)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, cfg)
}

// fromEnv sets every flag not given on the command line from its SEALER_*
// variable: --grpc-addr from SEALER_GRPC_ADDR, and so on.
func fromEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SEALER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %v", name, e)
			}
		}
	})
	return err
}
