package bridge

import (
	"bytes"
	"io"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
)

// usageFields are the token counts of one model response.
type usageFields struct {
	input, output, cacheRead, cacheCreation int64
}

// usageReader reads one API's token usage out of its answers: streamed
// (event, per SSE data payload) or whole (a JSON body).
type usageReader struct {
	event func(u *usageFields, payload gjson.Result)
	whole func(u *usageFields, body gjson.Result)
}

// The APIs' usage: in tokens billed, input without the cached part (read
// apart), output with reasoning.
var (
	// messagesUsage: message_start's usage, then message_delta's
	// cumulative counts; a whole answer's "usage".
	messagesUsage = &usageReader{
		event: func(u *usageFields, p gjson.Result) {
			switch p.Get("type").String() {
			case "message_start":
				u.merge(p.Get("message.usage"))
			case "message_delta":
				u.merge(p.Get("usage"))
			}
		},
		whole: func(u *usageFields, b gjson.Result) { u.merge(b.Get("usage")) },
	}
	// responsesUsage: the usage of response.completed (or .incomplete,
	// .failed); a whole answer's "usage".
	responsesUsage = &usageReader{
		event: func(u *usageFields, p gjson.Result) {
			switch p.Get("type").String() {
			case "response.completed", "response.incomplete", "response.failed":
				u.openAI(p.Get("response.usage"))
			}
		},
		whole: func(u *usageFields, b gjson.Result) { u.openAI(b.Get("usage")) },
	}
	// geminiUsage: every chunk's usageMetadata holds the counts so far;
	// a whole answer is one chunk, or an array of them (a stream without
	// alt=sse).
	geminiUsage = &usageReader{
		event: func(u *usageFields, p gjson.Result) { u.gemini(p.Get("usageMetadata")) },
		whole: func(u *usageFields, b gjson.Result) {
			if b.IsArray() {
				b.ForEach(func(_, c gjson.Result) bool { u.gemini(c.Get("usageMetadata")); return true })
				return
			}
			u.gemini(b.Get("usageMetadata"))
		},
	}
)

// openAI sets u from a Responses API usage object.
func (u *usageFields) openAI(r gjson.Result) {
	if !r.IsObject() {
		return
	}
	cached := r.Get("input_tokens_details.cached_tokens").Int()
	u.input, u.cacheRead, u.output = r.Get("input_tokens").Int()-cached, cached, r.Get("output_tokens").Int()
}

// gemini sets u from a Gemini usageMetadata object: the prompt (with what
// tools added to it) less the cached part, and candidates with thoughts.
func (u *usageFields) gemini(r gjson.Result) {
	if !r.IsObject() {
		return
	}
	cached := r.Get("cachedContentTokenCount").Int()
	u.input = r.Get("promptTokenCount").Int() + r.Get("toolUsePromptTokenCount").Int() - cached
	u.cacheRead = cached
	u.output = r.Get("candidatesTokenCount").Int() + r.Get("thoughtsTokenCount").Int()
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

// meter sums usage over a session's model requests.
type meter struct {
	mu sync.Mutex
	u  usageFields
	// calls are the calls forwarded to the provider (answered or not).
	calls int
}

// forwarded counts a call sent to the provider.
func (m *meter) forwarded() {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
}

func (m *meter) add(u usageFields) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.input += u.input
	m.u.output += u.output
	m.u.cacheRead += u.cacheRead
	m.u.cacheCreation += u.cacheCreation
}

func (m *meter) total() chat.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return chat.Usage{
		InputTokens:         m.u.input,
		OutputTokens:        m.u.output,
		CacheReadTokens:     m.u.cacheRead,
		CacheCreationTokens: m.u.cacheCreation,
		ModelCalls:          m.calls,
	}
}

// Limits of what the meter keeps while it reads.
const (
	maxMeterEvent = 1 << 20 // an SSE event larger than this is not a usage event
	maxMeterJSON  = 8 << 20 // a JSON body longer than this is not metered
)

// meterBody passes a response body through unchanged while reading the
// usage out of it with its API's usageReader, from SSE data lines or a
// whole JSON body. It adds the usage to the meter once, at EOF or Close,
// so a stream cut short is still counted.
type meterBody struct {
	rc     io.ReadCloser
	m      *meter
	sse    bool
	usage  *usageReader // nil for error responses and unmetered routes: pass through, count nothing
	onDone func(usageFields)

	u usageFields
	// dec reads an SSE body's events (nil until its first bytes); one
	// larger than maxMeterEvent is no usage event and is skipped.
	dec     *sse.Decoder
	buf     bytes.Buffer
	tooBig  bool
	doneOne sync.Once
	// readErr is the error reading the upstream's body failed with, if
	// it did not end cleanly.
	readErr error
}

func (b *meterBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && b.usage != nil {
		if b.sse {
			if b.dec == nil {
				b.dec = sse.NewDecoder(maxMeterEvent, true, b.sseEvent)
			}
			_, _ = b.dec.Write(p[:n]) // fails only without skip
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

// sseEvent reads usage from one event of the stream.
func (b *meterBody) sseEvent(e sse.Event) {
	if payload := bytes.TrimSpace(e.Data); gjson.ValidBytes(payload) {
		b.usage.event(&b.u, gjson.ParseBytes(payload))
	}
}

func (b *meterBody) finish() {
	b.doneOne.Do(func() {
		if b.dec != nil {
			// The last event, whose blank line never came, counts too.
			_ = b.dec.Close()
		}
		if b.usage == nil {
			if b.onDone != nil {
				b.onDone(usageFields{})
			}
			return
		}
		if !b.sse && !b.tooBig && gjson.ValidBytes(b.buf.Bytes()) {
			b.usage.whole(&b.u, gjson.ParseBytes(b.buf.Bytes()))
			b.buf = bytes.Buffer{}
		}
		b.m.add(b.u)
		if b.onDone != nil {
			b.onDone(b.u)
		}
	})
}
