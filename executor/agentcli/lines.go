package agentcli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// LineReader splits a stream into lines of any length. bufio.Scanner has a
// maximum token size and fails the whole stream on a longer line; a single
// tool result (a file the agent read, a command's output) can be tens of
// megabytes, so lines are accumulated from ReadSlice chunks instead.
//
// A LineReader is not safe for concurrent use.
type LineReader struct {
	br  *bufio.Reader
	buf []byte // accumulation for lines longer than the bufio buffer

}

// keepLineBuf is the largest accumulation buffer kept between lines; a
// bigger one (left by a huge line) is dropped so memory stays flat.
const keepLineBuf = 1 << 20

// DefaultLineBuffer is the read buffer of NewLineReader: lines up to this
// long are handed out without a copy.
const DefaultLineBuffer = 64 << 10

// NewLineReader returns a LineReader over r with a DefaultLineBuffer read
// buffer.
func NewLineReader(r io.Reader) *LineReader {
	return NewLineReaderSize(r, DefaultLineBuffer)
}

// NewLineReaderSize returns a LineReader over r that reads in chunks of up
// to size bytes (at least 16).
func NewLineReaderSize(r io.Reader, size int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, size)}
}

// Next returns the next line without its trailing "\n" (and "\r"). The
// slice is valid until the following call. At the end of the stream it
// returns the last unterminated line, if any, and then io.EOF; a read
// error is returned as it is, after the line it cut short.
func (l *LineReader) Next() ([]byte, error) {
	return l.NextGrow(nil)
}

// NextGrow is Next with grow accumulating the lines that cannot be handed
// out from the read buffer (one longer than the buffer, or the stream's
// last, unterminated line): grow appends chunk, the line's next part, to
// line and returns the result. It may keep less than chunk (a reader that
// drops what its parser never reads, so that a huge line is not held
// whole). A nil grow appends. Lines that fit in the buffer never reach
// grow, so a reader with a hook costs nothing more for them.
func (l *LineReader) NextGrow(grow func(line, chunk []byte) []byte) ([]byte, error) {
	if cap(l.buf) > keepLineBuf {
		l.buf = nil
	}
	l.buf = l.buf[:0]
	add := func(chunk []byte) {
		if grow != nil {
			l.buf = grow(l.buf, chunk)
			return
		}
		l.buf = append(l.buf, chunk...)
	}
	for {
		chunk, err := l.br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(l.buf) == 0 {
				return TrimEOL(chunk), nil
			}
			add(chunk)
			return TrimEOL(l.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			add(chunk)
		default:
			// EOF or a read error: hand out what is left first.
			add(chunk)
			if len(l.buf) > 0 {
				line := l.buf
				l.buf = l.buf[len(l.buf):]
				return TrimEOL(line), nil
			}
			return nil, err
		}
	}
}

// TrimEOL returns b without one trailing "\n" and then one trailing "\r".
func TrimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// Ring is an io.Writer that keeps the last bytes written to it: the tail
// of a CLI's stderr, for error messages. It is safe for concurrent use.
type Ring struct {
	mu  sync.Mutex
	buf []byte
	n   int
}

// NewRing returns a Ring that keeps the last n bytes (n > 0).
func NewRing(n int) *Ring { return &Ring{n: n} }

// Write keeps the end of p; it never fails.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(p) >= r.n {
		r.buf = append(r.buf[:0], p[len(p)-r.n:]...)
		return len(p), nil
	}
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.n; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	return len(p), nil
}

// String returns what is kept, without leading and trailing white space.
func (r *Ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(bytes.TrimSpace(r.buf))
}

// CapUTF8 cuts s to at most max bytes without splitting a UTF-8 sequence
// (it cuts before the sequence that crosses max).
func CapUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && i > max-4 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}

// String returns r's string value (gjson's String) in memory of its own:
// a gjson result of a line the reader handed out aliases the reader's
// buffer, which the next line overwrites.
func String(r gjson.Result) string {
	if r.Type == gjson.String && strings.IndexByte(r.Raw, '\\') >= 0 {
		return r.Str // unescaped into a fresh buffer already
	}
	return strings.Clone(r.String())
}

// Redact replaces every occurrence of each secret in s with "[redacted]".
func Redact(s string, secrets []string) string {
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// LastLine is the last non-empty line of s (white space trimmed), at most
// its last 500 bytes: the part of a CLI's stderr that goes into an error
// message.
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}
