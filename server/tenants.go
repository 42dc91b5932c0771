package server

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-sealer/sealer/sealer"
)

// OneTime policies of a tenant.
const (
	oneTimeAllowed   = "allowed"
	oneTimeForced    = "forced"
	oneTimeForbidden = "forbidden"
)

// tenantsFile is the YAML tenants file (docs/TENANTS.md).
type tenantsFile struct {
	Tenants tenantMap `yaml:"tenants"`
}

type tenantJSON struct {
	MTLS struct {
		URIs []string `yaml:"uris"`
		DNS  []string `yaml:"dns"`
	} `yaml:"mtls"`
	Tokens []string `yaml:"tokens"`
	Policy struct {
		DefaultTTL    time.Duration `yaml:"defaultTTL"`
		MaxTTL        time.Duration `yaml:"maxTTL"`
		MaxPayload    int           `yaml:"maxPayload"`
		OneTime       string        `yaml:"oneTime"`
		RatePerSecond float64       `yaml:"ratePerSecond"`
		Burst         int           `yaml:"burst"`
		MaxConcurrent int           `yaml:"maxConcurrent"`
		FlowTTL       time.Duration `yaml:"flowTTL"`
		MaxRounds     int           `yaml:"maxRounds"`
	} `yaml:"policy"`
}

// tenant is one caller's identity and policy.
type tenant struct {
	name          string
	defaultTTL    time.Duration
	maxTTL        time.Duration
	maxPayload    int
	oneTime       string
	ratePerSecond float64 // 0: unlimited
	burst         int
	maxConcurrent int // 0: unlimited
	flowTTL       time.Duration
	maxRounds     uint32
	limiter       *limiter
}

// tenants is an immutable tenant configuration, swapped whole on reload.
type tenants struct {
	byURI, byDNS map[string]*tenant
	// tokens maps the SHA-256 of each bearer token to its tenant.
	tokens map[[sha256.Size]byte]*tenant
	all    map[string]*tenant
	// implicit is the one tenant of a sealer without a tenants file.
	implicit *tenant
}

var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// implicitTenants is the configuration without a tenants file: one tenant,
// no authentication (loopback or --insecure only), the server's policy.
func implicitTenants(cfg Config) *tenants {
	t := &tenant{name: defaultTenant, defaultTTL: cfg.DefaultTTL, maxTTL: cfg.MaxTTL, maxPayload: sealer.MaxPayload, oneTime: oneTimeAllowed,
		flowTTL: cfg.FlowTTL, maxRounds: uint32(cfg.MaxRounds)}
	t.limiter = newLimiter(t)
	return &tenants{implicit: t, all: map[string]*tenant{t.name: t}}
}

