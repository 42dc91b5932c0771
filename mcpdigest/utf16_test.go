package mcpdigest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestCompareUTF16(t *testing.T) {
	// Runes at the edges of the ranges UTF-16 orders differently from
	// UTF-8: below the surrogates, above them, and past U+FFFF.
	alphabet := []rune{0, 'a', 'b', 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xff61, 0xfffd, 0xffff,
		0x10000, 0x1f600, 0x1f601, 0x1f642, 0x103ff, 0x10400, 0x10ffff}
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		r := make([]rune, rng.IntN(6))
		for i := range r {
			if rng.IntN(4) == 0 {
				r[i] = rng.Int32N(0x110000)
				if r[i] >= 0xd800 && r[i] < 0xe000 {
					r[i] -= 0x800 // surrogates are not runes
				}
			} else {
				r[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		return string(r)
	}
	reference := func(a, b string) int {
		return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
	}
	for range 200_000 {
		a := gen()
		b := gen()
		switch rng.IntN(4) {
		case 0:
			b = a + b // a prefix
		case 1:
			b = a // equal
		case 2:
			b = strings.Repeat("x", 40) + a + b // past a 32-byte chunk
			a = strings.Repeat("x", 40) + a
		}
		if got, want := compareUTF16(a, b), reference(a, b); cmp.Compare(got, 0) != cmp.Compare(want, 0) {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want the sign of %d", a, b, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { compareUTF16("\U0001f600", "\uff61") }); n != 0 {
		t.Errorf("%v allocations per comparison, want 0", n)
	}
}
