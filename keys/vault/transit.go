package vault

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/mcp-sealer/sealer/keys"
)

// HMACInput is the fixed input whose HMAC-SHA256 under a Transit key version
// is master key version N (FORMAT.md, "Master keys from Vault Transit").
const HMACInput = "mcp-sealer/v1 master key"

// ErrExportable means a Transit key is exportable where the sealer wants one
// that is not: its master keys would differ from those the exportable mode
// read, so an upgrade that only kept the flag would open no state in flight.
var ErrExportable = errors.New("vault: transit key is exportable")

// Transit derives master key versions inside Vault Transit from a key that
// is not exportable: version N's master key is Transit's HMAC-SHA256 of
// [HMACInput] under the key's version N. Every replica derives the same
// bytes alone, and the key never leaves Vault. Versions, their creation
// times and min_decryption_version come from the key's policy, as for
// [TransitExport]. A version is derived once per process and cached, so a
// poll reads the policy and derives only new versions.
//
// Vault refuses an HMAC under a version below min_encryption_version, so a
// key whose min_encryption_version is above its min_decryption_version is an
// error on every replica alike (the refresher keeps its last good ring).
type Transit struct {
	Client *vaultapi.Client
	// Mount is the Transit mount path, "transit" by default; Name the key.
	Mount, Name string
	// Previous, when set, names an exportable key of the same mount that a
	// fleet moving from TransitExport still opens and seals with: its
	// versions (read by export) stay in the ring, and versions of Name no
	// higher than Previous's newest are left out, so that ids never clash.
	// Versions of both below Name's min_decryption_version are dropped.
	Previous string
	// Activation and Now are as for TransitExport.
	Activation time.Duration
	Now        func() time.Time

	mu      sync.Mutex
	derived map[uint32][keys.Size]byte
}

var _ keys.Source = (*Transit)(nil)

// transitKey is the part of GET <mount>/keys/<name> the sources use.
type transitKey struct {
	name                   string
	typ                    string
	exportable             bool
	minDecrypt, minEncrypt int64
	created                map[uint32]time.Time
}

// readTransitKey reads and checks a Transit key's policy.
func readTransitKey(ctx context.Context, c *vaultapi.Client, mount, name string) (transitKey, error) {
	info, err := read(ctx, c, mount+"/keys/"+name, nil)
	if err != nil {
		return transitKey{}, err
	}
	k := transitKey{name: name, created: map[uint32]time.Time{}}
	if k.minDecrypt, err = number(info, "min_decryption_version"); err != nil {
		return transitKey{}, fmt.Errorf("keys: transit key %s: %v", name, err)
	}
	if _, present := info["min_encryption_version"]; present {
		if k.minEncrypt, err = number(info, "min_encryption_version"); err != nil {
			return transitKey{}, fmt.Errorf("keys: transit key %s: %v", name, err)
		}
	}
	k.typ, _ = info["type"].(string)
	if !SupportedType(k.typ) {
		return transitKey{}, fmt.Errorf("keys: transit key %s has type %.40q, want aes256-gcm96 or chacha20-poly1305", name, k.typ)
	}
	exportable, ok := info["exportable"].(bool)
	if !ok {
		return transitKey{}, fmt.Errorf("keys: transit key %s: no exportable flag", name)
	}
	k.exportable = exportable
	versions, ok := info["keys"].(map[string]any)
	if !ok || len(versions) == 0 {
		return transitKey{}, fmt.Errorf("keys: transit key %s: no version list", name)
	}
	for v, at := range versions {
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil || id == 0 {
			return transitKey{}, fmt.Errorf("keys: transit key %s: version %.10q is not a number", name, v)
		}
		t, err := unixTime(at)
		if err != nil {
			return transitKey{}, fmt.Errorf("keys: transit key %s version %d: creation time: %v", name, id, err)
		}
		k.created[uint32(id)] = t
	}
	return k, nil
}

// SupportedType reports whether the sealer takes master keys from a Transit
// key of type typ.
func SupportedType(typ string) bool { return typ == "aes256-gcm96" || typ == "chacha20-poly1305" }

// newest returns the highest version of k.
func (k transitKey) newest() uint32 {
	var n uint32
	for v := range k.created {
		n = max(n, v)
	}
	return n
}

