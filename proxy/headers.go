package proxy

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mcp-sealer/sealer/mcpdigest"
)

// looseHeader is a header name as a CGI- or WSGI-style server reads it:
// case folded, '_' and '-' dropped (HTTP_X_SEALER_PRINCIPAL is
// X-Sealer-Principal, X_Sealer_Principal and X-Sealer_principal alike).
func looseHeader(name string) string { return strings.ToLower(strings.Map(dropSeparator, name)) }

// methodOverrides are the headers, as looseHeader spells them, that some
// servers take as the request's method in place of its own: removed in any
// spelling, so the upstream judges the method the proxy judged.
var methodOverrides = []string{"xhttpmethodoverride", "xhttpmethod", "xmethodoverride"}

// Headers of the MCP wire that the proxy checks against the body.
const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
)

// dropOwnedHeaders removes what the upstream could read as a header the
// proxy owns or checks: the method overrides in any spelling; the principal
// header in any spelling but its own in mode header and in every spelling
// otherwise; and any other spelling of the MCP headers and, in mode bearer,
// of Authorization. Go has already canonicalized the names it could, so a
// name in a spelling other than the canonical one is a variant.
func (p *Proxy) dropOwnedHeaders(h http.Header) {
	principal := looseHeader(p.cfg.PrincipalHeaderName)
	for name := range h {
		loose := looseHeader(name)
		switch {
		case slices.Contains(methodOverrides, loose):
			delete(h, name)
		case loose == principal:
			if p.cfg.Principal != PrincipalHeader || name != http.CanonicalHeaderKey(p.cfg.PrincipalHeaderName) {
				delete(h, name)
			}
		case loose == looseHeader(headerProtocolVersion), loose == looseHeader(headerMethod), loose == looseHeader(headerName),
			loose == "authorization" && p.cfg.Principal == PrincipalBearer:
			if name != http.CanonicalHeaderKey(name) || strings.ContainsAny(name, "_") {
				delete(h, name)
			}
		}
	}
}

// errHeaderMismatch answers, as go-sdk's servers do (-32020), a call whose
// MCP headers disagree with its body.
var errHeaderMismatch = &requestError{-32020, "invalid request: the Mcp-Method, Mcp-Name or MCP-Protocol-Version header disagrees with the body"}

// protocolWithHeaders is the first protocol version whose requests carry
// Mcp-Method and Mcp-Name; its servers refuse a request without them.
const protocolWithHeaders = "2026-07-28"

// checkHeaders refuses, before its state is opened, a call to one of the
// three methods that its upstream would refuse for its headers: a
// protocol version header other than _meta's, and from 2026-07-28 on a
// method or name header missing or other than the body's. Each header may
// be given once.
func checkHeaders(h http.Header, c *call) *requestError {
	one := func(name string) (string, bool) {
		v := h.Values(name)
		return strings.Join(v, ","), len(v) <= 1
	}
	version, ok1 := one(headerProtocolVersion)
	method, ok2 := one(headerMethod)
	name, ok3 := one(headerName)
	if !ok1 || !ok2 || !ok3 {
		return errHeaderMismatch
	}
	if meta := c.metaProtocolVersion(); meta != "" && version != meta {
		return errHeaderMismatch
	}
	if version < protocolWithHeaders && method == "" && name == "" {
		return nil
	}
	if method != c.method || name != c.target() {
		return errHeaderMismatch
	}
	return nil
}

// metaProtocolVersion is the protocol version the call's _meta names, ""
// when none.
func (c *call) metaProtocolVersion() string {
	var v string
	if raw, ok := c.meta("io.modelcontextprotocol/protocolVersion"); ok {
		json.Unmarshal(raw, &v)
	}
	return v
}

// meta returns the member name of the call's params._meta, when params and
// _meta are objects that have it.
func (c *call) meta(name string) (json.RawMessage, bool) {
	if c.params == nil {
		return nil, false
	}
	raw, ok := c.params.get("_meta")
	if !ok {
		return nil, false
	}
	meta, err := parseObject(raw)
	if err != nil {
		return nil, false
	}
	return meta.get(name)
}

// target is the request's name or uri.
func (c *call) target() string {
	var t string
	s, _ := mcpdigest.Salient(c.method)
	if v, ok := c.params.get(s.Target); ok {
		json.Unmarshal(v, &t)
	}
	return t
}

// asksUpgrade reports whether a request asks to switch protocols: an
// Upgrade header, or Connection naming upgrade. Streamable HTTP never
// upgrades, and past a 101 every byte would bypass the proxy.
func asksUpgrade(h http.Header) bool {
	if len(h.Values("Upgrade")) > 0 {
		return true
	}
	for _, line := range h.Values("Connection") {
		for _, token := range strings.Split(line, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// encoded reports whether any Content-Encoding line of h names a coding
// other than identity. Every line is read: a reader that takes another line
// than the first, or all of them, would decode what the proxy read as it is.
func encoded(h http.Header) bool {
	for _, line := range h.Values("Content-Encoding") {
		for _, coding := range strings.Split(line, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}
