package vault_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/keys/vault"
)

// TestNewLogin: the options choose the login method, a credential file is
// read (or checked) when the Login is built and refused when others may
// read it, and every refusal says what to set, never what a file holds.
// No Vault is called.
func TestNewLogin(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(" s3cret-"+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	private, shared := file("private", 0o600), file("shared", 0o644)
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name     string
		env      string // VAULT_TOKEN
		opts     vault.Options
		wantErr  string // a part of the error; "" for none
		wantName string // the Login's name for its log lines
		method   bool   // whether the Login logs in with a method
		token    string // the client's token once built
	}{
		{name: "token from VAULT_TOKEN", env: "env-token", wantName: "token", token: "env-token"},
		{name: "token auth named", env: "env-token", opts: vault.Options{Auth: "token"}, wantName: "token", token: "env-token"},
		{name: "no token", wantErr: "vault token auth: set VAULT_TOKEN or --vault-token-file"},
		{name: "token file", env: "env-token", opts: vault.Options{TokenFile: private}, wantName: "token file", method: true, token: "s3cret-private"},
		{name: "token file others may read", opts: vault.Options{TokenFile: shared}, wantErr: "keys: vault token file: secretfile: a credential file must belong"},
		{name: "token file missing", opts: vault.Options{TokenFile: missing}, wantErr: "keys: vault token file: open "},
		{name: "approle without files", opts: vault.Options{Auth: "approle", RoleIDFile: private},
			wantErr: "vault approle: set --vault-role-id-file and --vault-secret-id-file"},
		{name: "approle role id others may read", opts: vault.Options{Auth: "approle", RoleIDFile: shared, SecretIDFile: private},
			wantErr: "vault approle role id file: secretfile: a credential file must belong"},
		{name: "approle secret id others may read", opts: vault.Options{Auth: "approle", RoleIDFile: private, SecretIDFile: shared},
			wantErr: "vault approle secret id file: secretfile: a credential file must belong"},
		{name: "approle secret id missing", opts: vault.Options{Auth: "approle", RoleIDFile: private, SecretIDFile: missing},
			wantErr: "vault approle secret id file: stat "},
		{name: "approle", opts: vault.Options{Auth: "approle", RoleIDFile: private, SecretIDFile: private}, wantName: "approle", method: true},
		{name: "kubernetes token others may read", opts: vault.Options{Auth: "kubernetes", KubernetesRole: "sealer", KubernetesJWT: shared},
			wantErr: "vault kubernetes token file: secretfile: a credential file must belong"},
		{name: "kubernetes without role", opts: vault.Options{Auth: "kubernetes", KubernetesJWT: private}, wantErr: "vault kubernetes: "},
		{name: "kubernetes", opts: vault.Options{Auth: "kubernetes", KubernetesRole: "sealer", KubernetesJWT: private}, wantName: "kubernetes", method: true},
		{name: "unknown method", env: "env-token", opts: vault.Options{Auth: "ldap"}, wantErr: `vault-auth "ldap": want token, approle or kubernetes`},
		{name: "CA file missing", env: "env-token", opts: vault.Options{CAFile: missing}, wantErr: "vault TLS: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VAULT_TOKEN", tc.env)
			login, err := vault.NewLogin(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one with %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("the error %q quotes a credential", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if login.Name != tc.wantName || (login.Method != nil) != tc.method {
				t.Fatalf("got login %q with method %T, want %q with a method: %v", login.Name, login.Method, tc.wantName, tc.method)
			}
			if tc.token != "" && login.Client.Token() != tc.token {
				t.Fatalf("got the client's token %q, want %q", login.Client.Token(), tc.token)
			}
		})
	}
}

// TestNewLogin_Client: the address and namespace given win over Vault's
// variables, and the Login's client is the one they built.
func TestNewLogin_Client(t *testing.T) {
	t.Setenv("VAULT_ADDR", "http://127.0.0.1:1")
	t.Setenv("VAULT_TOKEN", "env-token")
	t.Setenv("VAULT_NAMESPACE", "")
	login, err := vault.NewLogin(vault.Options{Addr: "http://127.0.0.1:2", Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if got := login.Client.Address(); got != "http://127.0.0.1:2" {
		t.Errorf("got address %s, want http://127.0.0.1:2", got)
	}
	if got := login.Client.Namespace(); got != "team" {
		t.Errorf("got namespace %q, want team", got)
	}
}
