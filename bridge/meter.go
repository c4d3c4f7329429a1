package bridge

import (
	"bytes"
	"io"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
)

// usageFields are the token counts of one model response.
type usageFields struct {
	input, output, cacheRead, cacheCreation int64
}

// merge sets every field present in a usage object (Anthropic's usage
// counts in message_delta are cumulative, so a later value replaces an
// earlier one).
func (u *usageFields) merge(r gjson.Result) {
	if !r.IsObject() {
		return
	}
	if v := r.Get("input_tokens"); v.Exists() {
		u.input = v.Int()
	}
	if v := r.Get("output_tokens"); v.Exists() {
		u.output = v.Int()
	}
	if v := r.Get("cache_read_input_tokens"); v.Exists() {
		u.cacheRead = v.Int()
	}
	if v := r.Get("cache_creation_input_tokens"); v.Exists() {
		u.cacheCreation = v.Int()
	}
}

func (m *meter) total() (chat.Usage, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return chat.Usage{
		InputTokens:         m.u.input,
		OutputTokens:        m.u.output,
		CacheReadTokens:     m.u.cacheRead,
		CacheCreationTokens: m.u.cacheCreation,
	}, m.n
}

// Limits of what the meter keeps while it reads.
const (
	maxMeterLine = 1 << 20 // an SSE line longer than this is not a usage event
	maxMeterJSON = 8 << 20 // a JSON body longer than this is not metered
)

// meterBody passes a response body through unchanged while reading the
// usage out of it: SSE events message_start and message_delta, or a JSON
// body's "usage". It adds the usage to the meter once, at EOF or Close, so a
// stream cut short is still counted.
type meterBody struct {
	rc      io.ReadCloser
	m       *meter
	sse     bool
	metered bool // false for error responses: pass through, count nothing
	onDone  func(usageFields)

	u       usageFields
	line    []byte // SSE: the current incomplete line
	skip    bool   // SSE: the current line is too long; drop until newline
	buf     bytes.Buffer
	tooBig  bool
	doneOne sync.Once
	// readErr is the error reading the upstream's body failed with, if
	// it did not end cleanly.
	readErr error
}

func (b *meterBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && b.metered {
		if b.sse {
			b.feedSSE(p[:n])
		} else if !b.tooBig {
			if b.buf.Len()+n > maxMeterJSON {
				b.tooBig = true
				b.buf = bytes.Buffer{}
			} else {
				b.buf.Write(p[:n])
			}
		}
	}
	if err == io.EOF {
		b.finish()
	} else if err != nil && b.readErr == nil {
		b.readErr = err
	}
	return n, err
}

func (b *meterBody) Close() error {
	b.finish()
	return b.rc.Close()
}

// feedSSE splits data into lines and reads usage from data lines.
func (b *meterBody) feedSSE(data []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !b.skip {
				if len(b.line)+len(data) > maxMeterLine {
					b.skip, b.line = true, b.line[:0]
				} else {
					b.line = append(b.line, data...)
				}
			}
			return
		}
		if !b.skip && len(b.line)+i <= maxMeterLine {
			if len(b.line) > 0 {
				b.line = append(b.line, data[:i]...)
				b.sseLine(b.line)
				b.line = b.line[:0]
			} else {
				b.sseLine(data[:i])
			}
		}
		b.skip, b.line = false, b.line[:0]
		data = data[i+1:]
	}
}

// sseLine handles one complete SSE line.
func (b *meterBody) sseLine(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	payload, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	sseUsage(&b.u, payload)
}

// sseUsage updates u from one SSE data payload.
func sseUsage(u *usageFields, payload []byte) {
	if !gjson.ValidBytes(payload) {
		return
	}
	switch gjson.GetBytes(payload, "type").String() {
	case "message_start":
		u.merge(gjson.GetBytes(payload, "message.usage"))
	case "message_delta":
		u.merge(gjson.GetBytes(payload, "usage"))
	}
}

func (b *meterBody) finish() {
	b.doneOne.Do(func() {
		if !b.metered {
			if b.onDone != nil {
				b.onDone(usageFields{})
			}
			return
		}
		if !b.sse && !b.tooBig && gjson.ValidBytes(b.buf.Bytes()) {
			b.u.merge(gjson.GetBytes(b.buf.Bytes(), "usage"))
			b.buf = bytes.Buffer{}
		}
		b.m.add(b.u, true)
		if b.onDone != nil {
			b.onDone(b.u)
		}
	})
}
