// Package tenant holds the sealer's callers: the tenants file
// (docs/TENANTS.md) read and checked whole, each tenant's identity (client
// certificate names, bearer token hashes) and policy, the authentication of
// a call from its headers and TLS peer, and each tenant's limiter.
package tenant

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
	OneTimeAllowed   = "allowed"
	OneTimeForced    = "forced"
	OneTimeForbidden = "forbidden"
)

// defaultName is the name of the one tenant of a sealer without a tenants
// file.
const defaultName = "default"

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

// A Tenant is one caller's identity and policy.
type Tenant struct {
	Name          string
	DefaultTTL    time.Duration
	MaxTTL        time.Duration
	MaxPayload    int
	OneTime       string  // OneTimeAllowed, OneTimeForced or OneTimeForbidden
	RatePerSecond float64 // 0: unlimited
	Burst         int
	MaxConcurrent int // 0: unlimited
	FlowTTL       time.Duration
	MaxRounds     uint32
	Limiter       *Limiter
}

// Bounds are the server's policy: what a tenant gets where its own is
// silent, and the bounds its own must keep within.
type Bounds struct {
	MinTTL, DefaultTTL, MaxTTL time.Duration
	FlowTTL, MaxFlowTTL        time.Duration
	// DefaultRounds is a flow's rounds where the tenant's policy is
	// silent (--max-rounds); MaxRounds the most a policy may set.
	DefaultRounds, MaxRounds int
	// MaxPayload is a tenant's largest payload where its policy is silent
	// (--max-payload), at most sealer.MaxPayload.
	MaxPayload int
}

// A Set is an immutable tenant configuration, swapped whole on reload.
type Set struct {
	byURI, byDNS map[string]*Tenant
	// tokens maps the SHA-256 of each bearer token to its tenant.
	tokens map[[sha256.Size]byte]*Tenant
	all    map[string]*Tenant
	// implicit is the one tenant of a sealer without a tenants file.
	implicit *Tenant
}

var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Single is the configuration without a tenants file: one tenant,
// "default", no authentication (loopback or --insecure only), the
// server's policy.
func Single(b Bounds) *Set {
	t := &Tenant{Name: defaultName, DefaultTTL: b.DefaultTTL, MaxTTL: b.MaxTTL, MaxPayload: b.MaxPayload, OneTime: OneTimeAllowed,
		FlowTTL: b.FlowTTL, MaxRounds: uint32(b.DefaultRounds)}
	t.Limiter = NewLimiter(t)
	return &Set{implicit: t, all: map[string]*Tenant{t.Name: t}}
}

// Load reads and checks a tenants file. Any problem refuses the whole file,
// listing every problem found. clientCA says whether the server takes
// client certificates, which a tenant's mtls names need.
func Load(path string, b Bounds, clientCA bool) (*Set, error) {
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
	ts := &Set{byURI: map[string]*Tenant{}, byDNS: map[string]*Tenant{}, tokens: map[[sha256.Size]byte]*Tenant{}, all: map[string]*Tenant{}}
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
		t := &Tenant{Name: name, DefaultTTL: cmp.Or(p.DefaultTTL, b.DefaultTTL), MaxTTL: cmp.Or(p.MaxTTL, b.MaxTTL),
			MaxPayload: p.MaxPayload, OneTime: p.OneTime, RatePerSecond: p.RatePerSecond, Burst: p.Burst, MaxConcurrent: p.MaxConcurrent,
			FlowTTL: cmp.Or(p.FlowTTL, b.FlowTTL), MaxRounds: uint32(cmp.Or(p.MaxRounds, b.DefaultRounds))}
		if t.MaxPayload == 0 {
			t.MaxPayload = b.MaxPayload
		}
		if t.OneTime == "" {
			t.OneTime = OneTimeAllowed
		}
		switch {
		case t.MaxTTL < b.MinTTL || t.MaxTTL > b.MaxTTL:
			bad("tenant %s: maxTTL %v outside the server's [%v, %v]", name, t.MaxTTL, b.MinTTL, b.MaxTTL)
		case t.DefaultTTL < b.MinTTL || t.DefaultTTL > t.MaxTTL:
			bad("tenant %s: defaultTTL %v outside [%v, maxTTL %v]", name, t.DefaultTTL, b.MinTTL, t.MaxTTL)
		}
		if t.MaxPayload < 0 || t.MaxPayload > sealer.MaxPayload {
			bad("tenant %s: maxPayload %d outside [0, %d]", name, t.MaxPayload, sealer.MaxPayload)
		}
		if t.OneTime != OneTimeAllowed && t.OneTime != OneTimeForced && t.OneTime != OneTimeForbidden {
			bad("tenant %s: oneTime %q: want allowed, forced or forbidden", name, t.OneTime)
		}
		if t.FlowTTL < b.MinTTL || t.FlowTTL > b.MaxFlowTTL {
			bad("tenant %s: flowTTL %v outside [%v, %v]", name, t.FlowTTL, b.MinTTL, b.MaxFlowTTL)
		}
		if p.MaxRounds < 0 || p.MaxRounds > b.MaxRounds {
			bad("tenant %s: maxRounds %d outside [1, %d]", name, p.MaxRounds, b.MaxRounds)
		}
		if t.RatePerSecond < 0 || t.Burst < 0 || t.MaxConcurrent < 0 {
			bad("tenant %s: ratePerSecond, burst and maxConcurrent must not be negative", name)
		}
		if t.RatePerSecond > 0 && t.Burst == 0 {
			t.Burst = max(1, int(t.RatePerSecond))
		}
		if len(j.MTLS.URIs)+len(j.MTLS.DNS)+len(j.Tokens) == 0 {
			bad("tenant %s: no way to authenticate (mtls.uris, mtls.dns or tokens)", name)
		}
		if len(j.MTLS.URIs)+len(j.MTLS.DNS) > 0 && !clientCA {
			bad("tenant %s: mtls needs --tls-client-ca", name)
		}
		for _, u := range j.MTLS.URIs {
			if prev, dup := ts.byURI[u]; dup {
				bad("mtls uri %q given to both %s and %s", u, prev.Name, name)
			}
			ts.byURI[u] = t
		}
		for _, d := range j.MTLS.DNS {
			d = strings.ToLower(d)
			if prev, dup := ts.byDNS[d]; dup {
				bad("mtls dns %q given to both %s and %s", d, prev.Name, name)
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
		t.Limiter = NewLimiter(t)
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
func (ts *Set) byToken(token string) *Tenant {
	return ts.tokens[sha256.Sum256([]byte(token))]
}

// Implicit returns the one tenant of a configuration without a tenants
// file (Single), the tenant of every call; nil for one read from a file.
func (ts *Set) Implicit() *Tenant { return ts.implicit }

// Len is the number of tenants.
func (ts *Set) Len() int { return len(ts.all) }
