package vault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/mcp-sealer/sealer/internal/secretfile"
)

// Login keeps a Vault client logged in: it logs in with Method (AppRole,
// Kubernetes, ...), keeps the token renewed with Vault's lifetime watcher,
// and logs in again when renewal is no longer possible or Relogin is called
// (on a denial: a revoked token). With a nil Method the client's own token
// (VAULT_TOKEN or a token file) is used and renewed while renewable.
type Login struct {
	Client *vaultapi.Client
	Method vaultapi.AuthMethod
	// Report receives login and renewal failures; never a token.
	Report func(error)
	// Info, when set, receives one line per successful login and the first
	// renewal of each token: the method (Name), the token's TTL, whether it
	// renews, and its policies; never a token or an accessor.
	Info func(msg string, args ...any)
	// Name is the login method as the log lines name it ("approle", ...).
	Name string
	// Retry is the first pause after a failed login, one second when zero;
	// it doubles after each failure up to maxRetry, with jitter, so that a
	// fleet never hammers Vault into locking its role out.
	Retry time.Duration

	once    sync.Once
	relogin chan struct{}
	ok      atomic.Bool
}

// maxRetry bounds the pause between failed logins.
const maxRetry = time.Minute

// OK reports whether the last login or renewal succeeded and no denial
// came since.
func (l *Login) OK() bool { return l.ok.Load() }

// Relogin asks Run to log in again. It never blocks.
func (l *Login) Relogin() {
	l.ok.Store(false)
	select {
	case l.kick() <- struct{}{}:
	default:
	}
}

func (l *Login) kick() chan struct{} {
	l.once.Do(func() { l.relogin = make(chan struct{}, 1) })
	return l.relogin
}

// Login logs in once (or, with a nil Method, renews the client's token) and
// returns the secret to watch, nil when there is nothing to renew.
func (l *Login) Login(ctx context.Context) (*vaultapi.Secret, error) {
	s, err := l.login(ctx)
	l.ok.Store(err == nil)
	if err == nil {
		l.info("vault login succeeded", s)
	}
	return s, err
}

// info logs a successful login or renewal with what it says of the token.
func (l *Login) info(msg string, s *vaultapi.Secret) {
	if l.Info == nil {
		return
	}
	args := []any{"method", l.Name}
	if s != nil && s.Auth != nil {
		args = append(args, "ttl", (time.Duration(s.Auth.LeaseDuration) * time.Second).String(),
			"renewable", s.Auth.Renewable, "policies", strings.Join(s.Auth.TokenPolicies, ","))
	} else {
		args = append(args, "renewable", false)
	}
	l.Info(msg, args...)
}

func (l *Login) login(ctx context.Context) (*vaultapi.Secret, error) {
	if l.Method != nil {
		s, err := l.Client.Auth().Login(ctx, l.Method)
		if err != nil {
			return nil, fmt.Errorf("keys: vault login: %v", err)
		}
		if s == nil || s.Auth == nil {
			return nil, errors.New("keys: vault login returned no token")
		}
		return s, nil
	}
	s, err := l.Client.Auth().Token().RenewSelfWithContext(ctx, 0)
	if err != nil {
		return nil, nil // a root or periodic-less token cannot renew: use it as it is
	}
	return s, nil
}

// Run keeps the token alive until ctx is done, then returns nil. Call
// Login first and pass its secret (nil if it failed): a failed login is
// tried again after Retry, doubling up to a minute; a token whose renewal
// ends, or that Vault denies (Relogin), is replaced by a new login after
// the same pause.
func (l *Login) Run(ctx context.Context, first *vaultapi.Secret) error {
	retry := l.Retry
	if retry <= 0 {
		retry = time.Second
	}
	report := l.Report
	if report == nil {
		report = func(error) {}
	}
	relogin := l.kick()
	secret, pause := first, retry
	again := l.Method != nil && !l.OK() // the first login failed
	for {
		if again {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(pause/2 + rand.N(pause/2+1)):
			}
			var err error
			if secret, err = l.Login(ctx); err != nil {
				report(err)
				pause = min(2*pause, maxRetry)
				continue
			}
			again, pause = false, retry
		}
		if secret == nil || secret.Auth == nil || !secret.Auth.Renewable {
			// Nothing to renew: wait for a denial or the end.
			select {
			case <-ctx.Done():
				return nil
			case <-relogin:
			}
		} else if err := l.watch(ctx, secret, relogin); err != nil {
			l.ok.Store(false)
			report(err)
		}
		if ctx.Err() != nil {
			return nil
		}
		if l.Method == nil {
			secret = nil // a given token cannot log in again
			report(errors.New("keys: vault token can no longer be renewed and no login method is configured"))
			continue
		}
		again = true
	}
}

// watch renews secret's token until renewal ends, a relogin is asked for, or
// ctx is done.
func (l *Login) watch(ctx context.Context, secret *vaultapi.Secret, relogin <-chan struct{}) error {
	w, err := l.Client.NewLifetimeWatcher(&vaultapi.LifetimeWatcherInput{Secret: secret})
	if err != nil {
		return fmt.Errorf("keys: vault token watcher: %v", err)
	}
	go w.Start()
	defer w.Stop()
	renewed := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-relogin:
			return nil
		case err := <-w.DoneCh():
			if err != nil {
				return fmt.Errorf("keys: vault token renewal ended: %v", err)
			}
			return nil
		case r := <-w.RenewCh():
			if !renewed && r != nil {
				renewed = true
				l.info("vault token renewed (later renewals of this token are not logged)", r.Secret)
			}
		}
	}
}

// TokenFile logs in with the token a file holds: a Vault Agent sink, or a
// mounted secret that something else renews. Every login reads the file
// again, so the token in force is the file's at the last login; Login.Run
// logs in again on a denial, and whoever watches the file calls Relogin when
// it changes.
type TokenFile struct{ Path string }

var _ vaultapi.AuthMethod = TokenFile{}

// Login implements vaultapi.AuthMethod. A renewable token comes back with
// its lease, for Login.Run to keep renewed; when renewal fails (a token that
// cannot renew, Vault unreachable) it is used as it is until a denial or a
// change of the file.
func (f TokenFile) Login(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error) {
	token, err := f.Token()
	if err != nil {
		return nil, err
	}
	tc, err := c.Clone()
	if err != nil {
		return nil, fmt.Errorf("keys: vault client: %v", err)
	}
	tc.SetToken(token)
	// The token must be one Vault accepts: a revoked or expired one is a
	// failed login, so that the login state says so and Run tries again.
	if _, err := tc.Auth().Token().LookupSelfWithContext(ctx); err != nil {
		return nil, fmt.Errorf("keys: vault token file %s: the token is not accepted: %w", f.Path, denied(err))
	}
	if s, err := tc.Auth().Token().RenewSelfWithContext(ctx, 0); err == nil && s != nil && s.Auth != nil && s.Auth.ClientToken == token {
		return s, nil
	}
	return &vaultapi.Secret{Auth: &vaultapi.SecretAuth{ClientToken: token}}, nil
}

// Token reads the token the file holds now, without calling Vault.
func (f TokenFile) Token() (string, error) {
	token, err := secretfile.ReadToken(f.Path)
	if err != nil {
		return "", fmt.Errorf("keys: vault token file: %v", err)
	}
	return token, nil
}

// denied turns Vault's 403 into ErrDenied; other errors pass as they are.
func denied(err error) error {
	var re *vaultapi.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
		return ErrDenied
	}
	return err
}
