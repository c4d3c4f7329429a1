package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/internal/sse"
)

// Claude Code speaks only the Anthropic Messages API. A Yao app may give a
// sandboxed claude assistant an openai connector (DeepSeek, a local Ollama,
// any OpenAI-compatible host), and Yao runs it: its proxy translates. So
// does this one, for such a connector: the CLI's POST /v1/messages becomes
// a Chat Completions request to the connector's host, and the answer,
// streamed or whole, comes back as the Messages API's. What has no
// counterpart is dropped: thinking blocks the CLI sends back, server tools,
// cache_control, metadata.

// messagesToChat turns an Anthropic Messages request body into a Chat
// Completions one. model, when set, is the connector's model and replaces
// the CLI's.
func messagesToChat(body []byte, model string) ([]byte, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("the request body is not JSON")
	}
	req := gjson.ParseBytes(body)
	if !req.IsObject() {
		return nil, errors.New("the request body is not a JSON object")
	}
	out := map[string]any{"model": req.Get("model").String()}
	if model != "" {
		out["model"] = model
	}
	var msgs []map[string]any
	if sys := textOf(req.Get("system")); sys != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": sys})
	}
	for _, m := range req.Get("messages").Array() {
		conv, err := chatMessages(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, conv...)
	}
	out["messages"] = msgs
	if v := req.Get("max_tokens"); v.Exists() {
		out["max_tokens"] = v.Int()
	}
	for _, k := range []string{"temperature", "top_p"} {
		if v := req.Get(k); v.Exists() {
			out[k] = v.Float()
		}
	}
	if v := req.Get("stop_sequences"); v.IsArray() && len(v.Array()) > 0 {
		var stop []string
		for _, s := range v.Array() {
			stop = append(stop, s.String())
		}
		out["stop"] = stop
	}
	var tools []map[string]any
	for _, t := range req.Get("tools").Array() {
		if typ := t.Get("type").String(); typ != "" && typ != "custom" {
			continue // a server tool (web search and the like): the host has none
		}
		params := json.RawMessage(t.Get("input_schema").Raw)
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		fn := map[string]any{"name": t.Get("name").String(), "parameters": params}
		if d := t.Get("description").String(); d != "" {
			fn["description"] = d
		}
		tools = append(tools, map[string]any{"type": "function", "function": fn})
	}
	if len(tools) > 0 {
		out["tools"] = tools
		switch tc := req.Get("tool_choice"); tc.Get("type").String() {
		case "any":
			out["tool_choice"] = "required"
		case "none":
			out["tool_choice"] = "none"
		case "tool":
			out["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tc.Get("name").String()}}
		}
		if req.Get("tool_choice.disable_parallel_tool_use").Bool() {
			out["parallel_tool_calls"] = false
		}
	}
	if req.Get("stream").Bool() {
		out["stream"] = true
		out["stream_options"] = map[string]any{"include_usage": true}
	}
	return json.Marshal(out)
}

// textOf is the text of a string or of an array of text blocks.
func textOf(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.String()
	}
	var parts []string
	for _, b := range v.Array() {
		if b.Get("type").String() == "text" {
			parts = append(parts, b.Get("text").String())
		}
	}
	return strings.Join(parts, "\n\n")
}

// chatMessages converts one Messages API message: a user message's tool
// results become tool messages (before its other content), an assistant
// message's tool uses become its tool calls.
func chatMessages(m gjson.Result) ([]map[string]any, error) {
	role := m.Get("role").String()
	content := m.Get("content")
	switch role {
	case "user", "assistant":
	case "system":
		// Claude Code sends system messages mid-conversation (a beta of
		// the Messages API); Chat Completions takes them anywhere.
		return []map[string]any{{"role": "system", "content": textOf(content)}}, nil
	default:
		return nil, fmt.Errorf("message role %q: want user, assistant or system", role)
	}
	if content.Type == gjson.String {
		return []map[string]any{{"role": role, "content": content.String()}}, nil
	}
	var out []map[string]any
	var parts []map[string]any
	var calls []map[string]any
	for _, b := range content.Array() {
		switch b.Get("type").String() {
		case "text":
			parts = append(parts, map[string]any{"type": "text", "text": b.Get("text").String()})
		case "image":
			src := b.Get("source")
			switch src.Get("type").String() {
			case "base64":
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{
					"url": "data:" + src.Get("media_type").String() + ";base64," + src.Get("data").String()}})
			case "url":
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": src.Get("url").String()}})
			}
		case "tool_use":
			args := b.Get("input").Raw
			if args == "" {
				args = "{}"
			}
			calls = append(calls, map[string]any{"id": b.Get("id").String(), "type": "function",
				"function": map[string]any{"name": b.Get("name").String(), "arguments": args}})
		case "tool_result":
			text := textOf(b.Get("content"))
			if b.Get("is_error").Bool() && !strings.HasPrefix(text, "Error") {
				text = "Error: " + text
			}
			out = append(out, map[string]any{"role": "tool", "tool_call_id": b.Get("tool_use_id").String(), "content": text})
		}
		// thinking, redacted_thinking, documents and server tool blocks have
		// no Chat Completions form.
	}
	switch {
	case role == "assistant":
		msg := map[string]any{"role": "assistant", "content": joinText(parts)}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		if len(parts) > 0 || len(calls) > 0 {
			out = append(out, msg)
		}
	case len(parts) == 0:
	case onlyText(parts):
		out = append(out, map[string]any{"role": "user", "content": joinText(parts)})
	default:
		out = append(out, map[string]any{"role": "user", "content": parts})
	}
	return out, nil
}

