package agentcli

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// stringLexer follows the JSON strings of a line across the chunks a
// LineReader reads, counting their decoded bytes as gjson decodes them
// (for valid JSON), so that each can be cut after KeepString decoded
// bytes without ever splitting an escape.
type stringLexer struct {
	inStr   bool
	start   int  // offset in the line of the current string's opening quote
	decoded int  // decoded bytes of the current string kept
	drop    bool // the rest of the current string is being dropped
	dropped int  // decoded bytes dropped from it
	esc     int  // 0: none; 1: after a backslash; 2-5: 2 + \u digits read
	hex     rune
	pair    rune // a surrogate just decoded, which swallows a \u right after it
}

// run lexes b, the next part of the line. With add it appends to the line
// what it keeps of b: each string up to KeepString decoded bytes; without,
// b is what the line holds so far and nothing is cut.
func (x *stringLexer) run(l *LineReader, b []byte, add bool) {
	keep := l.opts.KeepString
	out := func(p []byte) {
		if add {
			l.buf = appendDoubling(l.buf, p)
		}
	}
	// The next quote and backslash in b, found once each: searching anew
	// for every escape would go quadratic on a long escaped string.
	q, bs := -1, -1
	i := 0
	for i < len(b) {
		if !x.inStr {
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				out(b[i:])
				return
			}
			out(b[i : i+j+1])
			start := i + j
			if add {
				start = len(l.buf) - 1
			}
			*x = stringLexer{inStr: true, start: start}
			i += j + 1
			continue
		}
		if x.esc > 0 {
			if !x.drop {
				out(b[i : i+1])
			}
			x.escape(b[i])
			i++
			continue
		}
		// A run of plain bytes, up to a quote or backslash.
		if q < i {
			q = indexFrom(b, i, '"')
		}
		if bs < i {
			bs = indexFrom(b, i, '\\')
		}
		j := min(q, bs)
		if j > i {
			x.pair = 0
		}
		switch {
		case x.drop:
			x.dropped += j - i
		case add && j > i && x.decoded+(j-i) > keep:
			k := i + max(keep-x.decoded, 0)
			out(b[i:k])
			x.decoded += k - i
			x.drop = true
			x.dropped += j - k
		default:
			out(b[i:j])
			x.decoded += j - i
		}
		i = j
		if i == len(b) {
			return
		}
		if b[i] == '"' {
			out(b[i : i+1])
			if x.drop {
				l.cuts = append(l.cuts, Cut{At: x.start, Dropped: x.dropped})
			}
			x.inStr = false
			i++
			continue
		}
		// A backslash: past keep, the escape starts the dropped part,
		// unless it may complete the surrogate pair just read.
		if add && x.decoded >= keep && x.pair == 0 {
			x.drop = true
		}
		if !x.drop {
			out(b[i : i+1])
		}
		x.esc = 1
		i++
	}
}

// escape takes the next byte of an escape sequence and counts what the
// sequence decodes to once it is complete.
func (x *stringLexer) escape(c byte) {
	if x.esc == 1 {
		if c == 'u' {
			x.esc, x.hex = 2, 0
			return
		}
		x.esc, x.pair = 0, 0
		x.count(1)
		return
	}
	x.hex = x.hex<<4 | rune(hexDigit(c))
	if x.esc++; x.esc < 6 {
		return
	}
	x.esc = 0
	r := x.hex
	if x.pair != 0 {
		// gjson decodes a surrogate with the \u escape after it, as a
		// pair: U+FFFD (counted already) unless it is a valid one.
		if utf16.DecodeRune(x.pair, r) != utf8.RuneError {
			x.count(1)
		}
		x.pair = 0
		return
	}
	if utf16.IsSurrogate(r) {
		x.pair = r
	}
	n := utf8.RuneLen(r)
	if n < 0 {
		n = 3 // U+FFFD
	}
	x.count(n)
}

func (x *stringLexer) count(n int) {
	if x.drop {
		x.dropped += n
	} else {
		x.decoded += n
	}
}

func hexDigit(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

// indexFrom returns the index of the first c in b at or after i, or
// len(b).
func indexFrom(b []byte, i int, c byte) int {
	if j := bytes.IndexByte(b[i:], c); j >= 0 {
		return i + j
	}
	return len(b)
}
