package connector

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxEventBytes bounds one SSE event, so a broken or hostile server cannot
// make the client buffer without limit. Real events are a few KiB.
const maxEventBytes = 16 << 20

// errEventTooLarge is returned for an event over maxEventBytes.
var errEventTooLarge = fmt.Errorf("server-sent event larger than %d MiB", maxEventBytes>>20)

// sseEvent is one server-sent event: its type ("" when the server sent
// none) and its data lines joined with "\n".
type sseEvent struct {
	Event string
	Data  []byte
}

// sseReader parses a text/event-stream body (the WHATWG format: "field:
// value" lines, events separated by a blank line, ":" comments, CRLF or LF
// line ends). Lines may be of any length up to maxEventBytes.
type sseReader struct {
	r     *bufio.Reader
	line  []byte
	data  bytes.Buffer
	event string
	has   bool // a data field was seen for the pending event
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// Next returns the next event with data. At the end of the body it returns
// a pending event (a server that omits the last blank line still delivers
// it), then io.EOF. Other read errors are returned as they are.
func (s *sseReader) Next() (sseEvent, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && s.has {
				return s.dispatch(), nil
			}
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if s.has {
				return s.dispatch(), nil
			}
			s.event = ""
			continue
		}
		if line[0] == ':' {
			continue // comment (keep-alive)
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if s.has {
				s.data.WriteByte('\n')
			}
			if s.data.Len()+len(value) > maxEventBytes {
				return sseEvent{}, errEventTooLarge
			}
			s.data.Write(value)
			s.has = true
		case "event":
			s.event = string(value)
		}
		// id and retry are irrelevant to a one-shot stream; unknown fields
		// are ignored, as the format requires.
	}
}

func (s *sseReader) dispatch() sseEvent {
	ev := sseEvent{Event: s.event, Data: bytes.Clone(s.data.Bytes())}
	s.data.Reset()
	s.event, s.has = "", false
	return ev
}

// readLine returns the next line without its line end. The returned slice
// is valid until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		if len(s.line) > maxEventBytes {
			return nil, errEventTooLarge
		}
		switch {
		case err == nil:
			return trimEOL(s.line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(s.line) > 0:
			return trimEOL(s.line), nil // last line without a line end
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}
