package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcp-sealer/sealer/server"
)

// defineServeFlags defines serve's flags on fs, writing into cfg, and
// returns the log flags, which are not part of server.Config.
func defineServeFlags(fs *flag.FlagSet, cfg *server.Config) (logFormat, logLevel *string) {
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP listen address (REST gateway, /metrics, /livez, /readyz)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the generated key file and the embedded ledger")
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
	fs.StringVar(&cfg.KeyFile, "key-file", cfg.KeyFile, "key file shared by replicas (default: keys.json in the data directory, generated when missing)")
	v := &cfg.Vault
	fs.StringVar(&v.Addr, "vault-addr", "", "Vault address (default: VAULT_ADDR)")
	fs.StringVar(&v.Namespace, "vault-namespace", "", "Vault namespace (default: VAULT_NAMESPACE)")
	fs.StringVar(&v.CAFile, "vault-ca-file", "", "PEM bundle verifying Vault (default: VAULT_CACERT)")
	fs.StringVar(&v.ClientCert, "vault-client-cert", "", "client certificate for Vault (default: VAULT_CLIENT_CERT)")
	fs.StringVar(&v.ClientKey, "vault-client-key", "", "client key for Vault (default: VAULT_CLIENT_KEY)")
	fs.StringVar(&v.Auth, "vault-auth", "token", "Vault login: token, approle or kubernetes")
	fs.StringVar(&v.AuthMount, "vault-auth-mount", "", "mount of the Vault auth method (default: approle or kubernetes)")
	fs.StringVar(&v.TokenFile, "vault-token-file", "", "token auth: file holding the token, read again when it changes or Vault denies it (default: VAULT_TOKEN)")
	fs.StringVar(&v.RoleIDFile, "vault-role-id-file", "", "approle auth: file holding the role id")
	fs.StringVar(&v.SecretIDFile, "vault-secret-id-file", "", "approle auth: file holding the secret id")
	fs.StringVar(&v.KubernetesRole, "vault-kubernetes-role", "", "kubernetes auth: Vault role")
	fs.StringVar(&v.KubernetesJWT, "vault-kubernetes-token-file", "", "kubernetes auth: service-account token file (default: the pod's)")
	fs.StringVar(&v.TransitMount, "vault-transit-mount", "transit", "keys=vault-transit, vault-transit-exportable: Transit mount")
	fs.StringVar(&v.TransitKey, "vault-transit-key", "", "keys=vault-transit: name of the Transit key, created non-exportable (keys=vault-transit-exportable: an exportable one)")
	fs.StringVar(&v.TransitPrevious, "vault-transit-previous-key", "", "keys=vault-transit: the exportable key moved from, whose versions still open and seal until the new key's pass them")
	fs.StringVar(&v.KVMount, "vault-kv-mount", "secret", "keys=vault-kv: KV v2 mount")
	fs.StringVar(&v.KVPath, "vault-kv-path", "", "keys=vault-kv: path of the secret whose versions are the keys")
	fs.StringVar(&cfg.Ledger, "ledger", cfg.Ledger, "one-time ledger: embedded, or a Redis URL (redis://, rediss://, redis+sentinel://, redis+cluster://)")
	fs.DurationVar(&cfg.LedgerTimeout, "ledger-timeout", cfg.LedgerTimeout, "bound on each Redis ledger call")
	fs.StringVar(&cfg.LedgerPasswordFile, "ledger-password-file", cfg.LedgerPasswordFile, "file holding the Redis password (instead of the URL)")
	fs.StringVar(&cfg.LedgerCAFile, "ledger-ca-file", cfg.LedgerCAFile, "PEM bundle verifying a rediss:// server")
	fs.IntVar(&cfg.LedgerReplicas, "ledger-replicas", cfg.LedgerReplicas, "Redis replicas that must acknowledge each consume (WAIT) for it to count (0: none)")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", cfg.SweepInterval, "how often expired embedded-ledger entries are deleted")
	fs.DurationVar(&cfg.DefaultTTL, "default-ttl", cfg.DefaultTTL, "life of a state sealed without a ttl")
	fs.DurationVar(&cfg.FlowTTL, "flow-ttl", cfg.FlowTTL, "life of a flow (a multi-round request) from its first round; no state of it opens after that")
	fs.IntVar(&cfg.MaxRounds, "max-rounds", cfg.MaxRounds, "most rounds of one flow")
	fs.IntVar(&cfg.MaxPayload, "max-payload", cfg.MaxPayload, "largest payload sealed where a tenant's policy is silent, in bytes (the default keeps states within 65,536 characters; at most 65536)")
	fs.IntVar(&cfg.OutcomeLimit, "outcome-limit", cfg.OutcomeLimit, "largest recorded outcome kept for retries of a consumed state, in bytes (0: keep none; at most 1 MiB)")
	fs.DurationVar(&cfg.OutcomeWait, "outcome-wait", cfg.OutcomeWait, "how long after a recording open a retry of its state waits for the outcome; after it, with none recorded, the retry is refused")
	fs.DurationVar(&cfg.MinTTL, "min-ttl", cfg.MinTTL, "shortest ttl accepted")
	fs.DurationVar(&cfg.MaxTTL, "max-ttl", cfg.MaxTTL, "longest ttl accepted; longer is refused, not clamped")
	fs.DurationVar(&cfg.Skew, "skew", cfg.Skew, "clock skew allowed past a state's expiry (at most 1m)")
	fs.BoolVar(&cfg.ClockCheck, "clock-check", cfg.ClockCheck, "with a Redis ledger, refuse one-time and latest-only opens and report unready while this replica's clock is beyond max(skew/2, 100ms) from Redis's")
	fs.BoolVar(&cfg.ReadyNeedsLedger, "ready-requires-ledger", false, "make a reachable ledger a condition of readiness (by default only keys are: without the ledger only one-time opens fail)")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", cfg.ShutdownDelay, "on SIGTERM, how long to go on serving after readiness turned false, before refusing connections")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", cfg.ShutdownGrace, "then, how long in-flight calls may drain")
	logFormat = fs.String("log-format", "text", "log format: text or json")
	logLevel = fs.String("log-level", "info", "log level: debug, info, warn, error")
	return logFormat, logLevel
}

