package vault_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"

	"github.com/mcp-sealer/sealer/internal/testvault"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/keys/vault"
)

func versionsOf(t *testing.T, src keys.Source) ([]uint32, uint32) {
	t.Helper()
	r, err := src.Load(context.Background())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return r.Versions(), r.SealingVersion()
}

func TestTransitExport_LoadRotateRetire(t *testing.T) {
	v := testvault.Start(t)
	v.Write(t, "transit/keys/sealer", map[string]any{"type": "aes256-gcm96", "exportable": true})
	src := &vault.TransitExport{Client: v.Client, Name: "sealer", Activation: time.Hour}
	if got, sealing := versionsOf(t, src); !slices.Equal(got, []uint32{1}) || sealing != 1 {
		t.Fatalf("new key: got %v sealing %d, want [1] sealing 1", got, sealing)
	}
	v.Write(t, "transit/keys/sealer/rotate", nil)
	if got, sealing := versionsOf(t, src); !slices.Equal(got, []uint32{1, 2}) || sealing != 1 {
		t.Fatalf("after rotation: got %v sealing %d, want [1 2] sealing 1 (2 not yet active)", got, sealing)
	}
	src.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, sealing := versionsOf(t, src); sealing != 2 {
		t.Fatalf("after the activation delay: sealing %d, want 2", sealing)
	}
	v.Write(t, "transit/keys/sealer/rotate", nil)
	v.Write(t, "transit/keys/sealer/config", map[string]any{"min_decryption_version": 2})
	if got, _ := versionsOf(t, src); !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("min_decryption_version 2: got %v, want [2 3]", got)
	}
}

func TestTransitExport_Refuses(t *testing.T) {
	v := testvault.Start(t)
	v.Write(t, "transit/keys/unexportable", map[string]any{"type": "aes256-gcm96"})
	v.Write(t, "transit/keys/rsa", map[string]any{"type": "rsa-2048", "exportable": true})
	for _, name := range []string{"unexportable", "rsa", "missing"} {
		if _, err := (&vault.TransitExport{Client: v.Client, Name: name}).Load(context.Background()); err == nil {
			t.Errorf("%s: loaded, want an error", name)
		}
	}
}

func TestKV_LoadRotateRetire(t *testing.T) {
	v := testvault.Start(t)
	put := func(b byte) {
		v.Write(t, "secret/data/sealer", map[string]any{"data": map[string]any{"key": b64(b)}})
	}
	put(1)
	src := &vault.KV{Client: v.Client, Path: "sealer", Activation: time.Hour}
	if got, _ := versionsOf(t, src); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("got %v, want [1]", got)
	}
	put(2)
	put(3)
	if got, sealing := versionsOf(t, src); !slices.Equal(got, []uint32{1, 2, 3}) || sealing != 1 {
		t.Fatalf("after two rotations: got %v sealing %d, want [1 2 3] sealing 1", got, sealing)
	}
	v.Write(t, "secret/metadata/sealer", map[string]any{"custom_metadata": map[string]any{"min_version": "2"}})
	if got, _ := versionsOf(t, src); !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("min_version 2: got %v, want [2 3]", got)
	}
	if _, err := v.Client.Logical().Delete("secret/data/sealer"); err != nil { // deletes the latest version
		t.Fatal(err)
	}
	if got, _ := versionsOf(t, src); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("latest deleted: got %v, want [2]", got)
	}
	v.Write(t, "secret/data/sealer", map[string]any{"data": map[string]any{"key": "short"}})
	if _, err := src.Load(context.Background()); !errors.Is(err, keys.ErrBadKey) {
		t.Fatalf("malformed version: got %v, want ErrBadKey", err)
	}
}

func b64(b byte) string {
	return strings.Repeat(string("ABCDEFGHIJKLMNOPQRSTUVWXYZ"[b%26]), 43) + "="
}

