package mcpdigest

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// LookAlike reports whether name is not salient, an ASCII name, but a
// decoder that matches names loosely would read it as salient: whether
// Fold takes both to one name (FORMAT.md, "Request digest", step 3).
// "NAME", "argumentſ", "urİ", "requeﬆState" (U+FB06), "ｎａｍｅ" and
// "ｕｒı" are look-alikes of their ASCII names.
func LookAlike(name, salient string) bool {
	// Fold(name) has no ASCII upper case, K or ſ: equal under EqualFold to
	// an ASCII name only when equal to its lower case.
	return name != salient && strings.EqualFold(Fold(name), salient)
}

// Fold returns one name for every spelling that the decoders which fold
// names read alike: each character mapped to one of its simple case
// mappings (Go's encoding/json matches names by simple folding; ToLower
// and ToUpper take İ and ı to i), then NFKC, full case folding and NFKC
// again (Python's unicodedata.normalize("NFKC", name).casefold() and its
// orders: ligatures, fullwidth and other compatibility forms, ß as ss),
// then each character mapped once more. It is Unicode's NFKC_Casefold
// without the removal of default-ignorable code points, which no decoder
// measured removes, closed under the simple mappings. An ASCII name folds
// to its lower case, without allocating when it has no upper case letter.
func Fold(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			// A Caser keeps state between calls: one per call.
			folded := cases.Fold().String(norm.NFKC.String(strings.Map(foldRune, name)))
			return strings.Map(foldRune, norm.NFKC.String(folded))
		}
	}
	return strings.ToLower(name)
}
