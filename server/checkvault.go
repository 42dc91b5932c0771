package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/mcp-sealer/sealer/keys/vault"
)

type checkNotesKey struct{}

// WithCheckNotes returns a context under which Check passes note, one line
// at a time, what it finds beyond problems: "warning: ..." for what is
// allowed but unwise (an exportable key, a token allowed more than the
// sealer needs), "ok: ..." for what an operator asked it to tell (the key is
// not exportable). Without it those go unsaid.
func WithCheckNotes(ctx context.Context, note func(string)) context.Context {
	return context.WithValue(ctx, checkNotesKey{}, note)
}

func checkNotes(ctx context.Context) (warn, ok func(string)) {
	note, _ := ctx.Value(checkNotesKey{}).(func(string))
	if note == nil {
		note = func(string) {}
	}
	return func(s string) { note("warning: " + s) }, func(s string) { note("ok: " + s) }
}

// checkVault tells, for the Transit modes, what a load does not: whether the
// key is exportable or backs up in plaintext, whether its type is one the
// sealer takes, and whether the token may do more with the key than the
// mode needs (sys/capabilities-self: export, backup, reconfigure, rotate,
// delete). A problem that stops serving is an error; the rest are warnings.
func checkVault(ctx context.Context, cfg Config, client *vaultapi.Client) error {
	if cfg.Keys != "vault-transit" && cfg.Keys != "vault-transit-exportable" {
		return nil
	}
	warn, ok := checkNotes(ctx)
	mount, name := cmp.Or(cfg.Vault.TransitMount, "transit"), cfg.Vault.TransitKey
	secret, err := client.Logical().ReadWithContext(ctx, mount+"/keys/"+name)
	if err != nil {
		return fmt.Errorf("vault: transit key %s: cannot read it: %v", name, err)
	}
	if secret == nil || secret.Data == nil {
		return fmt.Errorf("vault: transit key %s: no such key on mount %s", name, mount)
	}
	typ, _ := secret.Data["type"].(string)
	exportable, _ := secret.Data["exportable"].(bool)
	backup, _ := secret.Data["allow_plaintext_backup"].(bool)
	if !vault.SupportedType(typ) {
		return fmt.Errorf("vault: transit key %s has type %.40q: the sealer takes aes256-gcm96 or chacha20-poly1305", name, typ)
	}
	switch {
	case exportable && cfg.Keys == "vault-transit":
		return fmt.Errorf("vault: transit key %s is exportable: --keys vault-transit takes a key created non-exportable "+
			"(keep --keys vault-transit-exportable, or move to a new key as docs/OPERATIONS.md says)", name)
	case exportable:
		warn(fmt.Sprintf("transit key %s is exportable (for good: Vault never unsets the flag), and every replica reads it out of Vault; "+
			"move to a non-exportable key with --keys vault-transit (docs/OPERATIONS.md, Keys from Vault)", name))
	default:
		ok(fmt.Sprintf("transit key %s (%s) is not exportable: it never leaves Vault", name, typ))
	}
	if backup {
		warn(fmt.Sprintf("transit key %s allows plaintext backup: whoever may read %s/backup/%s holds the key", name, mount, name))
	}

	// What the mode needs: read of the key's policy, and either update on its
	// HMAC path or read of its export. Anything else on these paths is more.
	needs := map[string][]string{mount + "/keys/" + name: {"read"}}
	if cfg.Keys == "vault-transit" {
		needs[mount+"/hmac/"+name+"/sha2-256"] = []string{"update"}
	} else {
		needs[mount+"/export/encryption-key/"+name] = []string{"read"}
	}
	paths := []string{
		mount + "/keys/" + name, mount + "/keys/" + name + "/config", mount + "/keys/" + name + "/rotate",
		mount + "/export/encryption-key/" + name, mount + "/export/hmac-key/" + name, mount + "/backup/" + name,
		mount + "/hmac/" + name + "/sha2-256",
	}
	overGranted := false
	for _, path := range paths {
		caps, err := client.Sys().CapabilitiesSelfWithContext(ctx, path)
		if err != nil {
			warn(fmt.Sprintf("could not ask Vault what the token may do (sys/capabilities-self): %v", err))
			return nil
		}
		if slices.Contains(caps, "root") {
			warn("the token is a root token: give the sealer a token of the policy docs/OPERATIONS.md lists")
			return nil
		}
		var more []string
		for _, c := range caps {
			if c != "deny" && !slices.Contains(needs[path], c) {
				more = append(more, c)
			}
		}
		if len(more) > 0 {
			overGranted = true
			warn(fmt.Sprintf("the token's policy grants %s on %s, which --keys %s does not need: grant only the policy docs/OPERATIONS.md lists",
				strings.Join(more, ", "), path, cfg.Keys))
		}
		for _, c := range needs[path] {
			if !slices.Contains(caps, c) {
				return fmt.Errorf("vault: the token's policy lacks %s on %s", c, path)
			}
		}
	}
	if !overGranted {
		ok(fmt.Sprintf("the token may do no more with transit key %s than --keys %s needs", name, cfg.Keys))
	}
	return nil
}
