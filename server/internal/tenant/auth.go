package tenant

import (
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"strings"

	"github.com/mcp-sealer/sealer/internal/reasons"
)

// Authenticate finds the one tenant named by the caller's Authorization
// values and client certificate chain. A chain is verified against the
// pool clientCAs returns, asked only when a chain is presented (it may
// reload the CA file); nil clientCAs, or a nil pool, accepts no client
// certificate. When both are given they must agree. It looks at nothing
// else: it runs before any body or message is read.
func (ts *Set) Authenticate(authorization []string, chain []*x509.Certificate, clientCAs func() *x509.CertPool) (*Tenant, error) {
	var byCert, byToken *Tenant
	if len(chain) > 0 {
		var err error
		var roots *x509.CertPool
		if clientCAs != nil {
			roots = clientCAs()
		}
		if byCert, err = ts.certTenant(chain, roots); err != nil {
			return nil, err
		}
	}
	if len(authorization) > 0 {
		token, err := bearerToken(authorization)
		if err != nil {
			return nil, err
		}
		if byToken = ts.byToken(token); byToken == nil {
			return nil, unauthenticated("bearer token not recognized")
		}
	}
	switch {
	case byCert == nil && byToken == nil:
		return nil, unauthenticated("no credentials: present a client certificate or a bearer token")
	case byCert != nil && byToken != nil && byCert != byToken:
		return nil, unauthenticated("client certificate and bearer token name different tenants")
	case byCert != nil:
		return byCert, nil
	}
	return byToken, nil
}

// bearerToken returns the token of the one Authorization value, which must
// be "Bearer" (in any case, RFC 7235) and a non-empty RFC 6750 b64token.
// Anything else is refused, never skipped: a second value, another scheme,
// bytes outside the token alphabet.
func bearerToken(values []string) (string, error) {
	if len(values) != 1 {
		return "", unauthenticated("more than one Authorization header")
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "bearer") {
		return "", unauthenticated("authorization scheme must be Bearer")
	}
	if !isB64Token(token) {
		return "", unauthenticated("malformed bearer token")
	}
	return token, nil
}

// isB64Token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// certTenant verifies a client chain against the client CAs and maps its
// SANs to a tenant: URI SANs byte for byte as the certificate spells them,
// DNS SANs without regard to case. A certificate that names more than one
// tenant is refused rather than given one of them.
func (ts *Set) certTenant(chain []*x509.Certificate, clientCAs *x509.CertPool) (*Tenant, error) {
	if clientCAs == nil {
		return nil, unauthenticated("client certificates are not accepted here (no client CA configured)")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: clientCAs, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, unauthenticated("client certificate not issued by the client CA")
	}
	uris, err := rawURISANs(chain[0])
	if err != nil {
		return nil, unauthenticated("malformed client certificate")
	}
	var found *Tenant
	for _, t := range append(lookup(ts.byURI, uris, false), lookup(ts.byDNS, chain[0].DNSNames, true)...) {
		if found != nil && found != t {
			return nil, unauthenticated("client certificate names more than one tenant")
		}
		found = t
	}
	if found == nil {
		return nil, unauthenticated("client certificate names no tenant")
	}
	return found, nil
}

// lookup returns the tenants that names map to.
func lookup(m map[string]*Tenant, names []string, fold bool) []*Tenant {
	var out []*Tenant
	for _, n := range names {
		if fold {
			n = strings.ToLower(n)
		}
		if t := m[n]; t != nil {
			out = append(out, t)
		}
	}
	return out
}

// oidSubjectAltName is the X.509 subjectAltName extension (RFC 5280, 4.2.1.6).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// rawURISANs returns the uniformResourceIdentifier names of a certificate
// exactly as encoded. crypto/x509 keeps them only as parsed *url.URL values,
// whose String() may differ from what the CA signed.
func rawURISANs(c *x509.Certificate) ([]string, error) {
	var uris []string
	for _, e := range c.Extensions {
		if !e.Id.Equal(oidSubjectAltName) {
			continue
		}
		var names asn1.RawValue
		if rest, err := asn1.Unmarshal(e.Value, &names); err != nil || len(rest) != 0 ||
			names.Class != asn1.ClassUniversal || names.Tag != asn1.TagSequence {
			return nil, errors.New("malformed subjectAltName")
		}
		for rest := names.Bytes; len(rest) > 0; {
			var gn asn1.RawValue
			var err error
			if rest, err = asn1.Unmarshal(rest, &gn); err != nil {
				return nil, errors.New("malformed subjectAltName")
			}
			if gn.Class == asn1.ClassContextSpecific && gn.Tag == 6 { // uniformResourceIdentifier
				uris = append(uris, string(gn.Bytes))
			}
		}
	}
	return uris, nil
}

func unauthenticated(why string) error {
	return &authError{why}
}

// authError is an authentication failure with the reason the caller may see:
// always one of the fixed texts above, never bytes the caller chose.
type authError struct{ why string }

func (e *authError) Error() string        { return "sealer: unauthenticated: " + e.why }
func (e *authError) Is(target error) bool { return target == reasons.ErrUnauthenticated }
