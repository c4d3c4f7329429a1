package connector

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// maxEventBytes bounds one SSE event, so a broken or hostile server cannot
// make the client buffer without limit. Real events are a few KiB.
const maxEventBytes = 16 << 20

// provider is one wire format: how to build the request and read the answer.
type provider interface {
	// header sets the provider's request headers (auth, version).
	header(h http.Header)
	// body encodes req for model and returns the max_tokens it sends (0
	// when none); an error is the caller's fault.
	body(req *Request, model string) ([]byte, int, error)
	// stream reads an SSE answer into out. It returns nil only when the
	// stream completed (its end marker arrived); errStreamCut when the body
	// ended early; a *chat.Error for an error event.
	stream(r *sse.Reader, out *output) error
	// whole reads a non-streamed JSON answer into out.
	whole(body []byte, out *output) error
}

// client is the provider-independent part: timeouts, retries, errors.
type client struct {
	typ   string // connector type, for messages
	cfg   Config
	url   string
	host  string // scheme://host, for messages
	p     provider
	sleep func(context.Context, time.Duration) error
}

func newClient(typ string, cfg Config, url string, p provider) *client {
	return &client{typ: typ, cfg: cfg.withDefaults(), url: url, host: hostOf(url), p: p, sleep: sleep}
}

func (c *client) Type() string  { return c.typ }
func (c *client) Model() string { return c.cfg.Model }

// Stream implements Client.
func (c *client) Stream(ctx context.Context, req *Request, emit chat.EmitFunc) (*Response, error) {
	if req == nil {
		return nil, c.invalid("no request given")
	}
	if emit == nil {
		emit = func(chat.Event) {}
	}
	model := cmp.Or(req.Model, req.Options.Model)
	if m, ok := req.Fields["model"]; ok && model == "" {
		s, isString := m.(string)
		if !isString {
			return nil, c.invalid(fmt.Sprintf("option \"model\" must be a string, not %v", m))
		}
		model = s
	}
	if model == "" {
		model = c.cfg.Model
	}
	if model == "" {
		return nil, c.invalid("no model is set; set the connector's model option (or the request's model)")
	}
	if len(req.Messages) == 0 {
		return nil, c.invalid("the request has no messages; send at least one user message")
	}
	if req.MaxTokens < 0 {
		return nil, c.invalid(fmt.Sprintf("max_tokens is negative (%d)", req.MaxTokens))
	}
	body, maxTokens, err := c.p.body(req, model)
	if err != nil {
		e := c.invalid(err.Error())
		var fe *chat.FieldError
		if errors.As(err, &fe) {
			e.Err = fe // the server names the field
		}
		return nil, e
	}

	if err := ctx.Err(); err != nil {
		return nil, contextError(c.typ, ctx, &c.cfg)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, errTotalTimeout)
	defer cancel()
	start := time.Now()
	ids := newIDs()
	for attempt := 1; ; attempt++ {
		out := &output{emit: emit, ids: ids, provider: c.typ, key: c.cfg.Key, maxTokens: maxTokens, serverTools: req.ServerTools}
		// Every attempt asks the connector's breaker: an open one fails the
		// call at once (also between retries) instead of adding load to an
		// upstream that is down.
		done, berr := c.cfg.Breaker.Allow()
		if berr != nil {
			return nil, berr
		}
		resp, e := c.attempt(ctx, body, out)
		out.closeOpen()
		done(c.outcome(ctx, e))
		if e == nil {
			resp.Attempts = attempt
			resp.Usage.Turns = 1
			resp.Usage.DurationMS = time.Since(start).Milliseconds()
			return resp, nil
		}
		f := failureOf(e)
		if out.emitted {
			f.Retryable = false
			if !errors.Is(e, errStreamCut) {
				e.Message += " (the answer was cut off after output started)"
			}
		}
		if !f.Retryable || attempt >= c.cfg.Retry.MaxAttempts {
			return nil, gaveUp(e, attempt)
		}
		wait := c.cfg.Retry.delay(attempt, f.RetryAfter)
		if time.Since(start)+wait > c.cfg.Retry.MaxElapsed {
			return nil, gaveUp(e, attempt)
		}
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
			return nil, gaveUp(e, attempt)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, contextError(c.typ, ctx, &c.cfg)
		}
	}
}

