package vault

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"
	"github.com/hashicorp/vault/api/auth/kubernetes"

	"github.com/mcp-sealer/sealer/internal/secretfile"
)

// Options says how to reach Vault and how to log in to it. Empty fields
// fall back to Vault's own variables (VAULT_ADDR, VAULT_CACERT,
// VAULT_CLIENT_CERT, VAULT_CLIENT_KEY, VAULT_NAMESPACE, VAULT_TOKEN).
type Options struct {
	Addr, Namespace               string
	CAFile, ClientCert, ClientKey string
	// Auth is the login method: "token" (the default), "approle" or
	// "kubernetes"; AuthMount its mount, the method's name by default.
	Auth, AuthMount string
	// TokenFile (token) holds the token, read again at every login,
	// instead of VAULT_TOKEN.
	TokenFile                string
	RoleIDFile, SecretIDFile string // approle
	// KubernetesRole is the Vault role of the kubernetes method;
	// KubernetesJWT the service-account token file, the pod's own when empty.
	KubernetesRole, KubernetesJWT string
	// Report and Info become the Login's (see [Login]).
	Report func(error)
	Info   func(msg string, args ...any)
}

// NewLogin builds the Vault client o describes and the [Login] that keeps it
// logged in with the method o chooses: a token (VAULT_TOKEN, or TokenFile
// read at every login), AppRole or Kubernetes. It calls no Vault; it reads
// the token and role id files, and refuses a credential file others may
// read (secretfile). The client is the Login's; start the Login with
// Login.Login, then Login.Run.
func NewLogin(o Options) (*Login, error) {
	client, err := newClient(o)
	if err != nil {
		return nil, err
	}
	login := &Login{Client: client, Name: cmp.Or(o.Auth, "token"), Report: o.Report, Info: o.Info}
	switch o.Auth {
	case "", "token":
		if o.TokenFile != "" {
			login.Name = "token file"
			tf := TokenFile{Path: o.TokenFile}
			token, err := tf.Token()
			if err != nil {
				return nil, err // missing or empty: configuration
			}
			client.SetToken(token)
			login.Method = tf
			break
		}
		if client.Token() == "" {
			return nil, errors.New("vault token auth: set VAULT_TOKEN or --vault-token-file")
		}
	case "approle":
		if login.Method, err = appRole(o); err != nil {
			return nil, err
		}
	case "kubernetes":
		if login.Method, err = kubernetesAuth(o); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("vault-auth %q: want token, approle or kubernetes", o.Auth)
	}
	return login, nil
}

// newClient builds a client for o's address, TLS files and namespace, whose
// calls wait at most ten seconds and are retried at most once.
func newClient(o Options) (*vaultapi.Client, error) {
	vc := vaultapi.DefaultConfig() // reads the VAULT_* variables
	if vc.Error != nil {
		return nil, fmt.Errorf("vault: %v", vc.Error)
	}
	if o.Addr != "" {
		vc.Address = o.Addr
	}
	if o.CAFile != "" || o.ClientCert != "" || o.ClientKey != "" {
		if err := vc.ConfigureTLS(&vaultapi.TLSConfig{CACert: o.CAFile, ClientCert: o.ClientCert, ClientKey: o.ClientKey}); err != nil {
			return nil, fmt.Errorf("vault TLS: %v", err)
		}
	}
	vc.MaxRetries = 1
	vc.Timeout = 10 * time.Second
	client, err := vaultapi.NewClient(vc)
	if err != nil {
		return nil, fmt.Errorf("vault: %v", err)
	}
	if o.Namespace != "" {
		client.SetNamespace(o.Namespace)
	}
	return client, nil
}

// appRole is the AppRole method of o: its role id read now, its secret id
// read by the Vault library at every login.
func appRole(o Options) (vaultapi.AuthMethod, error) {
	if o.RoleIDFile == "" || o.SecretIDFile == "" {
		return nil, errors.New("vault approle: set --vault-role-id-file and --vault-secret-id-file")
	}
	roleID, err := secretfile.ReadToken(o.RoleIDFile)
	if err != nil {
		return nil, fmt.Errorf("vault approle role id file: %v", err)
	}
	// The Vault library reads the secret id at every login: its file is
	// checked here, as every credential file is.
	if err := secretfile.Check(o.SecretIDFile); err != nil {
		return nil, fmt.Errorf("vault approle secret id file: %v", err)
	}
	m, err := approle.NewAppRoleAuth(roleID, &approle.SecretID{FromFile: o.SecretIDFile}, approle.WithMountPath(cmp.Or(o.AuthMount, "approle")))
	if err != nil {
		return nil, fmt.Errorf("vault approle: %v", err)
	}
	return m, nil
}

// kubernetesAuth is the Kubernetes method of o, with the service-account
// token file o names or the pod's own.
func kubernetesAuth(o Options) (vaultapi.AuthMethod, error) {
	opts := []kubernetes.LoginOption{kubernetes.WithMountPath(cmp.Or(o.AuthMount, "kubernetes"))}
	if o.KubernetesJWT != "" {
		if err := secretfile.Check(o.KubernetesJWT); err != nil {
			return nil, fmt.Errorf("vault kubernetes token file: %v", err)
		}
		opts = append(opts, kubernetes.WithServiceAccountTokenPath(o.KubernetesJWT))
	}
	m, err := kubernetes.NewKubernetesAuth(o.KubernetesRole, opts...)
	if err != nil {
		return nil, fmt.Errorf("vault kubernetes: %v", err)
	}
	return m, nil
}
