package mcpdigest

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// NamesCollide reports whether an object anywhere in the JSON text
// arguments has two member names that Fold takes to one: "Item" and
// "item", "ſize" and "size", "Kind" and "kind" with a Kelvin sign, "ｉｔｅｍ"
// and "item", "ß" and "ss" (FORMAT.md, "Case in the arguments"). The digest
// sorts members, so both orders of such members bind alike, while a
// decoder that matches names regardless of case (Go's encoding/json, the
// last member winning) or through Unicode folding (Python's casefold,
// NFKC) reads them two ways. Names
// that differ by '_' or '-' do not collide: no decoder measured reads them
// by their order.
//
// It is the rule of a binding that cannot rewrite what the server decodes:
// the Go client's bindings refuse what it reports. sealer-proxy, which
// forwards the request, hands the server the arguments in the form the
// digest hashed instead (RequestArguments), which every deterministic
// decoder reads one way. The digest itself refuses nothing here (Request
// accepts such arguments). Names are read as
// encoding/json reads them (escapes decoded, invalid UTF-8 as U+FFFD).
// arguments should be JSON that Request or Decoded accepted; on other text
// the answer means nothing, but it never panics. One pass, without
// allocating for names in lower case ASCII.
func NamesCollide(arguments []byte) bool {
	var stackBuf [16]frame
	var namesBuf [64][]byte
	stack, names := stackBuf[:0], namesBuf[:0]
	for i := 0; i < len(arguments); i++ {
		switch arguments[i] {
		case '{', '[':
			stack = append(stack, frame{object: arguments[i] == '{', start: len(names)})
		case '}', ']':
			if len(stack) > 0 {
				names = names[:stack[len(stack)-1].start]
				stack = stack[:len(stack)-1]
			}
		case '"':
			end := stringEnd(arguments, i)
			if end == len(arguments) {
				return false // unterminated: not JSON
			}
			if len(stack) > 0 && stack[len(stack)-1].object && colonAfter(arguments, end+1) >= 0 {
				var seen bool
				if names, seen = stack[len(stack)-1].add(names, foldKey(arguments[i:end+1])); seen {
					return true
				}
			}
			i = end
		}
	}
	return false
}

// frame is an object or array open in NamesCollide. An object holds its
// names' keys in names from start on, or, past linearNames of them, in set;
// the keys of an object nested in it follow its own and are dropped when
// it closes.
type frame struct {
	object bool
	start  int
	set    map[string]struct{}
}

// add adds key to the names of f, the innermost open object, and reports
// whether it held it already.
func (f *frame) add(names [][]byte, key []byte) ([][]byte, bool) {
	if f.set != nil {
		_, seen := f.set[string(key)]
		f.set[string(key)] = struct{}{}
		return names, seen
	}
	for _, n := range names[f.start:] {
		if bytes.Equal(n, key) {
			return names, true
		}
	}
	if names = append(names, key); len(names)-f.start <= linearNames {
		return names, false
	}
	f.set = make(map[string]struct{}, 2*linearNames)
	for _, n := range names[f.start:] {
		f.set[string(n)] = struct{}{}
	}
	return names[:f.start], false
}

// linearNames is how many names of one object NamesCollide compares one by
// one before it keeps them in a map: few objects hold more.
const linearNames = 32

// foldKey returns one key for every case variant of the JSON string quoted:
// each character mapped by foldRune; without allocating when it holds only
// lower case ASCII without escapes.
func foldKey(quoted []byte) []byte {
	inner := quoted[1 : len(quoted)-1]
	ascii, lower := true, true
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			ascii = false
			break
		}
		lower = lower && (c < 'A' || c > 'Z')
	}
	switch {
	case ascii && lower:
		return inner
	case ascii:
		return bytes.ToLower(inner)
	}
	name := string(inner)
	if bytes.IndexByte(inner, '\\') >= 0 {
		_ = json.Unmarshal(quoted, &name) // valid JSON decodes; else the name as it is
	}
	return []byte(Fold(name))
}

// foldRune maps r to one rune for its whole case: the least of the simple
// case folding orbit of its lower case's upper case, then ASCII upper case
// to lower. That goes past encoding/json's own fold (ı and İ fold to i
// here), so it reports at least what that decoder merges. Invalid UTF-8 is
// U+FFFD, as encoding/json decodes it.
func foldRune(r rune) rune {
	if r >= utf8.RuneSelf {
		least := unicode.ToUpper(unicode.ToLower(r))
		for f := unicode.SimpleFold(least); f != least; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		r = least
	}
	if 'A' <= r && r <= 'Z' {
		r += 'a' - 'A'
	}
	return r
}
