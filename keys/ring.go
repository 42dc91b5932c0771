// Package keys holds the key ring that seals and opens request states, the
// refresher that keeps it current, and the key file source. Vault sources
// live in package keys/vault, so a program that does not take keys from
// Vault does not link it.
//
// # Rings
//
// A [Ring] is an immutable snapshot: a set of master key versions, the one
// version that seals, and every version that may open. A source builds a new
// ring and the caller publishes it (for example with an atomic.Pointer);
// readers never lock.
//
// Master keys are never used directly. Each tenant gets its own key, derived
// from the master key version with HKDF-SHA256 (see FORMAT.md, "Keys"), once
// per tenant and version.
package keys

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Size is the length of a master key in bytes.
const Size = 32

// MaxTenant is the longest tenant name a ring derives a key for, in bytes.
const MaxTenant = 255

// maxCachedTenants bounds the per-version cache of derived tenant keys.
// Tenants come from configuration, so the bound is only reached by misuse;
// past it keys are derived on every call instead of growing without limit.
const maxCachedTenants = 4096

// tenantInfo prefixes the HKDF info of every tenant key (FORMAT.md, "Keys").
const tenantInfo = "mcp-sealer/v1 tenant key\x00"

var (
	// ErrNoKey means the ring has no version that may seal.
	ErrNoKey = errors.New("keys: no sealing key")
	// ErrBadKey means key material or a key id is malformed.
	ErrBadKey = errors.New("keys: malformed key")
	// ErrBadTenant means a tenant name is empty or longer than MaxTenant.
	ErrBadTenant = errors.New("keys: tenant must be 1 to 255 bytes")
)

// Key is one version of a master key. Its material is unexported and never
// printed: String and %v show the version only.
type Key struct {
	id       uint32
	material [Size]byte
	created  time.Time
}

// NewKey returns version id of a master key. The material must be Size bytes;
// created is when the version came into being (zero if unknown).
func NewKey(id uint32, material []byte, created time.Time) (Key, error) {
	if id == 0 {
		return Key{}, fmt.Errorf("%w: version 0 is reserved", ErrBadKey)
	}
	if len(material) != Size {
		return Key{}, fmt.Errorf("%w: version %d has %d bytes, want %d", ErrBadKey, id, len(material), Size)
	}
	k := Key{id: id, created: created}
	copy(k.material[:], material)
	return k, nil
}

// ID returns the key's version.
func (k Key) ID() uint32 { return k.id }

// Created returns when the version was created, or the zero time.
func (k Key) Created() time.Time { return k.created }

// String names the key by version; it never shows the material.
func (k Key) String() string { return fmt.Sprintf("key version %d", k.id) }

// GoString is String, so %#v cannot print the material either.
func (k Key) GoString() string { return k.String() }

// Ring is an immutable set of key versions. The zero Ring is not usable;
// build one with NewRing.
type Ring struct {
	sealing  *version
	versions map[uint32]*version
	ids      []uint32
}

// version is one master key with its cache of derived tenant keys.
type version struct {
	key     Key
	tenants sync.Map // tenant string -> cipher.AEAD
	cached  atomic.Int32
}

// NewRing returns a ring holding versions, sealing with version sealing. Every
// version in the ring may open. Duplicate versions are an error.
func NewRing(versions []Key, sealing uint32) (*Ring, error) {
	r := &Ring{versions: make(map[uint32]*version, len(versions))}
	for _, k := range versions {
		if k.id == 0 {
			return nil, fmt.Errorf("%w: version 0 is reserved", ErrBadKey)
		}
		if _, dup := r.versions[k.id]; dup {
			return nil, fmt.Errorf("%w: version %d given twice", ErrBadKey, k.id)
		}
		r.versions[k.id] = &version{key: k}
		r.ids = append(r.ids, k.id)
	}
	slices.Sort(r.ids)
	v, ok := r.versions[sealing]
	if !ok {
		return nil, fmt.Errorf("%w: sealing version %d is not in the ring", ErrNoKey, sealing)
	}
	r.sealing = v
	return r, nil
}

// version returns version id of r, nil when r is nil or lacks it.
func (r *Ring) version(id uint32) *version {
	if r == nil {
		return nil
	}
	return r.versions[id]
}

// created is when version id of r was created, "unknown" when not known.
func (r *Ring) created(id uint32) string {
	if c := r.versions[id].key.created; !c.IsZero() {
		return c.UTC().Format(time.RFC3339)
	}
	return "unknown"
}

// Versions returns the versions in the ring, ascending.
func (r *Ring) Versions() []uint32 { return slices.Clone(r.ids) }

// SealingVersion returns the version that seals.
func (r *Ring) SealingVersion() uint32 { return r.sealing.key.id }

// Newest returns the highest version in the ring.
func (r *Ring) Newest() uint32 { return r.ids[len(r.ids)-1] }

// String describes the ring without key material.
func (r *Ring) String() string {
	return fmt.Sprintf("key ring %v sealing with %d", r.ids, r.sealing.key.id)
}

// Sealer returns the sealing version and the AEAD keyed for tenant.
func (r *Ring) Sealer(tenant string) (uint32, cipher.AEAD, error) {
	a, err := r.sealing.aead(tenant)
	return r.sealing.key.id, a, err
}

// Opener returns the AEAD of version id keyed for tenant, or false when the
// ring does not hold that version or the tenant name is malformed.
func (r *Ring) Opener(id uint32, tenant string) (cipher.AEAD, bool) {
	v, ok := r.versions[id]
	if !ok {
		return nil, false
	}
	a, err := v.aead(tenant)
	return a, err == nil
}

func (v *version) aead(tenant string) (cipher.AEAD, error) {
	if len(tenant) == 0 || len(tenant) > MaxTenant {
		return nil, ErrBadTenant
	}
	if a, ok := v.tenants.Load(tenant); ok {
		return a.(cipher.AEAD), nil
	}
	a, err := deriveAEAD(v.key, tenant)
	if err != nil {
		return nil, err
	}
	if v.cached.Add(1) <= maxCachedTenants {
		actual, _ := v.tenants.LoadOrStore(tenant, a)
		return actual.(cipher.AEAD), nil
	}
	v.cached.Add(-1)
	return a, nil
}

// deriveAEAD derives the tenant key of FORMAT.md, "Keys", and wraps it in
// XChaCha20-Poly1305.
func deriveAEAD(k Key, tenant string) (cipher.AEAD, error) {
	info := make([]byte, 0, len(tenantInfo)+4+len(tenant))
	info = append(info, tenantInfo...)
	info = append(info, byte(k.id>>24), byte(k.id>>16), byte(k.id>>8), byte(k.id))
	info = append(info, tenant...)
	tk, err := hkdf.Key(sha256.New, k.material[:], nil, string(info), chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("keys: derive tenant key: %v", err)
	}
	defer clear(tk)
	return chacha20poly1305.NewX(tk)
}
