package vault_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/mcp-sealer/sealer/internal/testvault"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/keys/vault"
)

// sealerClient returns a client of v holding a token limited to policy, and
// a counter of its HMAC requests.
func sealerClient(t *testing.T, v *testvault.Server, policy string) (*vaultapi.Client, *atomic.Int64) {
	t.Helper()
	if err := v.Client.Sys().PutPolicy("sealer", policy); err != nil {
		t.Fatal(err)
	}
	token := v.Write(t, "auth/token/create", map[string]any{"policies": []string{"sealer"}, "ttl": "1h"}).Auth.ClientToken
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	hmacs := &atomic.Int64{}
	cfg.HttpClient.Transport = countHMAC{http.DefaultTransport, hmacs}
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(token)
	return c, hmacs
}

type countHMAC struct {
	http.RoundTripper
	n *atomic.Int64
}

func (c countHMAC) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/hmac/") {
		c.n.Add(1)
	}
	return c.RoundTripper.RoundTrip(r)
}

// TestTransit_NonExportableKey (Vault and OpenBao): a key created
// non-exportable, read with the minimal policy (no export path), gives the
// same ring to every source; a poll derives only new versions; rotation,
// activation and min_decryption_version behave as with an exported key.
func TestTransit_NonExportableKey(t *testing.T) {
	for _, kind := range testvault.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			v := kind.Start(t)
			v.Write(t, "transit/keys/sealer", map[string]any{"type": "aes256-gcm96"})
			client, hmacs := sealerClient(t, v, testvault.SealerPolicy)
			if _, err := client.Logical().Read("transit/export/encryption-key/sealer"); err == nil {
				t.Fatal("the policy lets the sealer export the key")
			}
			src := &vault.Transit{Client: client, Name: "sealer", Activation: time.Hour}
			first, err := src.Load(context.Background())
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if got := first.Versions(); !slices.Equal(got, []uint32{1}) {
				t.Fatalf("new key: got %v, want [1]", got)
			}
			other, err := (&vault.Transit{Client: client, Name: "sealer", Activation: time.Hour}).Load(context.Background())
			if err != nil || !other.Same(first) {
				t.Fatalf("a second replica's ring differs (%v)", err)
			}
			v.Write(t, "transit/keys/sealer/rotate", nil)
			v.Write(t, "transit/keys/sealer/rotate", nil)
			before := hmacs.Load()
			if got, sealing := versionsOf(t, src); !slices.Equal(got, []uint32{1, 2, 3}) || sealing != 1 {
				t.Fatalf("after two rotations: got %v sealing %d, want [1 2 3] sealing 1", got, sealing)
			}
			if n := hmacs.Load() - before; n != 2 {
				t.Errorf("a poll after two rotations made %d HMAC calls, want 2 (the new versions only)", n)
			}
			before = hmacs.Load()
			src.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			if _, sealing := versionsOf(t, src); sealing != 3 {
				t.Fatalf("after the activation delay: sealing %d, want 3", sealing)
			}
			if n := hmacs.Load() - before; n != 0 {
				t.Errorf("an unchanged key cost %d HMAC calls, want 0", n)
			}
			v.Write(t, "transit/keys/sealer/config", map[string]any{"min_decryption_version": 2})
			if got, _ := versionsOf(t, src); !slices.Equal(got, []uint32{2, 3}) {
				t.Fatalf("min_decryption_version 2: got %v, want [2 3]", got)
			}
		})
	}
}

// TestTransit_MinEncryptionVersion (Vault and OpenBao): both refuse an HMAC
// under a version below min_encryption_version; a key whose
// min_encryption_version is above its min_decryption_version is an error
// naming the fix, the same on every replica, until min_decryption_version
// follows.
func TestTransit_MinEncryptionVersion(t *testing.T) {
	for _, kind := range testvault.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			v := kind.Start(t)
			v.Write(t, "transit/keys/sealer", map[string]any{"type": "chacha20-poly1305"})
			v.Write(t, "transit/keys/sealer/rotate", nil)
			v.Write(t, "transit/keys/sealer/rotate", nil)
			v.Write(t, "transit/keys/sealer/config", map[string]any{"min_encryption_version": 2})
			if _, err := v.Client.Logical().Write("transit/hmac/sealer/sha2-256", map[string]any{"input": "eA==", "key_version": 1}); err == nil {
				t.Fatalf("%s computed an HMAC below min_encryption_version", kind.Name)
			}
			src := &vault.Transit{Client: v.Client, Name: "sealer"}
			if _, err := src.Load(context.Background()); err == nil || !strings.Contains(err.Error(), "min_decryption_version to 2") {
				t.Fatalf("min_encryption_version 2 over min_decryption_version 1: got %v, want an error naming the fix", err)
			}
			v.Write(t, "transit/keys/sealer/config", map[string]any{"min_decryption_version": 2})
			if got, _ := versionsOf(t, src); !slices.Equal(got, []uint32{2, 3}) {
				t.Fatalf("min_decryption_version 2: got %v, want [2 3]", got)
			}
		})
	}
}

