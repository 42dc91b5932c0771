package mcpdigest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/mcp-sealer/sealer/sealer"
)

// maxSafeInteger is 2^53-1, the largest integer that every IEEE double, and
// so RFC 8785, holds exactly together with its neighbours: 2^53+1 already
// rounds to 2^53.
const maxSafeInteger = 1<<53 - 1

// checkArguments checks the JSON text of the arguments named name against
// the limits: nesting, number of values, numbers within ±(2^53-1). It reads
// the text as a run of tokens without checking its grammar, in one pass and
// without allocating beyond a number's text: text a JSON parser accepts gets
// the same verdict canonical or as received (whitespace, escapes and number
// spellings do not change it), and other text is refused by the parser.
func checkArguments(name string, text []byte) error {
	depth, values := 0, 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '{' || c == '[':
			if depth++; depth > MaxDepth {
				return errDepth(name)
			}
			values++
		case c == '}' || c == ']':
			depth--
		case c == '"':
			i = stringEnd(text, i)
			if colonAfter(text, i+1) < 0 { // a member name is not a value
				values++
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(text) && isNumberByte(text[j]) {
				j++
			}
			f, err := strconv.ParseFloat(string(text[i:j]), 64)
			if err != nil || math.Abs(f) > maxSafeInteger {
				return errNumber(name)
			}
			i = j - 1
			values++
		case c >= 'a' && c <= 'z': // true, false, null
			for i+1 < len(text) && text[i+1] >= 'a' && text[i+1] <= 'z' {
				i++
			}
			values++
		}
		if values > MaxValues {
			return errValues(name)
		}
	}
	return nil
}

// The refusals of arguments beyond the limits, on every path, for the
// arguments member name.

func errDepth(name string) error {
	return fmt.Errorf("%w: params.%s nested deeper than %d levels", sealer.ErrArgument, name, MaxDepth)
}

func errValues(name string) error {
	return fmt.Errorf("%w: params.%s holds more than %d values", sealer.ErrArgument, name, MaxValues)
}

func errNumber(name string) error {
	return fmt.Errorf("%w: params.%s holds a number beyond ±(2^53-1); send it as a string", sealer.ErrArgument, name)
}

// boundArguments applies checkArguments to the value of every top-level
// member of params named arguments ("" for none), as received, so that
// arguments beyond the limits cost one pass over params and not a parse. It
// refuses only what the check of the canonical arguments would refuse.
func boundArguments(arguments string, params []byte) error {
	if arguments == "" {
		return nil
	}
	depth, start := 0, -1
	for i := 0; i < len(params); i++ {
		switch c := params[i]; c {
		case '{', '[':
			depth++
		case '}', ']', ',':
			if depth == 1 && start >= 0 {
				if err := checkArguments(arguments, params[start:i]); err != nil {
					return err
				}
				start = -1
			}
			if c != ',' {
				depth--
			}
		case '"':
			end := stringEnd(params, i)
			if end == len(params) {
				return nil // unterminated: jcs refuses it
			}
			if depth == 1 {
				if colon := colonAfter(params, end+1); colon >= 0 && isName(params[i:end+1], arguments) {
					start = colon + 1
				}
			}
			i = end
		}
	}
	return nil
}

// stringEnd returns the index of the quote that closes the JSON string whose
// opening quote is text[i], or len(text) if none does. It looks for the next
// quote, then for a backslash before it, so that it reads each byte once.
func stringEnd(text []byte, i int) int {
	for i++; i < len(text); {
		q := bytes.IndexByte(text[i:], '"')
		if q < 0 {
			return len(text)
		}
		q += i
		for { // skip the escapes before the quote at q
			b := bytes.IndexByte(text[i:q], '\\')
			if b < 0 {
				return q
			}
			if i += b + 2; i > q {
				break // the quote was escaped: look for the next
			}
		}
	}
	return len(text)
}

// colonAfter returns the index of the colon that follows text[i:] after
// whitespace, or -1.
func colonAfter(text []byte, i int) int {
	for ; i < len(text); i++ {
		switch text[i] {
		case ':':
			return i
		case ' ', '\t', '\n', '\r':
		default:
			return -1
		}
	}
	return -1
}

// isName reports whether the JSON string quoted decodes to name.
func isName(quoted []byte, name string) bool {
	switch {
	case len(quoted) > 2+len(`\u0000`)*len(name):
		return false
	case !bytes.ContainsRune(quoted, '\\'):
		return string(quoted[1:len(quoted)-1]) == name
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == name
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
