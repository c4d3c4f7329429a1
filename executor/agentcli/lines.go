package agentcli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// LineReader splits a CLI's output into lines, keeping memory flat
// whatever is written: bufio.Scanner fails the whole stream on a line
// longer than its maximum, while a CLI's line can be tens of megabytes (a
// file the agent read, a command's output) and a line written by something
// else can be endless. So a LineReader
//   - hands out lines that fit its read buffer without a copy;
//   - accumulates longer ones, and may shorten the JSON strings of a line
//     its Elide hook approves (from its first bytes) to KeepString decoded
//     bytes each as it reads, remembering only how much it dropped of each
//     (Line.Cuts): a parser that shows no more than a capped prefix of a
//     tool result then needs no more memory than the cap;
//   - drops a line that still grows past Max bytes, reading it to its end
//     without holding it (Line.Dropped).
//
// A LineReader is not safe for concurrent use.
type LineReader struct {
	br   *bufio.Reader
	opts LineOptions

	buf []byte // the line being accumulated

	// The current line.
	size    int64
	dropped bool
	checked bool // Elide was asked about it
	eliding bool
	lex     stringLexer
	cuts    []Cut
}

// LineOptions configure a LineReader. The zero value holds lines of up to
// DefaultMaxLine bytes and shortens nothing.
type LineOptions struct {
	// Max is the most bytes of one line the reader holds (DefaultMaxLine
	// when 0; negative: no bound, for tests and trusted input). A longer
	// line is read to its end and dropped.
	Max int
	// Buffer is the read buffer (DefaultLineBuffer when 0, at least 16):
	// lines up to this long are handed out without a copy.
	Buffer int
	// KeepString, when positive, is how many decoded bytes of each JSON
	// string a line that Elide approves keeps. Strings are only cut once
	// the line is longer than ElideAfter.
	KeepString int
	// Elide reports, from the first bytes of a long line (up to 1 KiB),
	// whether its strings may be shortened. Nil: none may.
	Elide func(start []byte) bool
	// ElideAfter is the length past which a line is lexed and may be
	// shortened (DefaultLineBuffer when 0).
	ElideAfter int
}

// Line is one line of the stream.
type Line struct {
	// Bytes is the line without its end of line, with the strings listed
	// in Cuts shortened; it is empty when Dropped. It is valid until the
	// next call of Next.
	Bytes []byte
	// Size is the line's length in the stream, end of line excluded.
	Size int64
	// Dropped reports a line longer than LineOptions.Max: it was read to
	// its end and not kept.
	Dropped bool
	// Cuts are the strings of Bytes that were shortened, in order.
	Cuts []Cut
}

// Cut is a JSON string of a line that the reader shortened.
type Cut struct {
	// At is the offset in Line.Bytes of the string's opening quote (what
	// gjson reports as a value's Index).
	At int
	// Dropped is how many decoded bytes were dropped from its end.
	Dropped int
}

// DroppedAt returns how many decoded bytes were dropped from the end of
// the JSON string that starts at index in the line (a gjson Result's
// Index), 0 when it is whole.
func (l Line) DroppedAt(index int) int {
	for _, c := range l.Cuts {
		if c.At == index {
			return c.Dropped
		}
	}
	return 0
}

// Sizes of lines and buffers.
const (
	// DefaultLineBuffer is the read buffer of a LineReader.
	DefaultLineBuffer = 64 << 10
	// DefaultMaxLine is the largest line a LineReader holds by default.
	// It is far above what a CLI prints in one line once a tool result's
	// strings are shortened, and small enough that many concurrent runs
	// stay within a server's memory.
	DefaultMaxLine = 16 << 20
	// keepLineBuf is the largest accumulation buffer kept between lines; a
	// bigger one (left by a huge line) is dropped so memory stays flat.
	keepLineBuf = 1 << 20
)

// NewLineReader returns a LineReader over r with the default options.
func NewLineReader(r io.Reader) *LineReader {
	return NewLineReaderOptions(r, LineOptions{})
}

// NewLineReaderOptions returns a LineReader over r configured by opts.
func NewLineReaderOptions(r io.Reader, opts LineOptions) *LineReader {
	if opts.Max == 0 {
		opts.Max = DefaultMaxLine
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultLineBuffer
	}
	if opts.ElideAfter <= 0 {
		opts.ElideAfter = DefaultLineBuffer
	}
	return &LineReader{br: bufio.NewReaderSize(r, max(opts.Buffer, 16)), opts: opts}
}