func onlyText(parts []map[string]any) bool {
	for _, p := range parts {
		if p["type"] != "text" {
			return false
		}
	}
	return true
}

func joinText(parts []map[string]any) string {
	var s []string
	for _, p := range parts {
		if t, ok := p["text"].(string); ok {
			s = append(s, t)
		}
	}
	return strings.Join(s, "\n\n")
}

// stopReason maps a Chat Completions finish_reason onto the Messages API's
// stop_reason.
func stopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// chatToMessage turns a whole Chat Completions response into a Messages
// API one.
func chatToMessage(body []byte, model string) ([]byte, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("the upstream's answer is not JSON")
	}
	r := gjson.ParseBytes(body)
	msg := r.Get("choices.0.message")
	var content []map[string]any
	if t := msg.Get("reasoning_content").String(); t != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": t, "signature": ""})
	}
	if t := msg.Get("content").String(); t != "" {
		content = append(content, map[string]any{"type": "text", "text": t})
	}
	for _, c := range msg.Get("tool_calls").Array() {
		content = append(content, map[string]any{"type": "tool_use", "id": c.Get("id").String(),
			"name": c.Get("function.name").String(), "input": toolInput(c.Get("function.arguments").String())})
	}
	if content == nil {
		content = []map[string]any{}
	}
	return json.Marshal(map[string]any{
		"id": cmpOr(r.Get("id").String(), "msg_agentbox"), "type": "message", "role": "assistant",
		"model": cmpOr(r.Get("model").String(), model), "content": content,
		"stop_reason": stopReason(r.Get("choices.0.finish_reason").String()), "stop_sequence": nil,
		"usage": chatUsage(r.Get("usage")),
	})
}

// chatUsage is a Chat Completions usage object in the Messages API's
// terms: its prompt_tokens count the cached ones, which the Messages API
// counts apart.
func chatUsage(u gjson.Result) map[string]any {
	cached := u.Get("prompt_tokens_details.cached_tokens").Int()
	return map[string]any{"input_tokens": u.Get("prompt_tokens").Int() - cached, "output_tokens": u.Get("completion_tokens").Int(),
		"cache_read_input_tokens": cached}
}

// toolInput is a tool call's arguments as a JSON object ({} when the model
// sent none or something that is not an object).
func toolInput(args string) json.RawMessage {
	if r := gjson.Parse(args); gjson.Valid(args) && r.IsObject() {
		return json.RawMessage(args)
	}
	return json.RawMessage("{}")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// chatErrorToMessages turns an upstream's error body into the Messages
// API's error shape, keeping its message.
func chatErrorToMessages(status int, body []byte) []byte {
	msg := gjson.GetBytes(body, "error.message").String()
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 500 {
			msg = msg[:500]
		}
	}
	typ := "api_error"
	switch {
	case status == 400 || status == 404 || status == 422:
		typ = "invalid_request_error"
	case status == 401:
		typ = "authentication_error"
	case status == 403:
		typ = "permission_error"
	case status == 413:
		typ = "request_too_large"
	case status == 429:
		typ = "rate_limit_error"
	case status == 529 || status == 503:
		typ = "overloaded_error"
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": "upstream: " + msg}})
	return b
}

// chatStream reads a Chat Completions event stream and writes the Messages
// API's events for it: message_start, a content block per text, thinking
// or tool call, message_delta with the stop reason and usage,
// message_stop.
type chatStream struct {
	w     io.Writer
	model string

	started bool
	block   int    // index of the open block; -1: none
	kind    string // its kind: text, thinking, tool_use
	tools   map[int]int
	next    int
	finish  string
	usage   map[string]any
}

// translateChatStream copies the Chat Completions stream r onto w as
// Messages API events. It returns when r ends; a stream cut short is
// closed as it stands.
func translateChatStream(w io.Writer, r io.Reader, model string) error {
	s := &chatStream{w: w, model: model, block: -1, tools: map[int]int{}}
	rd := sse.NewReader(r, maxMeterEvent*4)
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if s.started {
				_ = s.end()
			}
			return err
		}
		data := bytes.TrimSpace(e.Data)
		if string(data) == sse.Done {
			break
		}
		if err := s.chunk(gjson.ParseBytes(data)); err != nil {
			return err
		}
	}
	return s.end()
}

func (s *chatStream) event(typ string, v map[string]any) error {
	v["type"] = typ
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.w.Write(sse.Frame(sse.Event{Type: typ, Data: b}))
	return err
}

