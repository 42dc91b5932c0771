package tenant

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/reasons"
)

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   string // "" means refused
	}{
		{"bearer", []string{"Bearer abc-._~+/="}, "abc-._~+/="},
		{"scheme in lower case (RFC 7235)", []string{"bearer abc"}, "abc"},
		{"scheme in upper case", []string{"BEARER abc"}, "abc"},
		{"empty token", []string{"Bearer "}, ""},
		{"no token", []string{"Bearer"}, ""},
		{"only padding", []string{"Bearer =="}, ""},
		{"two spaces", []string{"Bearer  abc"}, ""},
		{"space inside", []string{"Bearer a b"}, ""},
		{"other scheme", []string{"Basic YTpi"}, ""},
		{"non-ASCII", []string{"Bearer abc\xff"}, ""},
		{"control character", []string{"Bearer abc\x00"}, ""},
		{"second value, non-ASCII", []string{"Bearer abc", "Bearer \xc3\xa9"}, ""},
		{"second value, valid", []string{"Bearer abc", "Bearer abc"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bearerToken(tc.values)
			switch {
			case tc.want == "" && !errors.Is(err, reasons.ErrUnauthenticated):
				t.Fatalf("got %q, %v; want refused", got, err)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// testCA is a CA made in memory, issuing client certificates with SANs
// encoded exactly as given.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key}
}

// client issues a client certificate whose subjectAltName holds these URIs
// (as raw bytes, not through url.URL) and DNS names.
func (ca *testCA) client(t *testing.T, uris, dns []string) []*x509.Certificate {
	t.Helper()
	var names []asn1.RawValue
	for _, u := range uris {
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(u)})
	}
	for _, d := range dns {
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte(d)})
	}
	san, err := asn1.Marshal(names)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		ExtraExtensions: []pkix.Extension{{Id: oidSubjectAltName, Value: san}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{cert}
}

func TestCertTenant(t *testing.T) {
	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	ta, tb := &Tenant{Name: "a"}, &Tenant{Name: "b"}
	ts := &Set{
		byURI: map[string]*Tenant{"spiffe://x/a": ta, "spiffe://x/b%20c": tb, "spiffe://x/b": tb},
		byDNS: map[string]*Tenant{"a.example": ta, "b.example": tb},
	}
	for _, tc := range []struct {
		name      string
		uris, dns []string
		want      *Tenant // nil: refused
	}{
		{"uri", []string{"spiffe://x/a"}, nil, ta},
		{"dns in another case", nil, []string{"A.Example"}, ta},
		{"uri and dns of one tenant", []string{"spiffe://x/a"}, []string{"a.example"}, ta},
		{"uri matched only after re-serialisation", []string{"spiffe://x/b c"}, nil, nil},
		{"uri in another case", []string{"SPIFFE://x/a"}, nil, nil},
		{"two tenants by uri", []string{"spiffe://x/a", "spiffe://x/b"}, nil, nil},
		{"two tenants by uri and dns", []string{"spiffe://x/a"}, []string{"b.example"}, nil},
		{"no tenant", []string{"spiffe://x/z"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ts.certTenant(ca.client(t, tc.uris, tc.dns), pool)
			wantTenant(t, got, err, tc.want)
		})
	}
}

func TestAuthenticate(t *testing.T) {
	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	ta, tb := &Tenant{Name: "a"}, &Tenant{Name: "b"}
	ts := &Set{
		byURI:  map[string]*Tenant{"spiffe://x/a": ta},
		tokens: map[[sha256.Size]byte]*Tenant{sha256.Sum256([]byte("token-a")): ta, sha256.Sum256([]byte("token-b")): tb},
	}
	certA := ca.client(t, []string{"spiffe://x/a"}, nil)
	cas := func() *x509.CertPool { return pool }
	for _, tc := range []struct {
		name      string
		authz     []string
		chain     []*x509.Certificate
		clientCAs func() *x509.CertPool
		want      *Tenant // nil: refused
	}{
		{"token", []string{"Bearer token-a"}, nil, cas, ta},
		{"certificate", nil, certA, cas, ta},
		{"certificate and its tenant's token", []string{"Bearer token-a"}, certA, cas, ta},
		{"certificate and another tenant's token", []string{"Bearer token-b"}, certA, cas, nil},
		{"certificate, no client CA configured", nil, certA, nil, nil},
		{"certificate, no client CA loaded", nil, certA, func() *x509.CertPool { return nil }, nil},
		{"unknown token", []string{"Bearer token-z"}, nil, cas, nil},
		{"no credentials", nil, nil, cas, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ts.Authenticate(tc.authz, tc.chain, tc.clientCAs)
			wantTenant(t, got, err, tc.want)
		})
	}
	// A call without a client certificate never asks for the client CAs,
	// which may take a lock and reload the CA file.
	asked := 0
	if _, err := ts.Authenticate([]string{"Bearer token-a"}, nil, func() *x509.CertPool { asked++; return pool }); err != nil || asked != 0 {
		t.Errorf("bearer-only call: err %v, client CAs asked %d times, want 0", err, asked)
	}
}

// wantTenant fails t unless an authentication found want, or for a nil
// want, refused.
func wantTenant(t *testing.T, got *Tenant, err error, want *Tenant) {
	t.Helper()
	switch {
	case want == nil && !errors.Is(err, reasons.ErrUnauthenticated):
		t.Fatalf("got %v, %v; want refused", got, err)
	case want != nil && got != want:
		t.Fatalf("got %v, %v; want tenant %s", got, err, want.Name)
	}
}
