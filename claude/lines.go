package claude

import (
	"bufio"
	"errors"
	"io"
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
			// EOF or a read error: hand out what is left first.
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
