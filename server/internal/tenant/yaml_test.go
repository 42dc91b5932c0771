package tenant

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tenants mapping is decoded by hand (tenantMap): it must refuse what
// the file's strict decoder refused.
func TestTenantMap_RefusesWhatTheStrictDecoderRefused(t *testing.T) {
	h := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct{ name, yaml, err string }{
		{"duplicate tenant", "tenants:\n  a:\n    tokens: [" + h + "]\n  a:\n    tokens: [" + h + "]\n", `"a" already defined`},
		{"unknown policy field", "tenants:\n  a:\n    tokens: [" + h + "]\n    policy: {color: red}\n", "field color not found"},
		{"unknown mtls field", "tenants:\n  a:\n    mtls: {ip: [1.2.3.4]}\n", "field ip not found"},
		{"duplicate field", "tenants:\n  a:\n    tokens: [" + h + "]\n    tokens: [" + h + "]\n", "already defined"},
		{"not a mapping", "tenants: [a, b]\n", "must be a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tenants.yaml")
			os.WriteFile(path, []byte(tc.yaml), 0o600)
			_, err := Load(path, testBounds, true)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error with %q", err, tc.err)
			}
		})
	}
}
