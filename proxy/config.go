package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/internal/netaddr"
	"github.com/mcp-sealer/sealer/internal/pprofserve"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
)

// Principal sources: where the proxy learns who the caller is.
const (
	// PrincipalBearer is the caller's bearer token, hashed.
	PrincipalBearer = "bearer"
	// PrincipalCert is the caller's TLS client certificate (its first URI
	// SAN, else its first DNS SAN, else its subject's common name).
	PrincipalCert = "cert"
	// PrincipalHeader is a header set by a trusted authenticating proxy in
	// front of this one.
	PrincipalHeader = "header"
	// PrincipalAnonymous makes every caller the same principal: only for an
	// endpoint that has one caller, or whose callers may use each other's
	// states.
	PrincipalAnonymous = "anonymous"
)

// Config is the proxy's configuration; cmd/sealer-proxy fills it from flags.
type Config struct {
	// Addr is the listen address of the MCP endpoint; AdminAddr that of
	// /healthz, /readyz and /metrics (off when empty); PprofAddr, a loopback
	// address, that of net/http/pprof (off when empty).
	Addr, AdminAddr, PprofAddr string
	// Upstream is the MCP endpoint of the server behind the proxy
	// (http://127.0.0.1:3001/mcp). Every request goes to it, whatever its
	// path on the proxy.
	Upstream string
	// TLSCert and TLSKey serve the MCP endpoint over TLS; TLSClientCA
	// verifies callers' certificates (required for Principal "cert").
	TLSCert, TLSKey, TLSClientCA string

	// Sealer is the sealer's gRPC address; SealerCA verifies it over TLS
	// (plaintext when empty: loopback only), SealerCert and SealerKey are
	// the proxy's client certificate, SealerTokenFile holds its bearer token
	// (over plaintext only to a loopback Sealer).
	Sealer, SealerCA, SealerCert, SealerKey, SealerTokenFile string
	// SealerTimeout bounds each Seal and Open.
	SealerTimeout time.Duration

	// Principal is the principal source (PrincipalBearer, ...);
	// PrincipalHeaderName names the header of PrincipalHeader. In the other
	// modes a caller's header of that name is removed before the upstream
	// sees it.
	Principal, PrincipalHeaderName string

	// Policy says how states are sealed.
	Policy Policy

	// RecordOutcomes makes a lost answer a replayed one (README, "Recorded
	// outcomes"): every Open asks the sealer to keep the answer to a call
	// whose state it consumes (one-time, or a latest-only round), the proxy
	// records the answer the client got, and a retry of that state gets it
	// again without a second call to the upstream. Defaults sets it; off,
	// such a retry is refused as consumed.
	RecordOutcomes bool

	// SpecGate says what the proxy does with an upstream's answer that
	// breaks an MRTR server rule (gate.go): SpecGateEnforce (the default:
	// replaced by a JSON-RPC error) or SpecGateReport (logged, counted and
	// forwarded). Either way the proxy reads the answer to every request.
	SpecGate string

	// MaxRequestBytes caps a request body; MaxResponseBytes a JSON response
	// body and an SSE event that the proxy reads to seal a state;
	// MaxStateBytes the state an upstream emits (at most sealer.MaxPayload).
	// Past them the call fails; nothing is ever truncated.
	MaxRequestBytes, MaxResponseBytes, MaxStateBytes int
	// UpstreamHeaderTimeout bounds the wait for the upstream's response
	// headers; ReadHeaderTimeout the caller's request headers; BodyTimeout
	// the reading of a request body, from its headers on (408 past it).
	UpstreamHeaderTimeout, ReadHeaderTimeout, BodyTimeout time.Duration
	// WriteTimeout bounds the writing of one answer the proxy holds (a JSON
	// body it read to seal a state) or of one SSE event of such an answer,
	// from its first byte to its last: a client that reads more slowly is
	// cut off, and the bytes it held are freed. It never bounds a stream's
	// whole life, nor a response that passes through unbuffered. An answer
	// also waits for room in MaxBufferedBytes at most this long.
	WriteTimeout time.Duration
	// MaxConcurrentRequests bounds the requests served at once, streams
	// included; MaxBufferedBytes the bytes held at once: request bodies
	// (each counted at its Content-Length, or MaxRequestBytes while it has
	// none, and the copy the upstream gets), answers read to be sealed, SSE
	// events, answers kept to be recorded (budget.go). A request past either
	// gets 503 with Retry-After before its body is read; an answer waits for
	// room up to WriteTimeout, then the client gets the proxy's JSON-RPC
	// error in its place. So the proxy's memory is bounded by them, not by
	// the number of connections nor by how slowly clients read. An answer
	// needs up to eleven times its size at once while it is read, judged,
	// sealed and kept to be recorded (three times without a state, not
	// recorded), within three quarters of the budget: give it at least 15
	// times MaxResponseBytes.
	MaxConcurrentRequests int
	MaxBufferedBytes      int64

	// Audience names the upstream in every state the proxy seals, so that
	// a state sealed in front of one upstream opens in front of no other
	// (the tenant's other proxies included); empty, it is Upstream. Give
	// sidecars whose Upstream is alike (a loopback address) an audience of
	// their own, such as the server's name.
	Audience string

	Logger *slog.Logger
}

