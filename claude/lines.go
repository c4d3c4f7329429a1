package claude

import (
	"bytes"
	"io"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentbox/agentbox/executor/agentcli"
)

// lineReader is the stream's line reader (agentcli.LineReader: lines of
// any length) with one addition for Claude Code's stream: a huge line need
// not be held whole. When elide approves it (from its first bytes), every
// JSON string in it past its first keep decoded bytes is dropped as it is
// read, and only the decoded length of what was dropped is remembered (see
// cuts). The parser needs no more than a capped prefix of a tool result,
// so its memory stays bounded by the cap, not by the line. The elision
// runs as the shared reader's grow hook, which only lines longer than the
// read buffer reach: the others cost nothing more than with no elision.
type lineReader struct {
	agentcli.LineReader

	buf []byte // the line being accumulated, while grow runs

	keep  int               // decoded bytes kept of each string of an elided line (0: none)
	elide func([]byte) bool // whether a huge line may be elided, from its start
	// elideAfter is the length past which a line is lexed and may be
	// elided (elideLines when 0; tests lower it).
	elideAfter int

	checked bool // elide was asked about the current line
	eliding bool
	lex     stringLexer
	cutList []cut
}

// cut records a string shortened in the current line.
type cut struct {
	at      int // offset of the string's opening quote in the line
	dropped int // decoded bytes dropped from its end
}

// elideLines is the length past which a line may be elided: lexing it
// from there on costs little and keeps the line buffer near the kept
// strings' size.
const elideLines = 64 << 10

func newLineReader(r io.Reader) *lineReader {
	return newLineReaderSize(r, agentcli.DefaultLineBuffer)
}

// newLineReaderSize reads in chunks of up to size bytes.
func newLineReaderSize(r io.Reader, size int) *lineReader {
	return &lineReader{LineReader: *agentcli.NewLineReaderSize(r, size)}
}

// cuts returns the strings shortened in the line last returned by next.
func (l *lineReader) cuts() []cut {
	return l.cutList
}

// next returns the next line without its trailing "\n" (and "\r"). The
// slice is valid until the following call. At the end of the stream it
// returns the last unterminated line, if any, and then io.EOF.
func (l *lineReader) next() ([]byte, error) {
	l.cutList = l.cutList[:0]
	l.checked, l.eliding = false, false
	return l.NextGrow(l.grow)
}

// grow adds chunk to line (the shared reader's grow hook).
func (l *lineReader) grow(line, chunk []byte) []byte {
	l.buf = line
	l.add(chunk)
	line, l.buf = l.buf, nil
	return line
}

// add appends a chunk of the current line, eliding long strings once the
// line is long enough and qualifies.
func (l *lineReader) add(chunk []byte) {
	after := l.elideAfter
	if after <= 0 {
		after = elideLines
	}
	if !l.checked && l.keep > 0 && l.elide != nil && len(l.buf)+len(chunk) > after {
		l.checked = true
		start := l.buf
		if len(start) < 1<<10 {
			start = append(start[:len(start):len(start)], chunk[:min(len(chunk), 1<<10)]...)
		}
		if l.elide(start) {
			// What is in buf stays: it is only lexed, to know where in
			// the line the chunks start.
			l.eliding = true
			l.lex = stringLexer{}
			l.lex.run(l, l.buf, false)
		}
	}
	if !l.eliding {
		l.buf = appendDoubling(l.buf, chunk)
		return
	}
	l.lex.run(l, chunk, true)
}

// stringLexer follows JSON strings across the chunks of a line, counting
// their decoded bytes as gjson decodes them (for valid JSON).
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
// what it keeps of b: each string up to keep decoded bytes (a cut is never
// inside an escape); without, b is what the line holds so far and nothing
// is cut.
func (x *stringLexer) run(l *lineReader, b []byte, add bool) {
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
		case add && x.decoded+(j-i) > l.keep:
			k := i + max(l.keep-x.decoded, 0)
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
				l.cutList = append(l.cutList, cut{at: x.start, dropped: x.dropped})
			}
			x.inStr = false
			i++
			continue
		}
		// A backslash: past keep, the escape starts the dropped part.
		if add && x.decoded >= l.keep {
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

// appendDoubling is append that at least doubles a full buffer: append
// grows big slices by a quarter, which makes a line of n bytes allocate
// about 5n in total instead of 2n.
func appendDoubling(dst, p []byte) []byte {
	if n := len(dst) + len(p); n > cap(dst) {
		grown := make([]byte, len(dst), max(2*cap(dst), n, 4<<10))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, p...)
}
