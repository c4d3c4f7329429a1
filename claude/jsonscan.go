package claude

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// A purpose-built reader for the few fields the parser needs from each
// line. gjson.Get scans a line once per field, and its iteration unescapes
// every string it passes; on a tool result line (two copies of a command's
// output, often megabytes) that was most of the parser's time. Here a line
// is walked once: strings are skipped with a vectorised quote search, and
// only the values the parser uses are decoded, with the same results as
// gjson's String, Int and Bool (the differential tests hold it to that).
//
// Values are raw JSON text sliced from the line ("" when absent). Like
// gjson, the reader is lenient: it does not validate what it skips, and a
// malformed object simply ends the walk.

// objIter walks the members of a JSON object.
type objIter struct {
	s   string
	i   int // where the walk goes on; -1 once it is over
	end int // just past the closing brace, once the walk reached it
}

// newObjIter starts a walk over raw, which should be an object; a walk
// over anything else yields nothing.
func newObjIter(raw string) objIter {
	if len(raw) == 0 || raw[0] != '{' {
		return objIter{i: -1}
	}
	return objIter{s: raw, i: 1}
}

// next returns the next member's key (unescaped when it has escapes,
// otherwise aliasing the input) and raw value; ok is false at the end of
// the object or at the first malformed member.
func (it *objIter) next() (key, val string, ok bool) {
	if key, ok = it.key(); !ok {
		return "", "", false
	}
	val, ok = it.value()
	return key, val, ok
}

// key moves to the next member and returns its key, leaving the walk at
// the member's value: read it with value, or walk it with enter.
func (it *objIter) key() (string, bool) {
	s, i := it.s, it.i
	if i < 0 {
		return "", false
	}
	it.i = -1 // until proven otherwise
	i = skipWS(s, i)
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	if i >= len(s) || s[i] != '"' {
		if i < len(s) && s[i] == '}' {
			it.end = i + 1
		}
		return "", false
	}
	ke := stringEnd(s, i)
	if ke < 0 {
		return "", false
	}
	key := s[i+1 : ke-1]
	if strings.IndexByte(key, '\\') >= 0 {
		key = unescape(key)
	}
	i = skipWS(s, ke)
	if i >= len(s) || s[i] != ':' {
		return "", false
	}
	i = skipWS(s, i+1)
	if i >= len(s) {
		return "", false
	}
	it.i = i
	return key, true
}

// value returns the raw value of the member whose key was just read.
func (it *objIter) value() (string, bool) {
	i := it.i
	ve := valueEnd(it.s, i)
	if ve < 0 {
		it.i = -1
		return "", false
	}
	it.i = ve
	return it.s[i:ve], true
}

// peek returns the first byte of the value of the member whose key was
// just read.
func (it *objIter) peek() byte {
	if it.i < 0 || it.i >= len(it.s) {
		return 0
	}
	return it.s[it.i]
}

// enter starts a walk over the value of the member whose key was just
// read, an object (see peek); once that walk is over, leave returns to
// this one. Walking a member in place saves skipping it first.
func (it *objIter) enter() objIter {
	return objIter{s: it.s, i: it.i + 1}
}

// leave moves past the object walked with enter and returns its raw text;
// ok is false (and this walk is over) when that walk stopped short of its
// closing brace.
func (it *objIter) leave(child *objIter) (raw string, ok bool) {
	if it.i < 0 || child.end <= it.i {
		it.i = -1
		return "", false
	}
	raw = it.s[it.i:child.end]
	it.i = child.end
	return raw, true
}

// arrIter walks the elements of a JSON array.
type arrIter struct {
	s string
	i int
}

// newArrIter starts a walk over raw, which should be an array.
func newArrIter(raw string) arrIter {
	if len(raw) == 0 || raw[0] != '[' {
		return arrIter{i: -1}
	}
	return arrIter{s: raw, i: 1}
}

// next returns the next element's raw value; ok is false at the end of the
// array or at the first malformed element.
func (it *arrIter) next() (val string, ok bool) {
	s, i := it.s, it.i
	if i < 0 {
		return "", false
	}
	it.i = -1
	i = skipWS(s, i)
	if i < len(s) && s[i] == ',' {
		i = skipWS(s, i+1)
	}
	ve := valueEnd(s, i)
	if ve < 0 {
		return "", false
	}
	it.i = ve
	return s[i:ve], true
}

func skipWS(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// valueEnd returns the end of the value starting at s[i], or -1 when there
// is none (end of input, a closing bracket, an unterminated string or
// container).
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		return containerEnd(s, i)
	case '}', ']', ',', ':':
		return -1
	}
	j := i
	for j < len(s) {
		switch s[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', '"', '{', '[', ':':
			return j
		}
		j++
	}
	return j
}

// stringEnd returns the index just past the closing quote of the string
// whose opening quote is s[i], or -1 when it is not closed.
func stringEnd(s string, i int) int {
	i++
	// Most strings (keys, ids, types) are short: look at them eight bytes
	// at a time before paying for a vectorised search.
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	for n := 0; n < 4 && i+8 <= len(b); n++ {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (lows * '"')
		bs := x ^ (lows * '\\')
		// The lowest flagged byte is the first quote or backslash.
		m := ((q-lows)&^q | (bs-lows)&^bs) & highs
		if m == 0 {
			i += 8
			continue
		}
		j := i + bits.TrailingZeros64(m)/8
		if b[j] == '"' {
			return j + 1
		}
		i = j + 2 // past a backslash and the byte it escapes
	}
	if i+8 > len(b) {
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				return i + 1
			case '\\':
				i++
			}
		}
		return -1
	}
	return stringEndSlow(s, i)
}

