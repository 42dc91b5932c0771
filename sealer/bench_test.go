package sealer_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/mcp-sealer/sealer/sealer"
)

var benchSizes = []int{256, 1 << 10, 16 << 10}

func BenchmarkSeal(b *testing.B) {
	ring := testRing(b, 1)
	c := testClaims(b)
	for _, n := range benchSizes {
		payload := make([]byte, n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sealer.Seal(ring, "tenant-a", c, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	ring := testRing(b, 1)
	c := testClaims(b)
	want := sealer.Expect{Principal: c.Principal, Request: c.Request}
	for _, n := range benchSizes {
		state := seal(b, ring, c, make([]byte, n))
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sealer.Open(ring, "tenant-a", state, want, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSealOpen is one full round: what an MCP server pays per
// input_required round trip, without the network.
func BenchmarkSealOpen(b *testing.B) {
	ring := testRing(b, 1)
	c := testClaims(b)
	want := sealer.Expect{Principal: c.Principal, Request: c.Request}
	for _, n := range benchSizes {
		payload := make([]byte, n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				state, err := sealer.Seal(ring, "tenant-a", c, payload)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sealer.Open(ring, "tenant-a", state, want, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawAEAD is the floor: XChaCha20-Poly1305 seal and open of the same
// payload with a fresh random nonce, no claims, no encoding.
func BenchmarkRawAEAD(b *testing.B) {
	aead, err := chacha20poly1305.NewX(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range benchSizes {
		payload := make([]byte, n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			nonce := make([]byte, aead.NonceSize())
			for b.Loop() {
				rand.Read(nonce)
				ct := aead.Seal(nil, nonce, payload, nil)
				if _, err := aead.Open(ct[:0], nonce, ct, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBase64 is the cost FORMAT.md's encoding adds on its own: encoding
// and decoding a blob of the size a payload of n bytes produces.
func BenchmarkBase64(b *testing.B) {
	for _, n := range benchSizes {
		blob := make([]byte, sealer.Overhead+n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			enc := base64.RawURLEncoding.Strict()
			for b.Loop() {
				s := enc.EncodeToString(blob)
				if _, err := enc.DecodeString(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
