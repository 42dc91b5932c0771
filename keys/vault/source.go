// Package vault loads key rings from HashiCorp Vault or OpenBao: master key
// versions derived inside Transit from a key that never leaves it
// ([Transit]), read out of an exportable Transit key ([TransitExport]), or
// read from the versions of a KV v2 secret ([KV]); and it builds a Vault
// client with its login from plain [Options] ([NewLogin]) and keeps it
// logged in ([Login]). Each source is a [keys.Source] for a
// [keys.Refresher]. Only programs that take keys from Vault link it.
package vault

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/mcp-sealer/sealer/keys"
)

// ErrDenied means Vault refused the sealer's token (403): it expired,
// was revoked, or lacks the policy. A login manager logs in again on it.
var ErrDenied = errors.New("vault: access denied")

// TransitExport loads the versions of an exportable Vault Transit key (type
// aes256-gcm96 or chacha20-poly1305) as master key versions, by reading
// them out of Vault: Vault's version numbers become key ids, and versions
// below the key's min_decryption_version are left out, so states sealed with
// them no longer open. Rotation is Vault's: `vault write -f
// transit/keys/NAME/rotate`, or the key's auto_rotate_period. Every replica
// holds the key itself: it stays for fleets that started on it, and for
// their move to [Transit] (see Transit.Previous).
type TransitExport struct {
	Client *vaultapi.Client
	// Mount is the Transit mount path, "transit" by default; Name the key.
	Mount, Name string
	// Activation is how old a version must be before it seals (see
	// Activated); Now is the clock, time.Now when nil.
	Activation time.Duration
	Now        func() time.Time
}

var _ keys.Source = (*TransitExport)(nil)

// Load implements keys.Source with two reads: the key's policy, then its export.
func (t *TransitExport) Load(ctx context.Context) (*keys.Ring, error) {
	versions, err := t.versions(ctx)
	if err != nil {
		return nil, err
	}
	return keys.Activated(versions, now(t.Now), t.Activation)
}

// versions reads the key's live versions out of Vault.
func (t *TransitExport) versions(ctx context.Context) ([]keys.Key, error) {
	mount := cmp.Or(t.Mount, "transit")
	k, err := readTransitKey(ctx, t.Client, mount, t.Name)
	if err != nil {
		return nil, err
	}
	if !k.exportable {
		return nil, fmt.Errorf("keys: transit key %s is not exportable: take it with --keys vault-transit", t.Name)
	}
	export, err := read(ctx, t.Client, mount+"/export/encryption-key/"+t.Name, nil)
	if err != nil {
		return nil, err
	}
	material, ok := export["keys"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("keys: transit key %s: export holds no keys", t.Name)
	}
	var versions []keys.Key
	for v, m := range material {
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("keys: transit key %s: version %.10q is not a number", t.Name, v)
		}
		if int64(id) < k.minDecrypt {
			continue
		}
		at, ok := k.created[uint32(id)]
		if !ok {
			return nil, fmt.Errorf("keys: transit key %s: exported version %d is not in its policy", t.Name, id)
		}
		key, err := decodeKey(uint32(id), m, at)
		if err != nil {
			return nil, err
		}
		versions = append(versions, key)
	}
	return versions, nil
}

// KV loads master key versions from the versions of one Vault KV v2 secret.
// Each version of the secret holds {"key": "<base64 of 32 bytes>"} and is key
// version N. Rotate by writing a new version; retire versions below N with
// the secret's custom metadata min_version=N (`vault kv metadata put
// -custom-metadata=min_version=N`). Deleted and destroyed versions are left
// out.
type KV struct {
	Client *vaultapi.Client
	// Mount is the KV v2 mount path, "secret" by default; Path the secret.
	Mount, Path string
	// Activation and Now are as for TransitExport.
	Activation time.Duration
	Now        func() time.Time
}

var _ keys.Source = (*KV)(nil)