// TestTransit_RefusesExportableKey: the non-exportable mode refuses an
// exportable key (an upgrade that kept the flag would derive other keys and
// open no state in flight), and the exportable mode a non-exportable one.
func TestTransit_RefusesExportableKey(t *testing.T) {
	v := testvault.Start(t)
	v.Write(t, "transit/keys/exported", map[string]any{"type": "aes256-gcm96", "exportable": true})
	v.Write(t, "transit/keys/kept", map[string]any{"type": "aes256-gcm96"})
	v.Write(t, "transit/keys/rsa", map[string]any{"type": "rsa-2048"})
	if _, err := (&vault.Transit{Client: v.Client, Name: "exported"}).Load(context.Background()); !errors.Is(err, vault.ErrExportable) {
		t.Errorf("exportable key: got %v, want ErrExportable", err)
	}
	for _, name := range []string{"rsa", "missing"} {
		if _, err := (&vault.Transit{Client: v.Client, Name: name}).Load(context.Background()); err == nil {
			t.Errorf("%s: loaded, want an error", name)
		}
	}
	if _, err := (&vault.TransitExport{Client: v.Client, Name: "kept"}).Load(context.Background()); err == nil || !strings.Contains(err.Error(), "not exportable") {
		t.Errorf("exportable mode on a non-exportable key: got %v", err)
	}
}

// TestTransit_Previous (Vault and OpenBao): during the move from an
// exportable key to a new non-exportable one, the ring holds the old key's
// versions with the very material the exportable mode read, then the new
// key's versions above them; min_decryption_version on the new key retires
// the old versions.
func TestTransit_Previous(t *testing.T) {
	for _, kind := range testvault.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			v := kind.Start(t)
			v.Write(t, "transit/keys/sealer", map[string]any{"type": "aes256-gcm96", "exportable": true})
			v.Write(t, "transit/keys/sealer/rotate", nil)
			v.Write(t, "transit/keys/sealer2", map[string]any{"type": "aes256-gcm96"})
			client, _ := sealerClient(t, v, testvault.MigrationPolicy)
			old, err := (&vault.TransitExport{Client: client, Name: "sealer"}).Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			src := &vault.Transit{Client: client, Name: "sealer2", Previous: "sealer"}
			moving, err := src.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !moving.Same(old) {
				t.Fatalf("while moving: %v, want the exportable mode's %v with the same material", moving, old)
			}
			v.Write(t, "transit/keys/sealer2/rotate", nil)
			v.Write(t, "transit/keys/sealer2/rotate", nil) // version 3: above the old key's 2
			if got, sealing := versionsOf(t, src); !slices.Equal(got, []uint32{1, 2, 3}) || sealing != 3 {
				t.Fatalf("new key rotated past the old: got %v sealing %d, want [1 2 3] sealing 3", got, sealing)
			}
			v.Write(t, "transit/keys/sealer2/config", map[string]any{"min_decryption_version": 3})
			if got, _ := versionsOf(t, src); !slices.Equal(got, []uint32{3}) {
				t.Fatalf("min_decryption_version 3 on the new key: got %v, want [3]", got)
			}
		})
	}
}