// TestRefresher_FollowsRotationWithinOnePoll: a ring refreshed every 200ms
// holds a new version within one poll of the rotation, from Transit and
// exported from Transit, and from KV v2.
func TestRefresher_FollowsRotationWithinOnePoll(t *testing.T) {
	v := testvault.Start(t)
	v.Write(t, "transit/keys/sealer", map[string]any{"type": "chacha20-poly1305"})
	v.Write(t, "transit/keys/exported", map[string]any{"type": "chacha20-poly1305", "exportable": true})
	kvPut := func(b byte) { v.Write(t, "secret/data/sealer", map[string]any{"data": map[string]any{"key": b64(b)}}) }
	kvPut(1)
	for name, tc := range map[string]struct {
		src    keys.Source
		rotate func()
	}{
		"transit":  {&vault.Transit{Client: v.Client, Name: "sealer"}, func() { v.Write(t, "transit/keys/sealer/rotate", nil) }},
		"exported": {&vault.TransitExport{Client: v.Client, Name: "exported"}, func() { v.Write(t, "transit/keys/exported/rotate", nil) }},
		"kv":       {&vault.KV{Client: v.Client, Path: "sealer"}, func() { kvPut(2) }},
	} {
		t.Run(name, func(t *testing.T) {
			r := keys.NewRefresher(tc.src, 200*time.Millisecond, nil)
			if err := r.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go r.Run(ctx)
			before := r.Ring()
			tc.rotate()
			rotated := time.Now()
			for r.Ring().Newest() != 2 {
				if time.Since(rotated) > 10*time.Second {
					t.Fatal("rotation not seen within 10s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("rotation seen after %v (poll 200ms)", time.Since(rotated).Round(time.Millisecond))
			if r.Ring() == before || r.LastGood().IsZero() {
				t.Fatal("ring not replaced")
			}
		})
	}
}

// TestVaultLogin_AppRoleRenewsAndRecoversFromRevocation: an AppRole login
// with a short token TTL is renewed by the lifetime watcher, and when the
// token is revoked a denied read makes it log in again.
func TestVaultLogin_AppRoleRenewsAndRecoversFromRevocation(t *testing.T) {
	v := testvault.Start(t)
	v.Write(t, "transit/keys/sealer", map[string]any{"type": "aes256-gcm96"})
	if err := v.Client.Sys().PutPolicy("sealer", testvault.SealerPolicy); err != nil {
		t.Fatal(err)
	}
	if err := v.Client.Sys().EnableAuthWithOptions("approle", &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	v.Write(t, "auth/approle/role/sealer", map[string]any{"token_policies": "sealer", "token_ttl": "3s", "token_max_ttl": "1h"})
	roleID := v.Read(t, "auth/approle/role/sealer/role-id").Data["role_id"].(string)
	secretID := v.Write(t, "auth/approle/role/sealer/secret-id", nil).Data["secret_id"].(string)

	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	client, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client.ClearToken()
	method, err := approle.NewAppRoleAuth(roleID, &approle.SecretID{FromString: secretID})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports, infos []string
	login := &vault.Login{Client: client, Method: method, Retry: 100 * time.Millisecond, Name: "approle",
		Report: func(err error) { mu.Lock(); reports = append(reports, err.Error()); mu.Unlock() },
		Info: func(msg string, args ...any) {
			mu.Lock()
			infos = append(infos, fmt.Sprint(append([]any{msg}, args...)...))
			mu.Unlock()
		}}
	first, err := login.Login(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	firstToken := client.Token()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go login.Run(ctx, first)

	src := &vault.Transit{Client: client, Name: "sealer"}
	// The lifetime watcher renews the token before its 3s TTL ends: wait
	// for the renewal it logs, then Vault must say the token now lives past
	// the end its login gave it, and the token must still serve.
	waitFor(t, "the token renewed", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(infos, func(line string) bool { return strings.HasPrefix(line, "vault token renewed") })
	})
	if created, expires := tokenLife(t, v.Client, firstToken); !expires.After(created.Add(3 * time.Second)) {
		t.Fatalf("after the renewal the token created at %v expires at %v: not past its 3s TTL", created, expires)
	}
	if _, err := src.Load(context.Background()); err != nil {
		t.Fatalf("after the renewal: %v", err)
	}
	if client.Token() != firstToken {
		t.Fatal("token replaced; want the same token, renewed")
	}

	if err := v.Client.Auth().Token().RevokeTree(firstToken); err != nil {
		t.Fatal(err)
	}
	_, err = src.Load(context.Background())
	if !errors.Is(err, vault.ErrDenied) {
		t.Fatalf("revoked token: got %v, want ErrDenied", err)
	}
	login.Relogin()
	waitFor(t, "a load with a new login after the revocation", 30*time.Second, func() bool {
		_, err = src.Load(context.Background())
		return err == nil
	})
	if client.Token() == firstToken {
		t.Fatal("recovered with the revoked token?")
	}
	mu.Lock()
	defer mu.Unlock()
	logins, renewals := 0, 0
	for _, line := range infos {
		switch {
		case strings.HasPrefix(line, "vault login succeeded"):
			logins++
		case strings.HasPrefix(line, "vault token renewed"):
			renewals++
		}
	}
	// Two logins (the first, and after the revocation); the first token was
	// renewed, maybe several times, and logged once.
	if logins != 2 || renewals < 1 || renewals > 2 {
		t.Errorf("info lines %q: %d logins and %d renewals logged, want 2 and 1 or 2 (the first renewal of each token)", infos, logins, renewals)
	}
	for _, r := range append(reports, infos...) {
		for _, secret := range []string{firstToken, client.Token(), secretID, roleID} {
			if strings.Contains(r, secret) {
				t.Errorf("report %q holds a credential", r)
			}
		}
	}

}

// waitFor polls cond every 50ms until it holds, or fails the test after
// within, naming what did not happen.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

// tokenLife returns when Vault says token was created and when it expires,
// both on Vault's clock.
func tokenLife(t *testing.T, admin *vaultapi.Client, token string) (created, expires time.Time) {
	t.Helper()
	s, err := admin.Auth().Token().Lookup(token)
	if err != nil {
		t.Fatalf("token lookup: %v", err)
	}
	n, ok := s.Data["creation_time"].(json.Number)
	if !ok {
		t.Fatalf("token lookup: creation_time %v", s.Data["creation_time"])
	}
	secs, err := n.Int64()
	if err != nil {
		t.Fatalf("token lookup: creation_time %v", n)
	}
	e, ok := s.Data["expire_time"].(string)
	if !ok {
		t.Fatalf("token lookup: expire_time %v", s.Data["expire_time"])
	}
	if expires, err = time.Parse(time.RFC3339Nano, e); err != nil {
		t.Fatalf("token lookup: expire_time %q: %v", e, err)
	}
	return time.Unix(secs, 0), expires
}
