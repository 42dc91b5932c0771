package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeManyTenants writes a tenants file of n tenants, half authenticated by
// a bearer token ("token-<i>"), half by a client certificate's DNS SAN, as
// the scale section of scripts/bench.sh configures them.
func writeManyTenants(t testing.TB, n int) string {
	var b strings.Builder
	b.WriteString("tenants:\n")
	for i := range n {
		if i%2 == 0 {
			sum := sha256.Sum256(fmt.Appendf(nil, "token-%d", i))
			fmt.Fprintf(&b, "  t%d:\n    tokens: [\"sha256:%s\"]\n", i, hex.EncodeToString(sum[:]))
		} else {
			fmt.Fprintf(&b, "  t%d:\n    mtls: {dns: [\"t%d.tenants.example\"]}\n", i, i)
		}
	}
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestManyTenants_EveryTokenFindsItsTenant(t *testing.T) {
	ts, err := Load(writeManyTenants(t, 1000), testBounds, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i += 2 {
		if got := ts.byToken(fmt.Sprintf("token-%d", i)); got == nil || got.Name != fmt.Sprintf("t%d", i) {
			t.Fatalf("token-%d: got %v, want t%d", i, got, i)
		}
	}
	if got := ts.byToken("token-1"); got != nil {
		t.Errorf("token-1 (a certificate tenant's number): got %s, want none", got.Name)
	}
}

// BenchmarkByToken is the bearer token lookup of every call, by the number
// of tenants configured (half of them with a token).
func BenchmarkByToken(b *testing.B) {
	for _, n := range []int{1, 1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ts, err := Load(writeManyTenants(b, n), testBounds, true)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if ts.byToken("token-0") == nil {
					b.Fatal("token-0 not found")
				}
			}
		})
	}
}

// BenchmarkLoadTenants is the work of a start or a SIGHUP reload, by the
// number of tenants.
func BenchmarkLoadTenants(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			path := writeManyTenants(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Load(path, testBounds, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