// Next returns the next line. At the end of the stream it returns the last
// unterminated line, if any, and then io.EOF; a read error is returned as
// it is, after the line it cut short.
func (l *LineReader) Next() (Line, error) {
	if cap(l.buf) > keepLineBuf {
		l.buf = nil
	}
	l.buf = l.buf[:0]
	l.cuts = l.cuts[:0]
	l.size, l.dropped, l.checked, l.eliding = 0, false, false, false
	for {
		chunk, err := l.br.ReadSlice('\n')
		switch {
		case err == nil:
			if len(l.buf) == 0 && !l.dropped {
				line := TrimEOL(chunk)
				return Line{Bytes: line, Size: int64(len(line))}, nil
			}
			l.add(chunk)
			return l.line(), nil
		case errors.Is(err, bufio.ErrBufferFull):
			l.add(chunk)
		default:
			// EOF or a read error: hand out what is left first.
			l.add(chunk)
			if len(l.buf) > 0 || l.dropped {
				line := l.line()
				l.buf = l.buf[len(l.buf):]
				l.dropped = false
				return line, nil
			}
			return Line{}, err
		}
	}
}

// ReadLines reads r to its end with a LineReader configured by opts and
// hands every line to line: a parser's whole stream, as a recorded
// transcript is replayed. It returns nil at EOF and the read error
// otherwise.
func ReadLines(r io.Reader, opts LineOptions, line func(Line)) error {
	lr := NewLineReaderOptions(r, opts)
	for {
		l, err := lr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read stream: %w", err)
		}
		line(l)
	}
}

// line is the accumulated line, end of line trimmed.
func (l *LineReader) line() Line {
	if l.dropped {
		return Line{Size: l.size - eolLen(l.buf), Dropped: true}
	}
	b := TrimEOL(l.buf)
	return Line{Bytes: b, Size: l.size - int64(len(l.buf)-len(b)), Cuts: l.cuts}
}

// eolLen is the length of the end of line that b, the tail of a dropped
// line, ends with.
func eolLen(b []byte) int64 {
	return int64(len(b) - len(TrimEOL(b)))
}

// add takes the next chunk of the current line.
func (l *LineReader) add(chunk []byte) {
	l.size += int64(len(chunk))
	if l.dropped {
		l.keepTail(chunk)
		return
	}
	if !l.checked && l.opts.KeepString > 0 && l.opts.Elide != nil && len(l.buf)+len(chunk) > l.opts.ElideAfter {
		l.checked = true
		start := l.buf
		if len(start) < 1<<10 {
			start = append(start[:len(start):len(start)], chunk[:min(len(chunk), 1<<10)]...)
		}
		if l.opts.Elide(start) {
			// What is in buf stays: it is only lexed, to know where in
			// the line the chunks start.
			l.eliding = true
			l.lex = stringLexer{}
			l.lex.run(l, l.buf, false)
		}
	}
	if !l.eliding && l.opts.Max > 0 && len(l.buf)+len(TrimEOL(chunk)) > l.opts.Max {
		// Too long whatever comes next: not worth growing the buffer for.
		l.drop(chunk)
		return
	}
	if l.eliding {
		l.lex.run(l, chunk, true)
	} else {
		l.buf = appendDoubling(l.buf, chunk)
	}
	if l.opts.Max > 0 && len(TrimEOL(l.buf)) > l.opts.Max {
		l.drop(nil)
	}
}

// drop gives up the current line, keeping only what tells its end of line
// (the end of buf, then of chunk).
func (l *LineReader) drop(chunk []byte) {
	l.dropped = true
	tail := l.buf[max(len(l.buf)-2, 0):]
	l.buf = append(make([]byte, 0, 16), tail...)
	l.cuts = l.cuts[:0]
	if chunk != nil {
		l.keepTail(chunk)
	}
}

// keepTail keeps the last two bytes of a dropped line read so far: all
// that is needed to tell its end of line.
func (l *LineReader) keepTail(chunk []byte) {
	l.buf = append(l.buf, chunk[max(len(chunk)-2, 0):]...)
	l.buf = append(l.buf[:0], l.buf[max(len(l.buf)-2, 0):]...)
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
