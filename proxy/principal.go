package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// maxPrincipalHeader caps the value of a trusted principal header.
const maxPrincipalHeader = 512

// principal is who the caller is, from the configured source, or false
// when the request does not say.
func (p *Proxy) principal(r *http.Request) (string, bool) {
	switch p.cfg.Principal {
	case PrincipalAnonymous:
		return "anonymous", true
	case PrincipalBearer:
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			return "", false
		}
		sum := sha256.Sum256([]byte(token))
		return "bearer:" + hex.EncodeToString(sum[:16]), true
	case PrincipalCert:
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			return "", false
		}
		leaf := r.TLS.VerifiedChains[0][0]
		switch {
		case len(leaf.URIs) > 0:
			return "x509-uri:" + leaf.URIs[0].String(), true
		case len(leaf.DNSNames) > 0:
			return "x509-dns:" + leaf.DNSNames[0], true
		case leaf.Subject.CommonName != "":
			return "x509-cn:" + leaf.Subject.CommonName, true
		}
		return "", false
	case PrincipalHeader:
		values := r.Header.Values(p.cfg.PrincipalHeaderName)
		if len(values) != 1 || values[0] == "" || len(values[0]) > maxPrincipalHeader {
			return "", false
		}
		return "header:" + values[0], true
	}
	return "", false
}