// outcome is what an attempt that ended with e says about the upstream's
// health. The caller's own cancellation or deadline says nothing; a
// malformed answer is the upstream's failure.
func (c *client) outcome(ctx context.Context, e *chat.Error) breaker.Outcome {
	if e == nil {
		return breaker.Success
	}
	if ctx.Err() != nil && context.Cause(ctx) != errTotalTimeout {
		return breaker.Ignore
	}
	return breaker.OfCode(e.Code)
}

// gaveUp notes the number of attempts in a final error.
func gaveUp(e *chat.Error, attempts int) *chat.Error {
	if attempts > 1 {
		e.Message += fmt.Sprintf(" (gave up after %d attempts)", attempts)
	}
	return e
}

func (c *client) invalid(msg string) *chat.Error {
	return fail(chat.ErrInvalidRequest, c.typ+" connector: "+msg, nil)
}

// attempt sends one request and reads its answer.
func (c *client) attempt(ctx context.Context, body []byte, out *output) (*Response, *chat.Error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wd := startWatchdog(c.cfg.FirstByteTimeout, c.cfg.IdleTimeout, cancel)
	defer wd.stop()
	out.kick = wd.kick

	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fail(chat.ErrInvalidRequest, fmt.Sprintf("%s connector: build request: %v", c.typ, err), &Failure{Err: err})
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("User-Agent", "agentbox")
	c.p.header(hreq.Header)
	hresp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return nil, transportError(c.typ, c.host, ctx, actx, err, &c.cfg)
	}
	defer hresp.Body.Close()
	out.reqID = requestID(hresp.Header)

	if hresp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(hresp.Body, maxErrorBody))
		if err != nil && ctx.Err() != nil {
			return nil, contextError(c.typ, ctx, &c.cfg)
		}
		return nil, statusError(c.typ, hresp.StatusCode, hresp.Header, b, c.cfg.Key)
	}
	if ct := hresp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, err := io.ReadAll(io.LimitReader(hresp.Body, maxEventBytes))
		if err != nil {
			return nil, transportError(c.typ, c.host, ctx, actx, err, &c.cfg)
		}
		if !strings.Contains(ct, "json") {
			return nil, fail(chat.ErrUpstream, fmt.Sprintf(
				"%s API answered with content type %q instead of an event stream; check that the host is the API's base URL", c.typ, ct), &Failure{Status: hresp.StatusCode, RequestID: out.reqID})
		}
		if err := c.p.whole(b, out); err != nil {
			return nil, c.readError(ctx, actx, err)
		}
		return &out.resp, nil
	}
	if err := c.p.stream(sse.NewReader(hresp.Body, maxEventBytes), out); err != nil {
		return nil, c.readError(ctx, actx, err)
	}
	return &out.resp, nil
}

func (c *client) readError(ctx, actx context.Context, err error) *chat.Error {
	var e *chat.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, sse.ErrTooLarge) {
		return fail(chat.ErrUpstream, fmt.Sprintf("%s API sent an event over the size limit (server-sent event larger than %d MiB)", c.typ, maxEventBytes>>20), &Failure{Err: err})
	}
	if ctx.Err() != nil || context.Cause(actx) != nil || errors.Is(err, errStreamCut) {
		return transportError(c.typ, c.host, ctx, actx, err, &c.cfg)
	}
	// The connection broke while the answer was streaming.
	return fail(chat.ErrUpstream, fmt.Sprintf(
		"%s API stream ended before completion (%s); the answer is incomplete: retry", c.typ, rootCause(err)), &Failure{Retryable: true, Err: errors.Join(errStreamCut, err)})
}

