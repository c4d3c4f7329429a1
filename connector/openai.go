package connector

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
)

// openAIDefaultHost is used when the connector has no host.
const openAIDefaultHost = "https://api.openai.com"

// openAI speaks Chat Completions (POST {host}/v1/chat/completions, stream
// true, Authorization: Bearer).
type openAI struct {
	cfg Config
}

func newOpenAI(cfg Config) (Client, error) {
	u, err := endpoint(TypeOpenAI, cfg.Host, openAIDefaultHost, "/chat/completions")
	if err != nil {
		return nil, err
	}
	return newClient(TypeOpenAI, cfg, u, &openAI{cfg: cfg}), nil
}

func (p *openAI) header(h http.Header) {
	setKey(h, p.cfg.AuthMode, AuthBearer, p.cfg.Key)
}

type openAIMessage struct {
	Role string `json:"role"`
	// Content is the text (a *string; "" for an assistant message that
	// only calls tools, as Yao sends it), or a user message's parts when
	// it has images.
	Content    any              `json:"content"`
	Name       string           `json:"name,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent is an assistant message's reasoning, as Yao's
	// provider sends it back (reasoning_content).
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (p *openAI) body(req *Request, model string) ([]byte, int, error) {
	if err := checkRoles(req.Messages); err != nil {
		return nil, 0, err
	}
	caps := p.cfg.caps(model)
	body, err := mergeOptions(connectorFields(TypeOpenAI, p.cfg), req.Fields, optionFields(req.Options, caps), "messages", "stream")
	if err != nil {
		return nil, 0, err
	}
	if req.MaxTokens > 0 {
		delete(body, "max_tokens")
		body["max_completion_tokens"] = req.MaxTokens
	}
	if _, ok := body["max_completion_tokens"]; ok {
		// Never both: a connector's max_tokens, which Yao would send
		// beside the options' limit, goes (the API refuses the pair).
		delete(body, "max_tokens")
	}
	maxTokens := 0
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		n, ok, err := intOption(body, k)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			maxTokens = n
		}
	}
	msgs := make([]openAIMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, openAIMessage{Role: chat.RoleSystem, Content: &req.System})
	}
	ok := answered(req.Messages)
	for i, m := range req.Messages {
		if m.Role == chat.RoleTool && !ok[i] {
			m = asText(m)
		}
		om := openAIMessage{Role: m.Role, Content: &m.Content, Name: m.Name}
		if len(m.Images()) > 0 {
			om.Content = openAIParts(m.Parts, caps.Vision)
		}
		if m.Role == chat.RoleTool {
			om.ToolCallID, om.Name = m.ToolCallID, ""
		}
		if m.Role == chat.RoleAssistant {
			om.ReasoningContent = m.Reasoning
		}
		for _, tc := range m.ToolCalls {
			c := openAIToolCall{ID: tc.ID, Type: "function"}
			c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments()
			om.ToolCalls = append(om.ToolCalls, c)
		}
		msgs = append(msgs, om)
	}
	body["model"] = model
	body["messages"] = msgs
	body["stream"] = true
	if _, ok := body["stream_options"]; !ok {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	b, err := json.Marshal(body)
	return b, maxTokens, err
}

// openAIParts are a message's parts as Yao's openai provider sends them:
// as they are (OpenAI's image_url parts), or with a claude or base64
// vision format each image as Anthropic's base64 image block (Yao's
// VisionAdapter; the images are data: URLs by now).
func openAIParts(parts []chat.Part, format string) []any {
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.Type == chat.PartImage && (format == VisionClaude || format == VisionBase64):
			out = append(out, imageBlock(p.ImageURL.URL))
		case p.Type == chat.PartImage:
			img := map[string]any{"url": p.ImageURL.URL}
			if p.ImageURL.Detail != "" {
				img["detail"] = p.ImageURL.Detail
			}
			out = append(out, map[string]any{"type": "image_url", "image_url": img})
		default:
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		}
	}
	return out
}

// imageBlock is an image as an Anthropic image block: base64 for a data:
// URL, else by its URL (Yao's anthropic provider, convertImagePart).
func imageBlock(url string) map[string]any {
	if meta, data, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ","); ok && strings.HasPrefix(url, "data:") {
		return map[string]any{"type": "image", "source": map[string]any{
			"type": "base64", "media_type": strings.TrimSuffix(meta, ";base64"), "data": data}}
	}
	return map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": url}}
}

// openAICall accumulates one streamed tool call.
type openAICall struct {
	id, name string
	args     []byte
}

func (p *openAI) stream(r *sse.Reader, out *output) error {
	calls := map[int64]*openAICall{}
	finish := ""
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			if finish != "" {
				// Some compatible servers end without [DONE] after the
				// finish reason; the answer is complete.
				p.end(out, calls, finish)
				return nil
			}
			return errStreamCut
		}
		if err != nil {
			return err
		}
		data := ev.Data
		if string(data) == sse.Done {
			if finish == "" && len(calls) == 0 && out.text.Len() == 0 && out.thinking.Len() == 0 {
				return errStreamCut // [DONE] with no answer at all
			}
			p.end(out, calls, finish)
			return nil
		}
		if len(data) == 0 {
			continue
		}
		if !gjson.ValidBytes(data) {
			return out.badData("a stream chunk", data)
		}
		c := gjson.ParseBytes(data)
		if e := c.Get("error"); e.Exists() {
			return streamError(TypeOpenAI, data, out.reqID, out.key)
		}
		if m := c.Get("model").String(); m != "" {
			out.resp.Model = m
		}
		if u := c.Get("usage"); u.IsObject() {
			out.resp.Usage = openAIUsage(u)
		}
		ch := c.Get("choices.0")
		if !ch.Exists() {
			continue
		}
		d := ch.Get("delta")
		reasoning := d.Get("reasoning_content")
		if !reasoning.Exists() {
			reasoning = d.Get("reasoning") // OpenRouter and others
		}
		out.delta(chat.TypeThinking, reasoning.String())
		out.delta(chat.TypeText, d.Get("content").String())
		for _, tc := range d.Get("tool_calls").Array() {
			out.progress()
			i := tc.Get("index").Int()
			call := calls[i]
			if call == nil {
				call = &openAICall{}
				calls[i] = call
			}
			if id := tc.Get("id").String(); id != "" {
				call.id = id
			}
			if n := tc.Get("function.name").String(); n != "" {
				call.name += n
			}
			call.args = append(call.args, tc.Get("function.arguments").String()...)
		}
		if f := ch.Get("finish_reason").String(); f != "" {
			finish = f
		}
	}
}

// end emits the accumulated tool calls (in index order) and the finish.
func (p *openAI) end(out *output, calls map[int64]*openAICall, finish string) {
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	out.closeOpen()
	for _, i := range idx {
		c := calls[i]
		out.toolCall(ToolCall{ID: c.id, Name: c.name, Input: c.args})
	}
	out.finish(finish)
}

func (p *openAI) whole(body []byte, out *output) error {
	if !gjson.ValidBytes(body) {
		return out.badData("an answer", body)
	}
	r := gjson.ParseBytes(body)
	if r.Get("error").Exists() {
		return streamError(TypeOpenAI, body, out.reqID, out.key)
	}
	ch := r.Get("choices.0")
	if !ch.Exists() {
		return out.badData("an answer without choices", body)
	}
	out.resp.Model = r.Get("model").String()
	if u := r.Get("usage"); u.IsObject() {
		out.resp.Usage = openAIUsage(u)
	}
	m := ch.Get("message")
	reasoning := m.Get("reasoning_content")
	if !reasoning.Exists() {
		reasoning = m.Get("reasoning")
	}
	out.delta(chat.TypeThinking, reasoning.String())
	out.delta(chat.TypeText, m.Get("content").String())
	out.closeOpen()
	for _, tc := range m.Get("tool_calls").Array() {
		out.toolCall(ToolCall{ID: tc.Get("id").String(), Name: tc.Get("function.name").String(),
			Input: chat.RawJSON(tc.Get("function.arguments").String())})
	}
	out.finish(ch.Get("finish_reason").String())
	return nil
}

// openAIUsage maps usage to chat.Usage with Anthropic's meaning:
// InputTokens excludes cached prompt tokens, which go to CacheReadTokens.
func openAIUsage(u gjson.Result) chat.Usage {
	cached := u.Get("prompt_tokens_details.cached_tokens").Int()
	in := u.Get("prompt_tokens").Int() - cached
	if in < 0 {
		in = 0
	}
	return chat.Usage{
		InputTokens:     in,
		OutputTokens:    u.Get("completion_tokens").Int(),
		CacheReadTokens: cached,
	}
}
