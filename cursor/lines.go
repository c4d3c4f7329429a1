package cursor

// The helpers in this file are generic stream plumbing that claude/ has too
// (claude/lines.go, the ring and serialEmit in claude/executor.go). They are
// kept private here until they move to a shared package both executors
// import; keep the two copies in step until then.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
)

// lineReader splits a stream into lines of any length. bufio.Scanner has a
// maximum token size and fails the whole stream on a longer line; a single
// tool result (a file the agent read, a command's output) can be tens of
// megabytes, so lines are accumulated from ReadSlice chunks instead.
type lineReader struct {
	br  *bufio.Reader
	buf []byte // accumulation for lines longer than the bufio buffer
}

// keepLineBuf is the largest accumulation buffer kept between lines; a
// bigger one (left by a huge line) is dropped so memory stays flat.
const keepLineBuf = 1 << 20

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line without its trailing "\n" (and "\r"). The
// slice is valid until the following call. At the end of the stream it
// returns the last unterminated line, if any, and then io.EOF.
func (l *lineReader) next() ([]byte, error) {
	if cap(l.buf) > keepLineBuf {
		l.buf = nil
	}
	l.buf = l.buf[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(l.buf) == 0 {
				return trimEOL(chunk), nil
			}
			l.buf = append(l.buf, chunk...)
			return trimEOL(l.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			l.buf = append(l.buf, chunk...)
		default:
			l.buf = append(l.buf, chunk...)
			if len(l.buf) > 0 {
				line := l.buf
				l.buf = l.buf[len(l.buf):]
				return trimEOL(line), nil
			}
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// ring keeps the last n bytes written to it.
type ring struct {
	mu  sync.Mutex
	buf []byte
	n   int
}

func newRing(n int) *ring { return &ring{n: n} }

func (r *ring) Write(p []byte) (int, error) {
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

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(bytes.TrimSpace(r.buf))
}

// serialEmit wraps emit so events from the parser goroutine and the run
// are serialized and nothing is emitted after the run returned.
func serialEmit(emit chat.EmitFunc) (chat.EmitFunc, func()) {
	var mu sync.Mutex
	closed := false
	return func(e chat.Event) {
			mu.Lock()
			defer mu.Unlock()
			if closed || emit == nil {
				return
			}
			emit(e)
		}, func() {
			mu.Lock()
			closed = true
			mu.Unlock()
		}
}

// capUTF8 cuts s to at most max bytes without splitting a UTF-8 sequence.
func capUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && i > max-4 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}

// str copies a string out of the line buffer.
func str(r gjson.Result) string {
	if r.Type == gjson.String && strings.IndexByte(r.Raw, '\\') >= 0 {
		return r.Str // unescaped into a fresh buffer already
	}
	return strings.Clone(r.String())
}

func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// lastLine is the last non-empty line of s, at most 500 bytes.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}