// badData is the error for an answer the client cannot read.
func (o *output) badData(what string, data []byte) *chat.Error {
	s := string(data)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fail(chat.ErrUpstream, fmt.Sprintf(
		"%s API sent %s that is not valid (%q); check that the host speaks the %s API", o.provider, what, redact(s, o.key), o.provider), &Failure{RequestID: o.reqID})
}

// output turns provider deltas into chat events and the Response. At most
// one message (text or thinking) is open at a time; a change of type ends
// it and starts a new one with a new id.
type output struct {
	emit      chat.EmitFunc
	ids       *ids
	kick      func()
	provider  string
	key       string
	reqID     string
	maxTokens int
	// serverTools are the tools the caller runs (no client flag).
	serverTools map[string]bool

	emitted  bool
	openID   string
	openType string
	text     strings.Builder
	thinking strings.Builder
	resp     Response
}

// progress tells the watchdog that the answer moves.
func (o *output) progress() {
	if o.kick != nil {
		o.kick()
	}
}

// delta appends s to the open message of type typ, starting one if needed.
func (o *output) delta(typ, s string) {
	if s == "" {
		return
	}
	o.progress()
	if o.openType != typ {
		o.closeOpen()
		o.openID, o.openType = o.ids.next(), typ
		o.send(chat.Event{Event: chat.Start, ID: o.openID, Type: typ})
		if typ == chat.TypeText && o.text.Len() > 0 {
			o.text.WriteString(chat.TextSeparator) // as a Collector reads the events
		}
	}
	o.send(chat.Event{Event: chat.Delta, ID: o.openID, Type: typ, Text: s})
	if typ == chat.TypeThinking {
		o.thinking.WriteString(s)
	} else {
		o.text.WriteString(s)
	}
	o.resp.Content = o.text.String()
	o.resp.Thinking = o.thinking.String()
}

// closeOpen ends the open message, if any.
func (o *output) closeOpen() {
	if o.openID == "" {
		return
	}
	o.send(chat.Event{Event: chat.End, ID: o.openID, Type: o.openType})
	o.openID, o.openType = "", ""
}

// toolCall emits a whole tool_call message.
func (o *output) toolCall(tc ToolCall) {
	o.progress()
	o.closeOpen()
	tc.Input = chat.ArgumentsInput(string(tc.Input)) // text that is not JSON is kept as a string
	o.resp.ToolCalls = append(o.resp.ToolCalls, tc)
	o.emitted = true
	props := map[string]any{"name": tc.Name, "id": tc.ID, "input": tc.Input}
	if !o.serverTools[tc.Name] {
		props["client"] = true
	}
	chat.Whole(o.emit, o.ids.next(), chat.TypeToolCall, "", props)
}

// finish records the stop reason and emits a notice for an answer that was
// cut short.
func (o *output) finish(reason string) {
	o.closeOpen()
	o.resp.FinishReason = reason
	switch reason {
	case "length", "max_tokens":
		limit := "the max_tokens limit"
		if o.maxTokens > 0 {
			limit += " (" + strconv.Itoa(o.maxTokens) + ")"
		}
		o.emitted = true
		chat.Notice(o.emit, o.ids.next(), "max_tokens",
			"the answer reached "+limit+" and was cut; raise max_tokens in the assistant's options")
	case "content_filter", "refusal":
		o.emitted = true
		chat.Notice(o.emit, o.ids.next(), reason, "the provider stopped the answer ("+reason+")")
	}
}

func (o *output) send(e chat.Event) {
	o.emitted = true
	o.emit(e)
	// A slow consumer (back pressure) must not count as provider silence.
	o.progress()
}

// ids hands out event message ids unique across streams: a random prefix
// per Stream call and a counter.
type ids struct {
	prefix string
	n      int
}

func newIDs() *ids {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &ids{prefix: "m" + hex.EncodeToString(b[:])}
}

func (i *ids) next() string {
	i.n++
	return i.prefix + "-" + strconv.Itoa(i.n)
}

// hostOf returns scheme://host of a URL, for messages.
func hostOf(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Scheme + "://" + u.Host
}
