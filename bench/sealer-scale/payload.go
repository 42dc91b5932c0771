package main

import (
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

// payload prints Seal+Open bytes per second by payload size beside raw
// XChaCha20-Poly1305 seal+open of the same bytes (x/crypto, no claims, no
// encoding), the two taking turns at each size, the best of 7 turns each. The format carries at most
// 64 KiB (sealer.MaxPayload): a larger payload is refused, and the table says
// so.
func payload(d time.Duration) error {
	k, err := keys.NewKey(1, randomBytes(keys.Size), time.Time{})
	if err != nil {
		return err
	}
	ring, err := keys.NewRing([]keys.Key{k}, 1)
	if err != nil {
		return err
	}
	aead, err := chacha20poly1305.NewX(randomBytes(chacha20poly1305.KeySize))
	if err != nil {
		return err
	}
	fmt.Println("| payload | Seal+Open | raw XChaCha20-Poly1305 seal+open | share of raw |")
	fmt.Println("|---|---|---|---|")
	for _, size := range []int{0, 1 << 10, 16 << 10, 64 << 10, 1 << 20} {
		p := randomBytes(size)
		now := time.Now()
		c := sealer.Claims{Principal: "alice", IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
		want := sealer.Expect{Principal: "alice"}
		if _, err := sealer.Seal(ring, "default", c, p); err != nil {
			fmt.Printf("| %s | refused: %v | - | - |\n", human(size), err)
			continue
		}
		sealOpen := func() error {
			st, err := sealer.Seal(ring, "default", c, p)
			if err != nil {
				return err
			}
			_, err = sealer.Open(ring, "default", st, want, now)
			return err
		}
		nonce := randomBytes(chacha20poly1305.NonceSizeX)
		buf := make([]byte, 0, size+aead.Overhead())
		raw := func() error {
			ct := aead.Seal(buf[:0], nonce, p, nil)
			_, err := aead.Open(ct[:0], nonce, ct, nil)
			return err
		}
		var s, r []float64
		for range turns { // in turns, the best of them
			a, err := perSecond(sealOpen, d)
			if err != nil {
				return err
			}
			b, err := perSecond(raw, d)
			if err != nil {
				return err
			}
			s, r = append(s, a), append(r, b)
		}
		sm, rm := slices.Max(s), slices.Max(r)
		fmt.Printf("| %s | %s (%.0f pairs/s) | %s (%.0f/s) | %.0f%% |\n", human(size), rate(sm*float64(size), sm), sm, rate(rm*float64(size), rm), rm, 100*sm/rm)
	}
	return nil
}

// perSecond runs f back to back for d and returns the calls per second.
func perSecond(f func() error, d time.Duration) (float64, error) {
	n, start := 0, time.Now()
	for time.Since(start) < d {
		for range 16 {
			if err := f(); err != nil {
				return 0, err
			}
		}
		n += 16
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// turns is how many times each measurement runs, in turns with the one it
// is compared with; the best run is reported: on a machine shared with
// other work, interference only ever slows a run down.
const turns = 7

// rate prints bytes per second, or calls per second for an empty payload.
func rate(bytesPerSecond, perSecond float64) string {
	if bytesPerSecond == 0 {
		return fmt.Sprintf("%.0f calls/s", perSecond)
	}
	return fmt.Sprintf("%.0f MB/s", bytesPerSecond/1e6)
}

func human(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
