// Package server runs the sealer: the gRPC service, the REST gateway, health,
// metrics, and the tasks that keep them going.
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/mcp-sealer/sealer/internal/netaddr"
	"github.com/mcp-sealer/sealer/internal/pprofserve"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server/internal/tenant"
)

// Bounds of a flow's configuration (Config.FlowTTL, Config.MaxRounds and
// the tenants' flowTTL and maxRounds).
const (
	MaxFlowTTL = 24 * time.Hour
	MaxRounds  = 1000
)

// MaxSkew is the largest Config.Skew. A consumed state's ledger entry
// outlives the acceptance window of a replica with this skew (see
// ledgerRetention), so replicas configured with different skews, or one
// whose skew is raised later, never open a state another consumed.
const MaxSkew = time.Minute

// ClockCheckEvery is how often a replica with a Redis ledger measures its
// clock's offset from the ledger's (Config.ClockCheck).
const ClockCheckEvery = time.Second

// Config is everything the sealer needs to run. The zero value is not valid;
// start from Defaults.
type Config struct {
	// GRPCAddr and HTTPAddr are the listen addresses of the gRPC API and of
	// the HTTP server (REST gateway, /metrics, /healthz, /readyz).
	GRPCAddr string
	HTTPAddr string
	// DataDir holds the generated key file and the embedded ledger.
	DataDir string
	// Keys is where keys come from: "file" (KeyFile), "vault-transit" or
	// "vault-kv" (Vault).
	Keys string
	// KeyFile is the key file; empty means keys.json in DataDir, generated
	// when missing. A key file given here is never generated.
	KeyFile string
	// KeyPoll is how often the key source is read again.
	KeyPoll time.Duration
	// KeyActivation is how old a new key version must be before it seals;
	// zero means twice KeyPoll (see keys.Activated).
	KeyActivation time.Duration
	// Vault is where Vault is and how to log in.
	Vault VaultConfig
	// Ledger is "embedded" (a Pebble store in DataDir/ledger) or a Redis URL (see
	// ledger/redis.Options) shared by every replica.
	Ledger string
	// LedgerTimeout bounds each call to a Redis ledger.
	LedgerTimeout time.Duration
	// LedgerPasswordFile and LedgerCAFile hold the Redis password and the CA
	// bundle that verifies a rediss:// server.
	LedgerPasswordFile string
	LedgerCAFile       string
	// LedgerReplicas, above zero, makes each Redis consume wait for that
	// many replica acknowledgements (WAIT) within LedgerTimeout.
	LedgerReplicas int
	// DefaultTTL is the life of a state sealed without a TTL; a requested TTL
	// outside [MinTTL, MaxTTL] is refused, never clamped.
	DefaultTTL time.Duration
	MinTTL     time.Duration
	MaxTTL     time.Duration
	// Skew is the clock difference allowed past a state's expiry, at most
	// MaxSkew.
	Skew time.Duration
	// ClockCheck, with a Redis ledger, makes the replica measure its clock
	// against the ledger's and stop consuming while the offset is beyond
	// ClockLimit (see clockCheck).
	ClockCheck bool
	// FlowTTL is the life of a flow, from its first round: no state of the
	// flow opens after it (a tenant's flowTTL may lower or raise it, up to
	// MaxFlowTTL). MaxRounds is the most rounds of one flow.
	FlowTTL   time.Duration
	MaxRounds int
	// MaxPayload is the largest payload sealed where a tenant's policy is
	// silent: sealer.DefaultMaxPayload, so that states stay within 65,536
	// characters; at most sealer.MaxPayload (FORMAT.md, "Limits").
	MaxPayload int
	// OutcomeLimit is the largest outcome Record keeps (README, "Recorded
	// outcomes"), at most sealer.MaxOutcome; 0 keeps none: opens then
	// never claim for an outcome, and Record is refused.
	OutcomeLimit int
	// OutcomeWait is how long after a recording open its outcome is waited
	// for: a retry in that time waits (within its deadline) and gets the
	// outcome or IN_PROGRESS; after it, with nothing recorded, the retry
	// is ALREADY_CONSUMED.
	OutcomeWait time.Duration
	// ShutdownDelay is how long a stopping replica goes on serving after its
	// readiness turned false, so that load balancers stop sending it calls
	// before it stops accepting them; ShutdownGrace then bounds how long
	// in-flight calls may take to drain.
	ShutdownDelay time.Duration
	ShutdownGrace time.Duration
	// ReadyNeedsLedger makes a reachable ledger a condition of readiness.
	// Off by default: without the ledger only one-time opens fail.
	ReadyNeedsLedger bool
	// SweepInterval is how often expired ledger entries are deleted.
	SweepInterval time.Duration
	// TenantsFile declares the tenants, how each authenticates, and its
	// policy (docs/TENANTS.md). Empty: one implicit tenant, no
	// authentication, allowed on loopback only unless Insecure.
	TenantsFile string
	// TLSCert and TLSKey serve TLS on both listeners; TLSClientCA verifies
	// client certificates (mTLS). The files are reloaded when they change.
	TLSCert, TLSKey, TLSClientCA string
	// Insecure allows listening beyond loopback without TLS and client
	// authentication.
	Insecure bool
	// MaxInFlight bounds the calls served at once; past it calls are refused
	// with RESOURCE_EXHAUSTED. Zero means unlimited.
	MaxInFlight int
	// PprofAddr, when set, serves net/http/pprof there (loopback only) for
	// profiling the running sealer.
	PprofAddr string
	// AuditLog is where audit events go: "" for the service log, or a file
	// (JSON lines, appended).
	AuditLog string
	// Logger receives the service's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults returns the embedded default: loopback only, data in ./sealer-data.
func Defaults() Config {
	return Config{
		GRPCAddr:      "127.0.0.1:7443",
		HTTPAddr:      "127.0.0.1:7080",
		DataDir:       "sealer-data",
		Keys:          "file",
		KeyPoll:       30 * time.Second,
		Ledger:        "embedded",
		LedgerTimeout: 500 * time.Millisecond,
		DefaultTTL:    5 * time.Minute,
		MinTTL:        time.Second,
		MaxTTL:        time.Hour,
		Skew:          2 * time.Second,
		ClockCheck:    true,
		FlowTTL:       15 * time.Minute,
		MaxRounds:     16,
		MaxPayload:    sealer.DefaultMaxPayload,
		OutcomeLimit:  64 << 10,
		OutcomeWait:   30 * time.Second,
		ShutdownDelay: 5 * time.Second,
		ShutdownGrace: 20 * time.Second,
		MaxInFlight:   512,
		SweepInterval: time.Minute,
	}
}

// Validate reports every problem with the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	for name, addr := range map[string]string{"grpc-addr": c.GRPCAddr, "http-addr": c.HTTPAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", name, addr))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("tls-cert and tls-key: give both or neither"))
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("tls-client-ca: needs tls-cert and tls-key"))
	}
	if !c.Insecure && (!netaddr.IsLoopback(c.GRPCAddr) || !netaddr.IsLoopback(c.HTTPAddr)) && (c.TLSCert == "" || c.TenantsFile == "") {
		errs = append(errs, fmt.Errorf("refusing to listen on %s and %s without TLS and client authentication: "+
			"set --tls-cert, --tls-key and --tenants (with --tls-client-ca for mTLS), listen on 127.0.0.1, "+
			"or pass --insecure to accept anyone who can connect", c.GRPCAddr, c.HTTPAddr))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir: empty"))
	}
	if kind, ok := keySources[c.Keys]; !ok {
		errs = append(errs, fmt.Errorf("keys %q: want one of %s", c.Keys, strings.Join(KeySources(), ", ")))
	} else if err := kind.check(*c); err != nil {
		errs = append(errs, err)
	}
	if c.KeyPoll < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("key-poll %v: want at least 100ms", c.KeyPoll))
	}
	if c.KeyActivation < 0 {
		errs = append(errs, fmt.Errorf("key-activation %v: want 0 (twice key-poll) or more", c.KeyActivation))
	}
	if c.Ledger != "embedded" && !redis.IsURL(c.Ledger) {
		errs = append(errs, errors.New("ledger: want embedded or a redis://, rediss://, redis+sentinel:// or redis+cluster:// URL"))
	}
	if c.LedgerReplicas < 0 || (c.LedgerReplicas > 0 && c.Ledger == "embedded") {
		errs = append(errs, fmt.Errorf("ledger-replicas %d: want 0, or more with a Redis ledger", c.LedgerReplicas))
	}
	if c.LedgerTimeout <= 0 || c.LedgerTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("ledger-timeout %v: want more than 0, at most 1m", c.LedgerTimeout))
	}
	switch {
	case c.MinTTL < time.Millisecond:
		errs = append(errs, fmt.Errorf("min-ttl %v: want at least 1ms", c.MinTTL))
	case c.MaxTTL < c.MinTTL:
		errs = append(errs, fmt.Errorf("max-ttl %v: below min-ttl %v", c.MaxTTL, c.MinTTL))
	case c.DefaultTTL < c.MinTTL || c.DefaultTTL > c.MaxTTL:
		errs = append(errs, fmt.Errorf("default-ttl %v: want within [%v, %v]", c.DefaultTTL, c.MinTTL, c.MaxTTL))
	}
	if c.FlowTTL < c.MinTTL || c.FlowTTL > MaxFlowTTL {
		errs = append(errs, fmt.Errorf("flow-ttl %v: want within [min-ttl %v, %v]", c.FlowTTL, c.MinTTL, MaxFlowTTL))
	}
	if c.MaxRounds < 1 || c.MaxRounds > MaxRounds {
		errs = append(errs, fmt.Errorf("max-rounds %d: want 1 to %d", c.MaxRounds, MaxRounds))
	}
	if c.MaxPayload < 1 || c.MaxPayload > sealer.MaxPayload {
		errs = append(errs, fmt.Errorf("max-payload %d: want 1 to %d bytes", c.MaxPayload, sealer.MaxPayload))
	}
	if c.OutcomeLimit < 0 || c.OutcomeLimit > sealer.MaxOutcome {
		errs = append(errs, fmt.Errorf("outcome-limit %d: want 0 (keep none) to %d bytes", c.OutcomeLimit, sealer.MaxOutcome))
	}
	if c.OutcomeWait < 100*time.Millisecond || c.OutcomeWait > 10*time.Minute {
		errs = append(errs, fmt.Errorf("outcome-wait %v: want 100ms to 10m", c.OutcomeWait))
	}
	if c.Skew < 0 || c.Skew > MaxSkew {
		errs = append(errs, fmt.Errorf("skew %v: want 0 to %v", c.Skew, MaxSkew))
	}
	if err := pprofserve.CheckAddr(c.PprofAddr); err != nil {
		errs = append(errs, err)
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("max-in-flight %d: want 0 (unlimited) or more", c.MaxInFlight))
	}
	if c.ShutdownDelay < 0 || c.ShutdownDelay > 5*time.Minute {
		errs = append(errs, fmt.Errorf("shutdown-delay %v: want 0 to 5m", c.ShutdownDelay))
	}
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-grace %v: want more than 0", c.ShutdownGrace))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("sweep-interval %v: want more than 0", c.SweepInterval))
	}
	return errors.Join(errs...)
}

// activation is the effective KeyActivation.
func (c *Config) activation() time.Duration {
	if c.KeyActivation == 0 {
		return 2 * c.KeyPoll
	}
	return c.KeyActivation
}

// tenantBounds is the server's policy as the tenants take it.
func (c Config) tenantBounds() tenant.Bounds {
	return tenant.Bounds{MinTTL: c.MinTTL, DefaultTTL: c.DefaultTTL, MaxTTL: c.MaxTTL,
		FlowTTL: c.FlowTTL, MaxFlowTTL: MaxFlowTTL, DefaultRounds: c.MaxRounds, MaxRounds: MaxRounds,
		MaxPayload: c.MaxPayload}
}