// How the proxy seals the rounds of a request (Policy.Flows).
const (
	// FlowsLatestOnly, the default, seals every state as a round of a flow
	// (FORMAT.md, "Flows"): one deadline for the whole request, the
	// tenant's maxRounds, the retry bound to the keys of the inputRequests
	// its round asked, and only the flow's latest round opens, once.
	FlowsLatestOnly = "latest-only"
	// FlowsAnyRound seals flows whose every round opens until it expires.
	FlowsAnyRound = "any-round"
	// FlowsOff seals every state on its own, as sealers without flows
	// do: until every replica of the sealer has flows.
	FlowsOff = "off"
)

// Policy is how the proxy seals states: their life, which tools, prompts
// and resources get one-time states, and the flows of their rounds.
type Policy struct {
	// TTL is each state's life; zero means the sealer's default.
	TTL     time.Duration `yaml:"ttl"`
	OneTime struct {
		Tools     []string `yaml:"tools"`
		Prompts   []string `yaml:"prompts"`
		Resources []string `yaml:"resources"`
	} `yaml:"oneTime"`
	// Flows is FlowsLatestOnly (also when empty), FlowsAnyRound or
	// FlowsOff.
	Flows string `yaml:"flows"`
}

// flow returns the flow request of a state that asks the input keys asked
// after the state opened (nil when the call carried none); nil with flows
// off.
func (p *Policy) flow(asked []string, opened *client.Opened) *client.FlowRequest {
	if p.Flows == FlowsOff {
		return nil
	}
	return client.FlowRequest{LatestOnly: p.Flows != FlowsAnyRound, Asked: asked}.After(opened)
}

// oneTime reports whether the state of a request of method on target is
// one-time.
func (p *Policy) oneTime(method, target string) bool {
	var list []string
	switch method {
	case mcpdigest.ToolsCall:
		list = p.OneTime.Tools
	case mcpdigest.PromptsGet:
		list = p.OneTime.Prompts
	case mcpdigest.ResourcesRead:
		list = p.OneTime.Resources
	}
	return slices.Contains(list, target)
}

// LoadPolicy reads a policy file (YAML):
//
//	ttl: 5m
//	flows: latest-only
//	oneTime:
//	  tools: [approve_payment]
//	  prompts: []
//	  resources: ["file:///ledger"]
func LoadPolicy(path string) (Policy, error) {
	var p Policy
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("policy: %v", err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("policy %s: %v", path, err)
	}
	return p, nil
}