// serveGroups orders serve's flags for --help. Every flag is in exactly one
// group (TestServeHelp_GroupsEveryFlag).
var serveGroups = []struct {
	title string
	flags []string
}{
	{"Listening and callers", []string{"grpc-addr", "http-addr", "tls-cert", "tls-key", "tls-client-ca", "tenants", "insecure", "max-in-flight"}},
	{"Keys", []string{"keys", "key-file", "key-poll", "key-activation", "data-dir"}},
	{"Vault (keys vault-transit, vault-transit-exportable, vault-kv)", []string{"vault-addr", "vault-namespace", "vault-ca-file", "vault-client-cert", "vault-client-key",
		"vault-auth", "vault-auth-mount", "vault-token-file", "vault-role-id-file", "vault-secret-id-file",
		"vault-kubernetes-role", "vault-kubernetes-token-file", "vault-transit-mount", "vault-transit-key", "vault-transit-previous-key", "vault-kv-mount", "vault-kv-path"}},
	{"One-time ledger", []string{"ledger", "ledger-timeout", "ledger-password-file", "ledger-ca-file", "ledger-replicas", "sweep-interval"}},
	{"States", []string{"default-ttl", "min-ttl", "max-ttl", "skew", "clock-check", "flow-ttl", "max-rounds", "max-payload", "outcome-limit", "outcome-wait"}},
	{"Probes and shutdown", []string{"ready-requires-ledger", "shutdown-delay", "shutdown-grace"}},
	{"Logs and debugging", []string{"log-format", "log-level", "audit-log", "pprof-addr"}},
}

// printServeUsage prints serve's flags by group, each with its variable
// and its default.
func printServeUsage(w io.Writer, usageLine, text string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: sealer %s\n\n%s", usageLine, text)
	for _, g := range serveGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			f := fs.Lookup(name)
			if f == nil {
				continue
			}
			kind, help := flag.UnquoteUsage(f)
			fmt.Fprintf(w, "  --%s\n        %s\n        variable %s", strings.TrimSpace(name+" "+kind), help, envName(name))
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				fmt.Fprintf(w, ", default %s", f.DefValue)
			}
			fmt.Fprintln(w)
		}
	}
}

// envName is the SEALER_* variable of a flag: --grpc-addr is SEALER_GRPC_ADDR.
func envName(flagName string) string {
	return "SEALER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// fromEnv sets every flag not given on the command line from its SEALER_*
// variable.
func fromEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %v", name, e)
			}
		}
	})
	return err
}
