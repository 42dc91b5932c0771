// Command sealer-proxy stands in front of an MCP server (Streamable HTTP)
// and seals and opens its requestStates through a sealer, so that the
// server needs no change (package proxy says what it does to the traffic).
//
//	sealer-proxy --upstream http://127.0.0.1:3001/mcp --sealer 127.0.0.1:7443 --principal bearer
//
// Every flag can also be set by its SEALER_PROXY_* variable
// (--upstream from SEALER_PROXY_UPSTREAM, and so on).
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

	"github.com/mcp-sealer/sealer/internal/secretfile"
	"github.com/mcp-sealer/sealer/proxy"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sealer-proxy:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	cfg := proxy.Defaults()
	fs := flag.NewFlagSet("sealer-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address of the MCP endpoint")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", cfg.AdminAddr, "listen address of /healthz, /readyz and /metrics (off when empty)")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback address (off when empty)")
	fs.StringVar(&cfg.Upstream, "upstream", "", "the MCP endpoint of the server behind the proxy, e.g. http://127.0.0.1:3001/mcp")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate (PEM) of the MCP endpoint")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "TLS private key (PEM)")
	fs.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "CA bundle (PEM) that verifies callers' certificates (principal cert)")
	fs.StringVar(&cfg.Sealer, "sealer", cfg.Sealer, "the sealer's gRPC address")
	fs.StringVar(&cfg.SealerCA, "sealer-ca", "", "CA bundle (PEM) verifying the sealer (TLS when set)")
	fs.StringVar(&cfg.SealerCert, "sealer-cert", "", "client certificate (PEM) for the sealer (mTLS)")
	fs.StringVar(&cfg.SealerKey, "sealer-key", "", "client key (PEM) for the sealer")
	fs.StringVar(&cfg.SealerTokenFile, "sealer-token-file", "", "file holding the bearer token for the sealer (without sealer-ca, only to a sealer on loopback)")
	fs.DurationVar(&cfg.SealerTimeout, "sealer-timeout", cfg.SealerTimeout, "bound on each Seal and Open")
	fs.StringVar(&cfg.Principal, "principal", "", "who the caller is: bearer (its token, hashed), cert (its client certificate), header (set by a trusted proxy in front), or anonymous (every caller the same)")
	fs.StringVar(&cfg.PrincipalHeaderName, "principal-header-name", cfg.PrincipalHeaderName, "principal header: the header naming the caller; removed from callers' requests in the other modes")
	policyFile := fs.String("policy", "", "policy file (YAML: ttl, flows, oneTime.tools, oneTime.prompts, oneTime.resources); flags add to it")
	flows := fs.String("flows", "", "how the rounds of a request are sealed: latest-only (the default: one flow, bound to the input keys each round asks, only its latest round opens), any-round (every round opens until it expires) or off (each state alone, while some sealer replica has no flows)")
	ttl := fs.Duration("state-ttl", 0, "life of the states the proxy seals (0: the policy file's, else the sealer's default)")
	tools := fs.String("one-time-tools", "", "tools whose states open once, comma separated")
	prompts := fs.String("one-time-prompts", "", "prompts whose states open once, comma separated")
	resources := fs.String("one-time-resources", "", "resource URIs whose states open once, comma separated")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "largest request body accepted")
	fs.IntVar(&cfg.MaxResponseBytes, "max-response-bytes", cfg.MaxResponseBytes, "largest JSON response or SSE event read to seal a state; larger is an error")
	fs.IntVar(&cfg.MaxStateBytes, "max-state-bytes", cfg.MaxStateBytes, "largest state the upstream may emit, in bytes (the default, the sealer's default payload limit, keeps sealed states within 65,536 characters; at most 65536); larger is an error, never truncated")
	fs.DurationVar(&cfg.UpstreamHeaderTimeout, "upstream-timeout", cfg.UpstreamHeaderTimeout, "bound on the wait for the upstream's response headers")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", cfg.ReadHeaderTimeout, "bound on reading a caller's request headers")
	fs.DurationVar(&cfg.BodyTimeout, "body-timeout", cfg.BodyTimeout, "bound on reading a request body, from its headers on (408 past it)")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "bound on writing one answer the proxy holds to be sealed, or one SSE event of it (never a whole stream): a client reading more slowly is cut off; also the longest an answer waits for room in max-buffered-bytes")
	fs.IntVar(&cfg.MaxConcurrentRequests, "max-concurrent-requests", cfg.MaxConcurrentRequests, "requests served at once, streams included; past it 503 with Retry-After")
	fs.Int64Var(&cfg.MaxBufferedBytes, "max-buffered-bytes", cfg.MaxBufferedBytes, "bytes held at once: request bodies (503 with Retry-After past it, before the body is read) and the answers and SSE events read to be sealed (which wait for room up to write-timeout, then fail); give at least 15 times max-response-bytes")
	fs.StringVar(&cfg.SpecGate, "spec-gate", cfg.SpecGate, "an upstream answer that breaks an MRTR server rule (input_required to another method, an input request of another method or of a kind the client did not declare, nothing asked): enforce (replaced by a JSON-RPC error) or report (logged and counted, forwarded)")
	fs.BoolVar(&cfg.RecordOutcomes, "record-outcomes", cfg.RecordOutcomes, "keep the answer to a call whose one-time or latest-only state it consumed, and answer a retry of that state (its answer lost) with it, without calling the upstream again; false: such a retry is refused as consumed")
	fs.StringVar(&cfg.Audience, "audience", "", "the upstream's name, bound into every state so that it opens in front of no other upstream (default: the upstream URL; give sidecars on loopback the server's name)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error (JSON lines on standard error)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := fromEnv(fs); err != nil {
		return err
	}
	if *policyFile != "" {
		p, err := proxy.LoadPolicy(*policyFile)
		if err != nil {
			return err
		}
		cfg.Policy = p
	}
	if *ttl != 0 {
		cfg.Policy.TTL = *ttl
	}
	if *flows != "" {
		cfg.Policy.Flows = *flows
	}
	cfg.Policy.OneTime.Tools = append(cfg.Policy.OneTime.Tools, list(*tools)...)
	cfg.Policy.OneTime.Prompts = append(cfg.Policy.OneTime.Prompts, list(*prompts)...)
	cfg.Policy.OneTime.Resources = append(cfg.Policy.OneTime.Resources, list(*resources)...)
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log-level: %v", err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	// The private keys are credential files, refused when others may read
	// them, as the sealer refuses its own (the token file: proxy.Run).
	for _, key := range []string{cfg.TLSKey, cfg.SealerKey} {
		if key == "" {
			continue
		}
		if err := secretfile.Check(key); err != nil {
			return err
		}
	}
	// max-buffered-bytes bounds the bytes the proxy holds; the soft memory
	// limit bounds the garbage the runtime lets pile up beside them, and
	// leaves 48 MiB to the rest (connections, the runtime). GOMEMLIMIT, when
	// set, is the runtime's own.
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(cfg.MaxBufferedBytes + 48<<20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return proxy.Run(ctx, cfg)
}

func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// fromEnv sets every flag not given on the command line from its
// SEALER_PROXY_* variable.
func fromEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SEALER_PROXY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %v", name, e)
			}
		}
	})
	return err
}