// Load implements keys.Source: one read of the metadata, one per live version.
func (s *KV) Load(ctx context.Context) (*keys.Ring, error) {
	mount := cmp.Or(s.Mount, "secret")
	meta, err := read(ctx, s.Client, mount+"/metadata/"+s.Path, nil)
	if err != nil {
		return nil, err
	}
	minVersion := int64(1)
	if custom, ok := meta["custom_metadata"].(map[string]any); ok {
		if mv, ok := custom["min_version"].(string); ok {
			if minVersion, err = strconv.ParseInt(mv, 10, 32); err != nil {
				return nil, fmt.Errorf("keys: kv secret %s: custom metadata min_version %.10q is not a number", s.Path, mv)
			}
		}
	}
	list, ok := meta["versions"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("keys: kv secret %s: no version list", s.Path)
	}
	var versions []keys.Key
	for v, raw := range list {
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("keys: kv secret %s: version %.10q is not a number", s.Path, v)
		}
		info, ok := raw.(map[string]any)
		if !ok || int64(id) < minVersion {
			continue
		}
		if destroyed, _ := info["destroyed"].(bool); destroyed {
			continue
		}
		if deleted, _ := info["deletion_time"].(string); deleted != "" {
			continue
		}
		created, err := time.Parse(time.RFC3339Nano, fmt.Sprint(info["created_time"]))
		if err != nil {
			return nil, fmt.Errorf("keys: kv secret %s version %d: creation time: %v", s.Path, id, err)
		}
		data, err := read(ctx, s.Client, mount+"/data/"+s.Path, map[string][]string{"version": {v}})
		if err != nil {
			return nil, err
		}
		inner, ok := data["data"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("keys: kv secret %s version %d holds no data", s.Path, id)
		}
		k, err := decodeKey(uint32(id), inner["key"], created)
		if err != nil {
			return nil, err
		}
		versions = append(versions, k)
	}
	return keys.Activated(versions, now(s.Now), s.Activation)
}

// read reads a Vault path. A missing path, a surprising response or a denial
// is an error; 403 wraps ErrDenied.
func read(ctx context.Context, c *vaultapi.Client, path string, query map[string][]string) (map[string]any, error) {
	secret, err := c.Logical().ReadWithDataWithContext(ctx, path, query)
	if err != nil {
		var re *vaultapi.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
			return nil, fmt.Errorf("%w: reading %s", ErrDenied, path)
		}
		return nil, fmt.Errorf("keys: vault read %s: %v", path, err)
	}
	if secret == nil || secret.Data == nil {
		return nil, fmt.Errorf("keys: vault read %s: nothing there", path)
	}
	return secret.Data, nil
}

// decodeKey turns a base64 string of Vault's into a Key.
func decodeKey(id uint32, v any, created time.Time) (keys.Key, error) {
	s, ok := v.(string)
	if !ok {
		return keys.Key{}, fmt.Errorf("%w: version %d is not a string", keys.ErrBadKey, id)
	}
	material, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return keys.Key{}, fmt.Errorf("%w: version %d is not base64", keys.ErrBadKey, id)
	}
	defer clear(material)
	return keys.NewKey(id, material, created)
}

func number(data map[string]any, field string) (int64, error) {
	switch n := data[field].(type) {
	case json.Number:
		return n.Int64()
	case float64:
		return int64(n), nil
	}
	return 0, fmt.Errorf("keys: vault response has no number %s", field)
}

// unixTime reads Transit's creation time of a version: Unix seconds (as
// symmetric keys report it) or RFC 3339.
func unixTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case json.Number:
		n, err := t.Int64()
		return time.Unix(n, 0), err
	case float64:
		return time.Unix(int64(t), 0), nil
	case string:
		return time.Parse(time.RFC3339Nano, t)
	}
	return time.Time{}, fmt.Errorf("unexpected %T", v)
}

func now(f func() time.Time) time.Time {
	if f == nil {
		return time.Now()
	}
	return f()
}
