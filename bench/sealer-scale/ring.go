package main

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

// ring prints, by the number of key versions in the ring, Opens per second
// of a state sealed with the oldest version and of one sealed with the
// newest, in turns (the best of 7), and the heap the ring holds per
// version once every version has opened a state of the tenant (its derived
// key cached). The ring is the same whatever the source (key file, Vault
// Transit or KV): the sources only fill it.
func ring(counts []int, d time.Duration) error {
	fmt.Println("| versions | Open, oldest version | Open, newest version | newest/oldest | heap per version |")
	fmt.Println("|---|---|---|---|---|")
	for _, n := range counts {
		before := heap()
		versions := make([]keys.Key, n)
		for i := range versions {
			k, err := keys.NewKey(uint32(i+1), randomBytes(keys.Size), time.Time{})
			if err != nil {
				return err
			}
			versions[i] = k
		}
		r, err := keys.NewRing(versions, uint32(n))
		if err != nil {
			return err
		}
		oldest, err := keys.NewRing(versions, 1) // seals with version 1
		if err != nil {
			return err
		}
		now := time.Now()
		c := sealer.Claims{Principal: "alice", IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
		p := make([]byte, 1024)
		stOld, err := sealer.Seal(oldest, "default", c, p)
		if err != nil {
			return err
		}
		stNew, err := sealer.Seal(r, "default", c, p)
		if err != nil {
			return err
		}
		// Every version derives and caches its key for the tenant, as a
		// ring that has opened states of all its versions holds them.
		for _, v := range r.Versions() {
			r.Opener(v, "default")
		}
		perVersion := float64(heap()-before) / float64(n)
		want := sealer.Expect{Principal: "alice"}
		open := func(st string) func() error {
			return func() error { _, err := sealer.Open(r, "default", st, want, now); return err }
		}
		var o, w []float64
		for range turns { // in turns, the best of them
			a, err := perSecond(open(stOld), d)
			if err != nil {
				return err
			}
			b, err := perSecond(open(stNew), d)
			if err != nil {
				return err
			}
			o, w = append(o, a), append(w, b)
		}
		om, wm := slices.Max(o), slices.Max(w)
		fmt.Printf("| %d | %.0f/s | %.0f/s | %.1f%% | %.0f B |\n", n, om, wm, 100*wm/om, perVersion)
		runtime.KeepAlive(r)
		runtime.KeepAlive(oldest)
	}
	return nil
}

// heap returns the bytes of live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
