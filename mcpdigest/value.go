package mcpdigest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/mcp-sealer/sealer/sealer"
)

// Kind is the kind of a JSON value.
type Kind uint8

// The kinds of a JSON value. Invalid is the zero Kind, of no JSON value.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Array
	Object
)

// A Value is a JSON value that a program holds decoded in a form of its own,
// such as a protobuf Struct (package protostruct), which Params digests
// without encoding it as JSON text. Each method but Kind is called only for
// the kinds it names and may return anything for others.
type Value interface {
	Kind() Kind
	Bool() bool      // of a Bool
	Number() float64 // of a Number
	String() string  // of a String
	Len() int        // elements of an Array, members of an Object
	Index(i int) Value
	// AppendMembers appends the members of an Object to dst, in any order,
	// each name once, and returns the extended slice.
	AppendMembers(dst []Member) []Member
}

// Member is a member of an object: its name and its value.
type Member struct {
	Name  string
	Value Value
}

// Params returns the digest of an MCP request of method whose params are
// held as a Value: what Request returns for the same params as JSON text,
// under the rules FORMAT.md gives for decoded params. Every member name is
// checked (CheckParamName), only the salient members' values are read, and
// the arguments are written in RFC 8785 form straight from the Value, at
// most MaxDepth levels deep and holding at most MaxValues values, each
// refused as soon as it is met. MaxParams, a bound on text, does not apply.
// Numbers must be finite and within ±(2^53-1), strings and names valid
// UTF-8. Every refusal wraps sealer.ErrArgument but that of the method,
// sealer.ErrMethod.
func Params(method string, params Value) (sealer.Digest, error) {
	m, ok := salient[method]
	if !ok {
		return sealer.Digest{}, errMethod(method)
	}
	if params == nil || params.Kind() != Object {
		return sealer.Digest{}, fmt.Errorf("%w: params must be a JSON object", sealer.ErrArgument)
	}
	w := walks.Get().(*walk)
	defer w.release()
	w.members = params.AppendMembers(w.members[:0])
	var target, args Value
	for _, mb := range w.members {
		if err := CheckParamName(method, mb.Name); err != nil {
			return sealer.Digest{}, err
		}
		switch {
		case mb.Name == m.Target:
			target = mb.Value
		case m.Arguments != "" && mb.Name == m.Arguments:
			args = mb.Value
		}
	}
	w.clear()
	if target == nil || target.Kind() != String || target.String() == "" {
		return sealer.Digest{}, errTarget(m)
	}
	switch {
	case m.Arguments == "":
		return digest(method, target.String(), nil), nil
	case args == nil || args.Kind() == Null:
		return digest(method, target.String(), []byte("null")), nil
	case args.Kind() != Object:
		return sealer.Digest{}, fmt.Errorf("%w: params.%s must be an object", sealer.ErrArgument, m.Arguments)
	}
	w.name = m.Arguments
	if err := w.value(args, 0); err != nil {
		return sealer.Digest{}, err
	}
	return digest(method, target.String(), w.out), nil
}

// walk writes the RFC 8785 form of arguments held as a Value. Its buffers
// are pooled, so that an ordinary request costs no allocation: the members
// of the objects open on the way down share one slice.
type walk struct {
	name    string // of the arguments member, for errors
	out     []byte
	members []Member
	used    int // how much of members held references
	values  int // values met so far
}

var walks = sync.Pool{New: func() any { return &walk{out: make([]byte, 0, 512), members: make([]Member, 0, 32)} }}

// release returns w to the pool, unless its buffers grew past what an
// ordinary request needs.
func (w *walk) release() {
	w.clear()
	if cap(w.out) > 64<<10 || cap(w.members) > 1<<10 {
		return
	}
	w.out, w.members, w.values = w.out[:0], w.members[:0], 0
	walks.Put(w)
}

// clear drops the references to the caller's values.
func (w *walk) clear() {
	w.used = max(w.used, len(w.members))
	clear(w.members[:w.used])
	w.members, w.used = w.members[:0], 0
}