// Load implements keys.Source: one read of the key's policy, one HMAC per
// version not derived before (and, while Previous is set, one read of
// Previous's policy and one of its export).
func (t *Transit) Load(ctx context.Context) (*keys.Ring, error) {
	mount := cmp.Or(t.Mount, "transit")
	k, err := readTransitKey(ctx, t.Client, mount, t.Name)
	if err != nil {
		return nil, err
	}
	if k.exportable {
		return nil, fmt.Errorf("%w: %s is; --keys vault-transit takes a key created non-exportable "+
			"(an exportable key is read with --keys vault-transit-exportable, or left by the migration of docs/OPERATIONS.md)", ErrExportable, t.Name)
	}
	var versions []keys.Key
	floor := uint32(0) // versions of t.Name at or below it are Previous's
	if t.Previous != "" {
		old, err := (&TransitExport{Client: t.Client, Mount: mount, Name: t.Previous}).versions(ctx)
		if err != nil {
			return nil, fmt.Errorf("keys: previous key: %v", err)
		}
		for _, o := range old {
			floor = max(floor, o.ID())
			if int64(o.ID()) >= k.minDecrypt {
				versions = append(versions, o)
			}
		}
	}
	need := map[uint32]time.Time{}
	for v, at := range k.created {
		if int64(v) >= k.minDecrypt && v > floor {
			need[v] = at
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for v := range t.derived { // retired: forget
		if _, ok := need[v]; !ok {
			delete(t.derived, v)
		}
	}
	if t.derived == nil {
		t.derived = map[uint32][keys.Size]byte{}
	}
	for v, at := range need {
		if int64(v) < k.minEncrypt {
			return nil, fmt.Errorf("keys: transit key %s: min_encryption_version %d is above min_decryption_version %d, and Vault "+
				"computes no HMAC below min_encryption_version: set min_decryption_version to %d to retire the versions below it, "+
				"or lower min_encryption_version", t.Name, k.minEncrypt, k.minDecrypt, k.minEncrypt)
		}
		m, ok := t.derived[v]
		if !ok {
			if m, err = hmacVersion(ctx, t.Client, mount, t.Name, v); err != nil {
				return nil, err
			}
			t.derived[v] = m
		}
		key, err := keys.NewKey(v, m[:], at)
		if err != nil {
			return nil, err
		}
		versions = append(versions, key)
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("%w: transit key %s has no version at or above min_decryption_version %d", keys.ErrNoKey, t.Name, k.minDecrypt)
	}
	return keys.Activated(versions, now(t.Now), t.Activation)
}

// hmacVersion derives master key version v of a Transit key: the HMAC-SHA256
// of HMACInput under that version.
func hmacVersion(ctx context.Context, c *vaultapi.Client, mount, name string, v uint32) ([keys.Size]byte, error) {
	var out [keys.Size]byte
	path := mount + "/hmac/" + name + "/sha2-256"
	secret, err := c.Logical().WriteWithContext(ctx, path, map[string]any{
		"input":       base64.StdEncoding.EncodeToString([]byte(HMACInput)),
		"key_version": v,
	})
	if err != nil {
		var re *vaultapi.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
			return out, fmt.Errorf("%w: writing %s", ErrDenied, path)
		}
		return out, fmt.Errorf("keys: vault hmac %s version %d: %v", path, v, err)
	}
	if secret == nil || secret.Data == nil {
		return out, fmt.Errorf("keys: vault hmac %s version %d: empty answer", path, v)
	}
	s, ok := secret.Data["hmac"].(string)
	if !ok {
		return out, fmt.Errorf("keys: vault hmac %s version %d: no hmac in the answer", path, v)
	}
	// "vault:v<N>:<base64>", as Vault and OpenBao both write it.
	rest, ok := strings.CutPrefix(s, "vault:v")
	ver, b64, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ver != strconv.FormatUint(uint64(v), 10) {
		return out, fmt.Errorf("%w: hmac of version %d is not vault:v%d:...", keys.ErrBadKey, v, v)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != keys.Size {
		clear(raw)
		return out, fmt.Errorf("%w: hmac of version %d is not %d bytes of base64", keys.ErrBadKey, v, keys.Size)
	}
	copy(out[:], raw)
	clear(raw)
	return out, nil
}
