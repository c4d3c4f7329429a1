// Package sse reads and writes server-sent event streams (the WHATWG
// text/event-stream format). It is the one codec of the product's event
// streams: Frame and AppendFrame write every frame the server sends its
// clients (chat.SSEFrame, the OpenAI and Responses endpoints, the test
// runs' events), the model proxy its sandboxes and the scripted model
// server its callers; Decoder (pushed to) and Reader (pulled from) read
// every stream a model provider or an agentbox server sends (package
// connector, the model proxy's meter and translation, internal/testenv).
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Event is one server-sent event.
type Event struct {
	// Type is the "event:" field ("" when there is none: the stream's
	// default, "message").
	Type string
	// ID is the "id:" field ("" when there is none), which a client sends
	// back as Last-Event-ID to resume a stream after it.
	ID string
	// Data is the "data:" lines, joined with "\n".
	Data []byte
}

// fieldBreaks are what may not stand in a field's value: they would end
// the line (or, NUL, make a reader drop an id).
var fieldBreaks = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ", "\x00", " ")

// AppendFrame appends e to dst as one frame: an "id:" line when e.ID is
// set, an "event:" line when e.Type is set, a "data:" line for each line
// of e.Data (one, empty, when it has none) and the blank line that ends
// the frame. A line break or NUL in e.Type or e.ID, which would split the
// frame, is written as a space (as net/http writes header values).
func AppendFrame(dst []byte, e Event) []byte {
	if e.ID != "" {
		dst = append(dst, "id: "...)
		dst = append(dst, fieldBreaks.Replace(e.ID)...)
		dst = append(dst, '\n')
	}
	if e.Type != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, fieldBreaks.Replace(e.Type)...)
		dst = append(dst, '\n')
	}
	data := e.Data
	for {
		i := bytes.IndexAny(data, "\r\n")
		line := data
		if i >= 0 {
			line = data[:i]
		}
		dst = append(dst, "data: "...)
		dst = append(dst, line...)
		dst = append(dst, '\n')
		if i < 0 {
			break
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(dst, '\n')
}

// Frame returns e as one frame (see AppendFrame).
func Frame(e Event) []byte {
	return AppendFrame(make([]byte, 0, len(e.Data)+len(e.Type)+len(e.ID)+24), e)
}

// Comment returns a comment frame (": text" and the blank line), which
// readers skip: a keep-alive. A line break or NUL in text is written as a
// space.
func Comment(text string) []byte {
	return []byte(": " + fieldBreaks.Replace(text) + "\n\n")
}

// Done is the data of the event OpenAI's streams end with.
const Done = "[DONE]"

// ErrTooLarge is the error of a stream with an event, or a line, larger
// than the reader's bound.
var ErrTooLarge = errors.New("server-sent event too large")

// Decoder reads a stream written to it in pieces of any size, calling its
// function with each event as it ends: for a reader in the middle of a
// stream that must pass it on as it comes (a meter on a proxied body).
// Lines end with LF or CRLF; comments (":" lines, keep-alives) and the
// retry field are skipped, unknown fields ignored, as the format requires.
// It is not safe for concurrent use.
type Decoder struct {
	max  int
	skip bool
	emit func(Event)

	line     []byte
	dropLine bool // the current line is over max: dropped to its end
	typ, id  string
	data     bytes.Buffer
	has      bool // a data field was seen for the pending event
	tooLarge bool // the pending event is over max
	err      error
}

// NewDecoder returns a Decoder that calls emit with each event that has
// data; emit may keep the event. An event or line larger than max bytes
// makes Write fail with ErrTooLarge (and every later call), or, when skip
// is set, is dropped and the stream read on: bounded memory for a reader
// that only looks for some events.
func NewDecoder(max int, skip bool, emit func(Event)) *Decoder {
	return &Decoder{max: max, skip: skip, emit: emit}
}

// Write reads p. It fails only with ErrTooLarge (see NewDecoder).
func (d *Decoder) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			d.appendLine(p)
			break
		}
		d.appendLine(p[:i])
		if !d.dropLine {
			d.field(bytes.TrimSuffix(d.line, []byte("\r")))
		}
		d.line, d.dropLine = d.line[:0], false
		p = p[i+1:]
		if d.err != nil {
			return 0, d.err
		}
	}
	return n, d.err
}