// loadTenants reads and checks a tenants file. Any problem refuses the whole
// file, listing every problem found.
func loadTenants(path string, cfg Config, clientCA bool) (*tenants, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenants: %v", err)
	}
	var f tenantsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("tenants %s: %v", path, err)
	}
	ts := &tenants{byURI: map[string]*tenant{}, byDNS: map[string]*tenant{}, tokens: map[[sha256.Size]byte]*tenant{}, all: map[string]*tenant{}}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(f.Tenants) == 0 {
		bad("no tenants")
	}
	seenToken := map[[sha256.Size]byte]string{}
	for name, j := range f.Tenants {
		if !tenantName.MatchString(name) {
			bad("tenant %q: name must be 1 to 64 of a-z 0-9 . _ -, starting with a letter or digit", name)
			continue
		}
		p := j.Policy
		t := &tenant{name: name, defaultTTL: cmp.Or(p.DefaultTTL, cfg.DefaultTTL), maxTTL: cmp.Or(p.MaxTTL, cfg.MaxTTL),
			maxPayload: p.MaxPayload, oneTime: p.OneTime, ratePerSecond: p.RatePerSecond, burst: p.Burst, maxConcurrent: p.MaxConcurrent,
			flowTTL: cmp.Or(p.FlowTTL, cfg.FlowTTL), maxRounds: uint32(cmp.Or(p.MaxRounds, cfg.MaxRounds))}
		if t.maxPayload == 0 {
			t.maxPayload = sealer.MaxPayload
		}
		if t.oneTime == "" {
			t.oneTime = oneTimeAllowed
		}
		switch {
		case t.maxTTL < cfg.MinTTL || t.maxTTL > cfg.MaxTTL:
			bad("tenant %s: maxTTL %v outside the server's [%v, %v]", name, t.maxTTL, cfg.MinTTL, cfg.MaxTTL)
		case t.defaultTTL < cfg.MinTTL || t.defaultTTL > t.maxTTL:
			bad("tenant %s: defaultTTL %v outside [%v, maxTTL %v]", name, t.defaultTTL, cfg.MinTTL, t.maxTTL)
		}
		if t.maxPayload < 0 || t.maxPayload > sealer.MaxPayload {
			bad("tenant %s: maxPayload %d outside [0, %d]", name, t.maxPayload, sealer.MaxPayload)
		}
		if t.oneTime != oneTimeAllowed && t.oneTime != oneTimeForced && t.oneTime != oneTimeForbidden {
			bad("tenant %s: oneTime %q: want allowed, forced or forbidden", name, t.oneTime)
		}
		if t.flowTTL < cfg.MinTTL || t.flowTTL > MaxFlowTTL {
			bad("tenant %s: flowTTL %v outside [%v, %v]", name, t.flowTTL, cfg.MinTTL, MaxFlowTTL)
		}
		if p.MaxRounds < 0 || p.MaxRounds > MaxRounds {
			bad("tenant %s: maxRounds %d outside [1, %d]", name, p.MaxRounds, MaxRounds)
		}
		if t.ratePerSecond < 0 || t.burst < 0 || t.maxConcurrent < 0 {
			bad("tenant %s: ratePerSecond, burst and maxConcurrent must not be negative", name)
		}
		if t.ratePerSecond > 0 && t.burst == 0 {
			t.burst = max(1, int(t.ratePerSecond))
		}
		if len(j.MTLS.URIs)+len(j.MTLS.DNS)+len(j.Tokens) == 0 {
			bad("tenant %s: no way to authenticate (mtls.uris, mtls.dns or tokens)", name)
		}
		if len(j.MTLS.URIs)+len(j.MTLS.DNS) > 0 && !clientCA {
			bad("tenant %s: mtls needs --tls-client-ca", name)
		}
		for _, u := range j.MTLS.URIs {
			if prev, dup := ts.byURI[u]; dup {
				bad("mtls uri %q given to both %s and %s", u, prev.name, name)
			}
			ts.byURI[u] = t
		}
		for _, d := range j.MTLS.DNS {
			d = strings.ToLower(d)
			if prev, dup := ts.byDNS[d]; dup {
				bad("mtls dns %q given to both %s and %s", d, prev.name, name)
			}
			ts.byDNS[d] = t
		}
		for i, tok := range j.Tokens {
			hexSum, ok := strings.CutPrefix(tok, "sha256:")
			raw, err := hex.DecodeString(hexSum)
			if !ok || err != nil || len(raw) != sha256.Size {
				bad("tenant %s: token %d: want sha256:<64 hex digits> (the hash, never the token)", name, i+1)
				continue
			}
			sum := [sha256.Size]byte(raw)
			if sum == sha256.Sum256(nil) {
				bad("tenant %s: token %d is the hash of the empty string", name, i+1)
				continue
			}
			if prev, dup := seenToken[sum]; dup {
				bad("tenant %s: token %d is also %s's", name, i+1, prev)
			}
			seenToken[sum] = name
			ts.tokens[sum] = t
		}
		t.limiter = newLimiter(t)
		ts.all[name] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("tenants %s refused:\n%w", path, err)
	}
	return ts, nil
}

// byToken returns the tenant of a bearer token, looked up by the token's
// SHA-256: the same time for 1 or 100,000 tenants. (It was a constant-time
// comparison with every configured hash, 5 ms a call at 100,000 tenants.)
// The lookup's timing depends on the hash only, never on the token's bytes
// directly: learning a stored hash from it would still need a preimage.
func (ts *tenants) byToken(token string) *tenant {
	return ts.tokens[sha256.Sum256([]byte(token))]
}