// TestTransit_SurprisingAnswers: whatever a server answers, Load returns an
// error, never a panic, and a denial is ErrDenied.
func TestTransit_SurprisingAnswers(t *testing.T) {
	goodKey := `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":1,"min_encryption_version":0,"keys":{"1":1700000000}}`
	goodHMAC := `{"hmac":"vault:v1:` + strings.Repeat("A", 43) + `="}`
	cases := []struct {
		name, key, hmac string
		hmacStatus      int
		want            error
	}{
		{name: "no data", key: `null`, hmac: goodHMAC},
		{name: "no min_decryption_version", key: `{"type":"aes256-gcm96","exportable":false,"keys":{"1":1}}`, hmac: goodHMAC},
		{name: "min_decryption_version a string", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":"1","keys":{"1":1}}`, hmac: goodHMAC},
		{name: "min_encryption_version a list", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":1,"min_encryption_version":[],"keys":{"1":1}}`, hmac: goodHMAC},
		{name: "no type", key: `{"exportable":false,"min_decryption_version":1,"keys":{"1":1}}`, hmac: goodHMAC},
		{name: "no exportable flag", key: `{"type":"aes256-gcm96","min_decryption_version":1,"keys":{"1":1}}`, hmac: goodHMAC},
		{name: "exportable a string", key: `{"type":"aes256-gcm96","exportable":"false","min_decryption_version":1,"keys":{"1":1}}`, hmac: goodHMAC},
		{name: "keys a list", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":1,"keys":[1]}`, hmac: goodHMAC},
		{name: "no versions", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":1,"keys":{}}`, hmac: goodHMAC},
		{name: "version 0", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":0,"keys":{"0":1}}`, hmac: goodHMAC},
		{name: "version not a number", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":1,"keys":{"x":1}}`, hmac: goodHMAC},
		{name: "version past uint32", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":1,"keys":{"4294967296":1}}`, hmac: goodHMAC},
		{name: "creation time a bool", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":1,"keys":{"1":true}}`, hmac: goodHMAC},
		{name: "all versions retired", key: `{"type":"aes256-gcm96","exportable":false,"min_decryption_version":2,"keys":{"1":1}}`, hmac: goodHMAC, want: keys.ErrNoKey},
		{name: "hmac empty", key: goodKey, hmac: `null`},
		{name: "hmac missing", key: goodKey, hmac: `{}`},
		{name: "hmac a number", key: goodKey, hmac: `{"hmac":7}`},
		{name: "hmac without prefix", key: goodKey, hmac: `{"hmac":"` + strings.Repeat("A", 43) + `="}`, want: keys.ErrBadKey},
		{name: "hmac of another version", key: goodKey, hmac: `{"hmac":"vault:v2:` + strings.Repeat("A", 43) + `="}`, want: keys.ErrBadKey},
		{name: "hmac short", key: goodKey, hmac: `{"hmac":"vault:v1:AAAA"}`, want: keys.ErrBadKey},
		{name: "hmac not base64", key: goodKey, hmac: `{"hmac":"vault:v1:!!!"}`, want: keys.ErrBadKey},
		{name: "hmac no separator", key: goodKey, hmac: `{"hmac":"vault:v1"}`, want: keys.ErrBadKey},
		{name: "hmac denied", key: goodKey, hmacStatus: http.StatusForbidden, want: vault.ErrDenied},
		{name: "hmac refused", key: goodKey, hmacStatus: http.StatusBadRequest},
		{name: "hmac server error", key: goodKey, hmacStatus: http.StatusInternalServerError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v1/transit/keys/sealer":
					fmt.Fprintf(w, `{"data":%s}`, tc.key)
				case r.Method != http.MethodGet && r.URL.Path == "/v1/transit/hmac/sealer/sha2-256":
					if tc.hmacStatus != 0 {
						w.WriteHeader(tc.hmacStatus)
						fmt.Fprint(w, `{"errors":["no"]}`)
						return
					}
					fmt.Fprintf(w, `{"data":%s}`, tc.hmac)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			cfg := vaultapi.DefaultConfig()
			cfg.Address = srv.URL
			cfg.MaxRetries = 0
			c, err := vaultapi.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c.SetToken("t")
			_, err = (&vault.Transit{Client: c, Name: "sealer"}).Load(context.Background())
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		// The fake itself serves a good key: the cases above fail for their
		// own reason.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.Method == http.MethodGet {
				fmt.Fprintf(w, `{"data":%s}`, goodKey)
				return
			}
			fmt.Fprintf(w, `{"data":%s}`, goodHMAC)
		}))
		defer srv.Close()
		cfg := vaultapi.DefaultConfig()
		cfg.Address = srv.URL
		c, _ := vaultapi.NewClient(cfg)
		c.SetToken("t")
		if _, err := (&vault.Transit{Client: c, Name: "sealer"}).Load(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTransit_DerivationAsFORMAT (Vault and OpenBao): master key version N
// is HMAC-SHA256 of HMACInput under the key's HMAC key of version N, as
// FORMAT.md states it. Checked on an exportable key, whose HMAC key can be
// exported and the HMAC computed here.
func TestTransit_DerivationAsFORMAT(t *testing.T) {
	if vault.HMACInput != "mcp-sealer/v1 master key" {
		t.Fatalf("HMACInput %q differs from FORMAT.md's", vault.HMACInput)
	}
	for _, kind := range testvault.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			v := kind.Start(t)
			v.Write(t, "transit/keys/x", map[string]any{"type": "aes256-gcm96", "exportable": true})
			v.Write(t, "transit/keys/x/rotate", nil)
			exported, _ := v.Read(t, "transit/export/hmac-key/x").Data["keys"].(map[string]any)
			for ver, k := range exported {
				key, err := base64.StdEncoding.DecodeString(k.(string))
				if err != nil {
					t.Fatal(err)
				}
				m := hmac.New(sha256.New, key)
				m.Write([]byte(vault.HMACInput))
				want := fmt.Sprintf("vault:v%s:%s", ver, base64.StdEncoding.EncodeToString(m.Sum(nil)))
				got := v.Write(t, "transit/hmac/x/sha2-256", map[string]any{"input": "bWNwLXNlYWxlci92MSBtYXN0ZXIga2V5", "key_version": ver}).Data["hmac"]
				if got != want {
					t.Errorf("version %s: %s answers %v, FORMAT.md gives %s", ver, kind.Name, got, want)
				}
			}
			if len(exported) != 2 {
				t.Fatalf("exported %d HMAC keys, want 2", len(exported))
			}
		})
	}
}