func (d *Decoder) appendLine(p []byte) {
	if d.dropLine {
		return
	}
	if len(d.line)+len(p) > d.max {
		d.dropLine, d.line = true, d.line[:0]
		d.tooLarge = true // its event is incomplete
		if !d.skip {
			d.err = fmt.Errorf("%w: a line over %d bytes", ErrTooLarge, d.max)
		}
		return
	}
	d.line = append(d.line, p...)
}

// Close ends the stream: an event whose blank line never came (the last
// one of a server that omits it) is delivered. It returns what Write
// would.
func (d *Decoder) Close() error {
	if d.err == nil && len(d.line) > 0 && !d.dropLine {
		d.field(bytes.TrimSuffix(d.line, []byte("\r")))
	}
	d.line = d.line[:0]
	if d.err == nil {
		d.dispatch()
	}
	return d.err
}

// field reads one complete line.
func (d *Decoder) field(line []byte) {
	if len(line) == 0 {
		d.dispatch()
		return
	}
	if line[0] == ':' {
		return // a comment (keep-alive)
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	switch string(name) {
	case "data":
		if d.tooLarge {
			return
		}
		if d.data.Len()+len(value)+1 > d.max {
			d.tooLarge = true
			if !d.skip {
				d.err = fmt.Errorf("%w: an event over %d bytes", ErrTooLarge, d.max)
			}
			return
		}
		if d.has {
			d.data.WriteByte('\n')
		}
		d.data.Write(value)
		d.has = true
	case "event":
		d.typ = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.id = string(value)
		}
	}
}

// dispatch ends the pending event: delivered when it has data and is
// within bounds, dropped otherwise.
func (d *Decoder) dispatch() {
	if d.has && !d.tooLarge {
		d.emit(Event{Type: d.typ, ID: d.id, Data: append([]byte{}, d.data.Bytes()...)})
	}
	d.data.Reset()
	d.typ, d.id, d.has, d.tooLarge = "", "", false, false
}

// Reader reads a stream's events one at a time.
type Reader struct {
	r     *bufio.Reader
	d     *Decoder
	queue []Event
	buf   []byte
	err   error
}

// NewReader returns a Reader of r whose events and lines are at most max
// bytes: a larger one fails Next with ErrTooLarge, so that a broken or
// hostile server cannot make it buffer without bound.
func NewReader(r io.Reader, max int) *Reader {
	rd := &Reader{r: bufio.NewReaderSize(r, 32<<10), buf: make([]byte, 32<<10)}
	rd.d = NewDecoder(max, false, func(e Event) { rd.queue = append(rd.queue, e) })
	return rd
}

// Next returns the next event that has data. At the end of the stream it
// returns the last event even without its blank line (a server that omits
// it still delivers it), then io.EOF; another read error is returned as it
// is, after the events that ended before it: an event it cut short is
// dropped.
func (r *Reader) Next() (Event, error) {
	for len(r.queue) == 0 {
		if r.err != nil {
			return Event{}, r.err
		}
		n, err := r.r.Read(r.buf)
		if _, werr := r.d.Write(r.buf[:n]); werr != nil {
			r.err = werr
			continue
		}
		switch {
		case errors.Is(err, io.EOF):
			if cerr := r.d.Close(); cerr != nil {
				err = cerr
			}
			r.err = err
		case err != nil:
			r.err = err
		}
	}
	e := r.queue[0]
	r.queue[0] = Event{}
	r.queue = r.queue[1:]
	return e, nil
}