// value appends the RFC 8785 form of v, found depth levels deep in the
// arguments, to w.out. It refuses a container beyond the limits as soon as
// it meets it, before it sorts or writes its members, so that a huge value
// is not copied first.
func (w *walk) value(v Value, depth int) error {
	if w.values++; w.values > MaxValues {
		return errValues(w.name)
	}
	switch v.Kind() {
	case Null:
		w.out = append(w.out, "null"...)
	case Bool:
		w.out = strconv.AppendBool(w.out, v.Bool())
	case Number:
		f := v.Number()
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return w.errorf("holds %v, which JSON cannot hold", f)
		case math.Abs(f) > maxSafeInteger:
			return errNumber(w.name)
		}
		n, err := jcs.NumberToJSON(f)
		if err != nil {
			return w.errorf("holds %v, which JSON cannot hold", f)
		}
		w.out = append(w.out, n...)
	case String:
		return w.string(v.String())
	case Array:
		n := v.Len()
		if err := w.container(depth, n); err != nil {
			return err
		}
		w.out = append(w.out, '[')
		for i := range n {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			if err := w.value(v.Index(i), depth+1); err != nil {
				return err
			}
		}
		w.out = append(w.out, ']')
	case Object:
		return w.object(v, depth)
	default:
		return w.errorf("holds a value of no JSON kind")
	}
	return nil
}

// object is value for an Object. Its members go on w.members past those of
// the objects around it, and are dropped when it is written.
func (w *walk) object(v Value, depth int) error {
	n := v.Len()
	if err := w.container(depth, n); err != nil {
		return err
	}
	start := len(w.members)
	w.members = v.AppendMembers(slices.Grow(w.members, n))
	end := len(w.members)
	w.used = max(w.used, end)
	if err := w.container(depth, end-start); err != nil {
		return err // Len said less than there are
	}
	own, size := w.members[start:end], 0
	for _, mb := range own {
		if !utf8.ValidString(mb.Name) {
			return w.errorf("holds invalid UTF-8")
		}
		size += len(mb.Name) + 16
	}
	// A guess at the length of the object from its names alone, so that
	// w.out seldom grows while it is written.
	w.out = slices.Grow(w.out, size)
	slices.SortFunc(own, func(a, b Member) int { return compareUTF16(a.Name, b.Name) })
	w.out = append(w.out, '{')
	for i := start; i < end; i++ {
		mb := w.members[i] // w.members may grow, and move, below
		if i > start {
			if mb.Name == w.members[i-1].Name {
				return w.errorf("holds a member name twice")
			}
			w.out = append(w.out, ',')
		}
		if err := w.string(mb.Name); err != nil {
			return err
		}
		w.out = append(w.out, ':')
		if err := w.value(mb.Value, depth+1); err != nil {
			return err
		}
	}
	w.out = append(w.out, '}')
	w.members = w.members[:start]
	return nil
}

// container refuses an object or array found depth levels deep in the
// arguments, whose n members or elements would take the values past
// MaxValues.
func (w *walk) container(depth, n int) error {
	switch {
	case depth >= MaxDepth:
		return errDepth(w.name)
	case w.values+n > MaxValues:
		return errValues(w.name)
	}
	return nil
}

// errorf returns an error wrapping sealer.ErrArgument that says what the
// arguments hold.
func (w *walk) errorf(format string, a ...any) error {
	return fmt.Errorf("%w: params.%s %s", sealer.ErrArgument, w.name, fmt.Sprintf(format, a...))
}

// string appends s as an RFC 8785 string: the two-character escapes for
// quote, backslash, \b \f \n \r \t, \u00xx for other control characters,
// every other character as it is, in runs.
func (w *walk) string(s string) error {
	if !utf8.ValidString(s) {
		return w.errorf("holds invalid UTF-8")
	}
	dst := append(w.out, '"')
	run := 0 // start of the bytes not yet appended
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[run:i]...)
		run = i + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
	}
	dst = append(dst, s[run:]...)
	w.out = append(dst, '"')
	return nil
}

// compareUTF16 orders a and b, valid UTF-8, by their UTF-16 code units, as
// RFC 8785 orders member names, without converting them: past their common
// prefix, the first runes that differ decide (utf16Order), and a prefix comes
// before the longer string.
func compareUTF16(a, b string) int {
	n, i := min(len(a), len(b)), 0
	for i+32 <= n && a[i:i+32] == b[i:i+32] {
		i += 32 // long common prefixes, as in an attacker's names, at memequal speed
	}
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i-- // back to the first byte of the rune that differs
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	return cmp.Compare(utf16Order(ra), utf16Order(rb))
}

// utf16Order maps r to a number that orders runes as their UTF-16 code units
// do. A rune past U+FFFF is a surrogate pair whose first unit, 0xD800 to
// 0xDBFF, sorts above U+0000 to U+D7FF and below U+E000 to U+FFFF, and whose
// units order such runes among themselves as their values do; so those runes
// map into 0xD800 to 0x10D7FF, and U+E000 to U+FFFF above that.
func utf16Order(r rune) rune {
	switch {
	case r < 0xD800:
		return r
	case r >= 0x10000:
		return r - 0x10000 + 0xD800
	}
	return r + 0x100000
}