func (s *chatStream) start(id string) error {
	if s.started {
		return nil
	}
	s.started = true
	return s.event("message_start", map[string]any{"message": map[string]any{
		"id": cmpOr(id, "msg_agentbox"), "type": "message", "role": "assistant", "model": s.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 0, "output_tokens": 0}}})
}

func (s *chatStream) closeBlock() error {
	if s.block < 0 {
		return nil
	}
	if s.kind == "thinking" {
		if err := s.event("content_block_delta", map[string]any{"index": s.block, "delta": map[string]any{"type": "signature_delta", "signature": ""}}); err != nil {
			return err
		}
	}
	err := s.event("content_block_stop", map[string]any{"index": s.block})
	s.block, s.kind = -1, ""
	return err
}

func (s *chatStream) open(kind string, block map[string]any) error {
	if err := s.closeBlock(); err != nil {
		return err
	}
	s.block, s.kind = s.next, kind
	s.next++
	return s.event("content_block_start", map[string]any{"index": s.block, "content_block": block})
}

func (s *chatStream) chunk(c gjson.Result) error {
	if err := s.start(c.Get("id").String()); err != nil {
		return err
	}
	if m := c.Get("model").String(); m != "" {
		s.model = m
	}
	if u := c.Get("usage"); u.IsObject() {
		s.usage = chatUsage(u)
	}
	ch := c.Get("choices.0")
	if !ch.Exists() {
		return nil
	}
	d := ch.Get("delta")
	if t := d.Get("reasoning_content").String(); t != "" {
		if s.kind != "thinking" {
			if err := s.open("thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""}); err != nil {
				return err
			}
		}
		if err := s.event("content_block_delta", map[string]any{"index": s.block, "delta": map[string]any{"type": "thinking_delta", "thinking": t}}); err != nil {
			return err
		}
	}
	if t := d.Get("content").String(); t != "" {
		if s.kind != "text" {
			if err := s.open("text", map[string]any{"type": "text", "text": ""}); err != nil {
				return err
			}
		}
		if err := s.event("content_block_delta", map[string]any{"index": s.block, "delta": map[string]any{"type": "text_delta", "text": t}}); err != nil {
			return err
		}
	}
	for _, tc := range d.Get("tool_calls").Array() {
		i := int(tc.Get("index").Int())
		b, seen := s.tools[i]
		if !seen {
			if err := s.open("tool_use", map[string]any{"type": "tool_use", "id": cmpOr(tc.Get("id").String(), fmt.Sprintf("toolu_agentbox_%d", i)),
				"name": tc.Get("function.name").String(), "input": map[string]any{}}); err != nil {
				return err
			}
			s.tools[i] = s.block
			b = s.block
		}
		if args := tc.Get("function.arguments").String(); args != "" {
			if b != s.block {
				continue // a call resumed after another began: its block is closed
			}
			if err := s.event("content_block_delta", map[string]any{"index": b, "delta": map[string]any{"type": "input_json_delta", "partial_json": args}}); err != nil {
				return err
			}
		}
	}
	if f := ch.Get("finish_reason").String(); f != "" {
		s.finish = f
	}
	return nil
}

func (s *chatStream) end() error {
	if err := s.start(""); err != nil {
		return err
	}
	if err := s.closeBlock(); err != nil {
		return err
	}
	usage := s.usage
	if usage == nil {
		usage = chatUsage(gjson.Result{})
	}
	if err := s.event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(s.finish), "stop_sequence": nil},
		"usage": usage}); err != nil {
		return err
	}
	return s.event("message_stop", map[string]any{})
}

// fromChat replaces a Chat Completions answer with the Messages API's:
// an error body in its error shape, a stream translated as it arrives, a
// whole answer at once.
func fromChat(resp *http.Response, model string) error {
	h := resp.Header
	h.Del("Content-Length")
	h.Del("Content-Encoding")
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		setBody(resp, chatErrorToMessages(resp.StatusCode, body))
		return nil
	}
	if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		pr, pw := io.Pipe()
		up := resp.Body
		go func() {
			err := translateChatStream(pw, up, model)
			up.Close()
			pw.CloseWithError(err)
		}()
		resp.Body = pipeBody{pr, up}
		resp.ContentLength = -1
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMeterJSON))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the upstream's answer: %w", err)
	}
	msg, err := chatToMessage(body, model)
	if err != nil {
		resp.StatusCode, resp.Status = http.StatusBadGateway, "502 Bad Gateway"
		msg, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": "agentbox bridge: " + err.Error()}})
	}
	setBody(resp, msg)
	return nil
}

func setBody(resp *http.Response, b []byte) {
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.ContentLength = int64(len(b))
	resp.Body = io.NopCloser(bytes.NewReader(b))
}

// pipeBody is a translated stream: closing it also closes the upstream's
// body, which ends the translating goroutine.
type pipeBody struct {
	*io.PipeReader
	up io.Closer
}

func (b pipeBody) Close() error {
	b.up.Close()
	return b.PipeReader.Close()
}