// Defaults returns a configuration with every limit set.
func Defaults() Config {
	return Config{
		Addr:                  "127.0.0.1:8080",
		AdminAddr:             "127.0.0.1:8081",
		Sealer:                "127.0.0.1:7443",
		SealerTimeout:         5 * time.Second,
		PrincipalHeaderName:   "X-Sealer-Principal",
		MaxRequestBytes:       4 << 20,
		MaxResponseBytes:      4 << 20,
		MaxStateBytes:         sealer.DefaultMaxPayload,
		UpstreamHeaderTimeout: 60 * time.Second,
		ReadHeaderTimeout:     10 * time.Second,
		BodyTimeout:           10 * time.Second,
		WriteTimeout:          30 * time.Second,
		MaxConcurrentRequests: 1024,
		MaxBufferedBytes:      64 << 20,
		RecordOutcomes:        true,
		SpecGate:              SpecGateEnforce,
	}
}

// audience is the name of the upstream bound into every state.
func (c *Config) audience() string {
	if c.Audience != "" {
		return c.Audience
	}
	return c.Upstream
}

// Validate reports every problem of the configuration.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if u, err := url.Parse(c.Upstream); c.Upstream == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("upstream %q: want the upstream's MCP endpoint, http(s)://host:port/path", c.Upstream)
	}
	switch c.Principal {
	case PrincipalBearer, PrincipalAnonymous:
	case PrincipalCert:
		if c.TLSClientCA == "" || c.TLSCert == "" {
			bad("principal cert needs TLS with client certificates: tls-cert, tls-key and tls-client-ca")
		}
	case PrincipalHeader:
		if c.PrincipalHeaderName == "" {
			bad("principal header needs principal-header-name")
		}
	case "":
		bad("principal: say where the caller's principal comes from (bearer, cert, header), or anonymous if every caller is the same")
	default:
		bad("principal %q: want bearer, cert, header or anonymous", c.Principal)
	}
	if err := pprofserve.CheckAddr(c.PprofAddr); err != nil {
		errs = append(errs, err)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		bad("tls-cert and tls-key go together")
	}
	if (c.SealerCert == "") != (c.SealerKey == "") {
		bad("sealer-cert and sealer-key go together")
	}
	// A token in plaintext goes to whoever is on the path: the rule of the
	// sealer's own listeners (netaddr.IsLoopback).
	if c.SealerTokenFile != "" && c.SealerCA == "" && !netaddr.IsLoopback(c.Sealer) {
		bad("refusing to send the sealer-token-file's bearer token over plaintext to %s, which is not loopback: "+
			"set sealer-ca (TLS), or reach the sealer on 127.0.0.1", c.Sealer)
	}
	if c.MaxStateBytes < 1 || c.MaxStateBytes > sealer.MaxPayload {
		bad("max-state-bytes %d: want 1 to %d", c.MaxStateBytes, sealer.MaxPayload)
	}
	if c.MaxRequestBytes < 1024 || c.MaxResponseBytes < 1024 {
		bad("max-request-bytes and max-response-bytes: want at least 1024")
	}
	if c.MaxConcurrentRequests < 1 {
		bad("max-concurrent-requests %d: want at least 1", c.MaxConcurrentRequests)
	}
	if c.MaxBufferedBytes < int64(c.MaxRequestBytes) {
		bad("max-buffered-bytes %d: want at least max-request-bytes (%d)", c.MaxBufferedBytes, c.MaxRequestBytes)
	}
	if c.SealerTimeout <= 0 || c.UpstreamHeaderTimeout <= 0 || c.ReadHeaderTimeout <= 0 || c.BodyTimeout <= 0 || c.WriteTimeout <= 0 {
		bad("timeouts must be positive")
	}
	if c.Policy.TTL < 0 {
		bad("ttl %v: want 0 (the sealer's default) or more", c.Policy.TTL)
	}
	if c.SpecGate != SpecGateEnforce && c.SpecGate != SpecGateReport {
		bad("spec-gate %q: want %s or %s", c.SpecGate, SpecGateEnforce, SpecGateReport)
	}
	switch c.Policy.Flows {
	case "", FlowsLatestOnly, FlowsAnyRound, FlowsOff:
	default:
		bad("flows %q: want %s, %s or %s", c.Policy.Flows, FlowsLatestOnly, FlowsAnyRound, FlowsOff)
	}
	return errors.Join(errs...)
}
