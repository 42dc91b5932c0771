package keys

import (
	"context"
	"time"
)

// Source loads the current key ring from wherever keys live.
type Source interface {
	Load(ctx context.Context) (*Ring, error)
}

// Activated returns a ring of versions in which every version opens and the
// newest version created at least activation before now seals, so that every
// replica polling the same source holds a version before the first state
// sealed with it reaches them. When no version is that old (a new
// deployment), the oldest version seals. Every replica computes the same
// choice from the source's creation times and its clock.
func Activated(versions []Key, now time.Time, activation time.Duration) (*Ring, error) {
	if len(versions) == 0 {
		return nil, ErrNoKey
	}
	oldest, sealing := versions[0], Key{}
	for _, k := range versions {
		if k.id < oldest.id {
			oldest = k
		}
		if !k.created.After(now.Add(-activation)) && k.id > sealing.id {
			sealing = k
		}
	}
	if sealing.id == 0 {
		sealing = oldest
	}
	return NewRing(versions, sealing.id)
}

// Same reports whether two rings hold the same versions with the same
// material and seal with the same version, so that a refresher need not
// publish (and re-derive tenant keys for) an unchanged ring.
func (r *Ring) Same(o *Ring) bool {
	if r == nil || o == nil || r.sealing.key.id != o.sealing.key.id || len(r.versions) != len(o.versions) {
		return false
	}
	for id, v := range r.versions {
		w, ok := o.versions[id]
		if !ok || w.key.material != v.key.material {
			return false
		}
	}
	return true
}