// stringEndSlow is stringEnd from s[i] on, outside an escape.
func stringEndSlow(s string, i int) int {
	for {
		if i > len(s) {
			return -1
		}
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		// The quote is escaped when an odd number of backslashes precede
		// it (the opening quote stops the count).
		n := 0
		for k := i - 1; s[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// containerEnd returns the index just past the bracket closing the object
// or array that starts at s[i], or -1. Bracket kinds are not matched
// against each other (gjson does not either).
func containerEnd(s string, i int) int {
	depth := 0
	for i < len(s) {
		switch s[i] {
		case '"':
			e := stringEnd(s, i)
			if e < 0 {
				return -1
			}
			i = e
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

// text is gjson's String of a raw value: a string unescaped, a number or
// literal as written, "" for null and absent values. It may alias raw.
func text(raw string) string {
	if raw == "" || raw == "null" {
		return ""
	}
	if isString(raw) {
		inner := raw[1 : len(raw)-1]
		if strings.IndexByte(inner, '\\') < 0 {
			return inner
		}
		return unescape(inner)
	}
	return gjson.Parse(raw).String()
}

// owned is text in memory of its own, safe to keep after the line's buffer
// is reused.
func owned(raw string) string {
	if raw == "" || raw == "null" {
		return ""
	}
	if isString(raw) {
		inner := raw[1 : len(raw)-1]
		if strings.IndexByte(inner, '\\') < 0 {
			return strings.Clone(inner)
		}
		return unescape(inner) // a fresh buffer
	}
	return strings.Clone(gjson.Parse(raw).String())
}

// isString reports a raw string value (the scanner's values end with
// their closing quote).
func isString(raw string) bool {
	return len(raw) >= 2 && raw[0] == '"'
}

// intVal is gjson's Int of a raw value.
func intVal(raw string) int64 {
	if n := len(raw); n > 0 && n < 19 {
		var v int64
		for i := 0; i < n; i++ {
			c := raw[i]
			if c < '0' || c > '9' {
				return gjson.Parse(raw).Int()
			}
			v = v*10 + int64(c-'0')
		}
		return v
	}
	return gjson.Parse(raw).Int()
}

// boolVal is gjson's Bool of a raw value.
func boolVal(raw string) bool {
	switch raw {
	case "true":
		return true
	case "false", "", "null":
		return false
	}
	return gjson.Parse(raw).Bool()
}

// unescape decodes the body of a JSON string that has escapes, exactly as
// gjson does (it stops at a raw control character or a bad escape).
func unescape(s string) string {
	b, _ := appendUnescaped(make([]byte, 0, len(s)), s, len(s))
	return unsafe.String(unsafe.SliceData(b), len(b))
}

const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special returns the index of the first byte of s at or after i that is a
// backslash or a control character, or len(s).
func special(s string, i int) int {
	if len(s)-i >= 8 {
		b := unsafe.Slice(unsafe.StringData(s), len(s))
		for ; i+8 <= len(b); i += 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			bs := x ^ (lows * '\\')
			// A zero byte in bs (a backslash) or a byte below 0x20 in x.
			if ((bs-lows)&^bs|(x-lows*0x20)&^x)&highs != 0 {
				break
			}
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '\\' || c < ' ' {
			return i
		}
	}
	return i
}

// appendUnescaped decodes the body of a JSON string with escapes (as
// unescape does) and appends the first limit bytes of the result to dst
// (none when limit <= 0). It returns dst and the length of the whole
// decoded string, which it counts without materialising the rest.
func appendUnescaped(dst []byte, s string, limit int) ([]byte, int) {
	size := 0
	put := func(chunk string) {
		if room := limit - size; room > 0 {
			dst = append(dst, chunk[:min(room, len(chunk))]...)
		}
		size += len(chunk)
	}
	var rb [utf8.UTFMax]byte
	i := 0
	for i < len(s) {
		j := special(s, i)
		if j > i {
			put(s[i:j])
		}
		if j >= len(s) || s[j] < ' ' {
			return dst, size
		}
		// s[j] is a backslash.
		j++
		if j >= len(s) {
			return dst, size
		}
		switch s[j] {
		case '\\':
			put(`\`)
		case '/':
			put("/")
		case 'b':
			put("\b")
		case 'f':
			put("\f")
		case 'n':
			put("\n")
		case 'r':
			put("\r")
		case 't':
			put("\t")
		case '"':
			put(`"`)
		case 'u':
			if j+5 > len(s) {
				return dst, size
			}
			r := hexRune(s[j+1:])
			j += 4
			if utf16.IsSurrogate(r) && len(s)-(j+1) >= 6 && s[j+1] == '\\' && s[j+2] == 'u' {
				r = utf16.DecodeRune(r, hexRune(s[j+3:]))
				j += 6
			}
			n := utf8.EncodeRune(rb[:], r)
			put(unsafe.String(&rb[0], n))
		default:
			return dst, size
		}
		i = j + 1
	}
	return dst, size
}

// hexRune reads four hex digits as gjson does (anything else is 0).
func hexRune(s string) rune {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0
		}
		r = r<<4 | rune(c)
	}
	return r
}
