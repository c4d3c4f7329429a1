package connector

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
)

// Anthropic API constants.
const (
	anthropicDefaultHost = "https://api.anthropic.com"
	// AnthropicVersion is the anthropic-version header sent.
	AnthropicVersion = "2023-06-01"
)

// anthropic speaks the Messages API (POST {host}/v1/messages, x-api-key,
// anthropic-version; the system prompt is a separate field and max_tokens
// is required).
type anthropic struct {
	cfg Config
}

func newAnthropic(cfg Config) (Client, error) {
	u, err := endpoint(TypeAnthropic, cfg.Host, anthropicDefaultHost, "/messages")
	if err != nil {
		return nil, err
	}
	return newClient(TypeAnthropic, cfg, u, &anthropic{cfg: cfg}), nil
}

func (p *anthropic) header(h http.Header) {
	setKey(h, p.cfg.AuthMode, AuthXAPIKey, p.cfg.Key)
	h.Set("Anthropic-Version", cmpOr(p.cfg.APIVersion, AnthropicVersion))
}

// anthropicMessage is a message of a Messages API request: its content
// is a string, or a list of blocks when it holds tool calls or results.
type anthropicMessage struct {
	Role    string           `json:"role"`
	Content any              `json:"content"`
	text    string           // the text while the message is plain
	blocks  []map[string]any // the blocks once it has tool content
}

// add appends m's text (and blocks) to the message: texts of one role
// merge with a blank line, as the API wants turns to alternate.
func (a *anthropicMessage) add(text string, blocks ...map[string]any) {
	if a.blocks == nil && len(blocks) == 0 {
		if a.text != "" && text != "" {
			a.text += "\n\n"
		}
		a.text += text
		return
	}
	if a.blocks == nil {
		a.blocks = []map[string]any{}
		if a.text != "" {
			a.blocks = append(a.blocks, map[string]any{"type": "text", "text": a.text})
		}
	}
	if text != "" {
		a.blocks = append(a.blocks, map[string]any{"type": "text", "text": text})
	}
	a.blocks = append(a.blocks, blocks...)
}

func (p *anthropic) body(req *Request, model string) ([]byte, int, error) {
	if err := checkRoles(req.Messages); err != nil {
		return nil, 0, err
	}
	caps := p.cfg.caps(model)
	fields, err := anthropicFields(req.Options, caps)
	if err != nil {
		return nil, 0, err
	}
	body, err := mergeOptions(connectorFields(TypeAnthropic, p.cfg), req.Fields, fields, "messages", "stream", "system")
	if err != nil {
		return nil, 0, err
	}
	// The token limit is required: the options', else the connector's
	// max_tokens (or OpenAI's newer name in its own options), else 4096,
	// lowered to the model's max_output_tokens (Yao's anthropic provider).
	maxTokens, ok, err := intOption(body, "max_tokens")
	if err != nil {
		return nil, 0, err
	}
	if n, has, err := intOption(body, "max_completion_tokens"); err != nil {
		return nil, 0, err
	} else if has {
		delete(body, "max_completion_tokens")
		if !ok {
			maxTokens, ok = n, true
		}
	}
	switch {
	case req.MaxTokens > 0:
		maxTokens = req.MaxTokens
	case !ok || maxTokens <= 0:
		maxTokens = DefaultAnthropicMaxTokens
	}
	if caps.MaxOutputTokens > 0 && maxTokens > caps.MaxOutputTokens {
		maxTokens = caps.MaxOutputTokens
	}
	body["max_tokens"] = maxTokens

	// System (and developer) messages join the system prompt, wherever
	// they are; an assistant's tool calls become tool_use blocks and each
	// tool message answering one a user message with its tool_result
	// block; the other messages go as they are, one by one (the API joins
	// consecutive turns of one role), as Yao's anthropic provider sends
	// them. Empty messages are dropped (the API refuses empty text).
	system := []string{}
	if req.System != "" {
		system = append(system, req.System)
	}
	var msgs []*anthropicMessage
	ok2 := answered(req.Messages)
	for i, m := range req.Messages {
		if m.Role == chat.RoleTool && !ok2[i] {
			m = asText(m)
		}
		if m.Role == chat.RoleSystem || m.Role == chat.RoleDeveloper {
			if strings.TrimSpace(m.Content) != "" {
				system = append(system, m.Content)
			}
			continue
		}
		text := m.Content
		if strings.TrimSpace(text) == "" {
			text = ""
		}
		var blocks []map[string]any
		role := m.Role
		switch m.Role {
		case chat.RoleTool:
			role, text = chat.RoleUser, ""
			blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": m.Content})
		case chat.RoleAssistant:
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": input(tc.Input)})
			}
		case chat.RoleUser:
			if len(m.Images()) > 0 {
				// Its parts in order, each image an image block.
				text = ""
				for _, p := range m.Parts {
					if p.Type == chat.PartImage {
						blocks = append(blocks, imageBlock(p.ImageURL.URL))
					} else if strings.TrimSpace(p.Text) != "" {
						blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
					}
				}
			}
		}
		if text == "" && len(blocks) == 0 {
			continue
		}
		am := &anthropicMessage{Role: role}
		am.add(text, blocks...)
		msgs = append(msgs, am)
	}
	if len(msgs) == 0 {
		return nil, 0, errors.New("the request has no user or assistant message with text; send at least one user message")
	}
	if msgs[0].Role != chat.RoleUser {
		return nil, 0, errors.New("the conversation starts with an assistant message; the Anthropic API needs a user message first")
	}
	for _, m := range msgs {
		if m.blocks != nil {
			m.Content = m.blocks
		} else {
			m.Content = m.text
		}
	}
	if len(system) > 0 {
		body["system"] = strings.Join(system, "\n\n")
	}
	body["model"] = model
	body["messages"] = msgs
	body["stream"] = true
	b, err := json.Marshal(body)
	return b, maxTokens, err
}

// anthropicBlock accumulates one content block.
type anthropicBlock struct {
	kind, id, name string
	input          []byte
}

func (p *anthropic) stream(r *sse.Reader, out *output) error {
	blocks := map[int64]*anthropicBlock{}
	stop := ""
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return errStreamCut
		}
		if err != nil {
			return err
		}
		if len(ev.Data) == 0 {
			continue
		}
		if !gjson.ValidBytes(ev.Data) {
			return out.badData("an event", ev.Data)
		}
		d := gjson.ParseBytes(ev.Data)
		typ := d.Get("type").String()
		if typ == "" {
			typ = ev.Type
		}
		switch typ {
		case "message_start":
			m := d.Get("message")
			out.resp.Model = m.Get("model").String()
			anthropicUsage(&out.resp.Usage, m.Get("usage"))
		case "content_block_start":
			cb := d.Get("content_block")
			b := &anthropicBlock{kind: cb.Get("type").String(), id: cb.Get("id").String(), name: cb.Get("name").String()}
			blocks[d.Get("index").Int()] = b
			switch b.kind {
			case "text":
				out.delta(chat.TypeText, cb.Get("text").String())
			case "thinking":
				out.delta(chat.TypeThinking, cb.Get("thinking").String())
			case "tool_use", "server_tool_use":
				out.progress()
			}
		case "content_block_delta":
			delta := d.Get("delta")
			switch delta.Get("type").String() {
			case "text_delta":
				out.delta(chat.TypeText, delta.Get("text").String())
			case "thinking_delta":
				out.delta(chat.TypeThinking, delta.Get("thinking").String())
			case "input_json_delta":
				out.progress()
				if b := blocks[d.Get("index").Int()]; b != nil {
					b.input = append(b.input, delta.Get("partial_json").String()...)
				}
			default: // signature_delta, citations_delta: no text
				out.progress()
			}
		case "content_block_stop":
			b := blocks[d.Get("index").Int()]
			delete(blocks, d.Get("index").Int())
			switch {
			case b == nil:
			case b.kind == "tool_use" || b.kind == "server_tool_use":
				out.toolCall(ToolCall{ID: b.id, Name: b.name, Input: b.input})
			default:
				// A new block of the same type is a new message.
				out.closeOpen()
			}
		case "message_delta":
			out.progress()
			if s := d.Get("delta.stop_reason").String(); s != "" {
				stop = s
			}
			anthropicUsage(&out.resp.Usage, d.Get("usage"))
		case "message_stop":
			out.finish(stop)
			return nil
		case "error":
			return streamError(TypeAnthropic, ev.Data, out.reqID, out.key)
		}
		// ping and unknown event types are ignored, as the API asks.
	}
}

func (p *anthropic) whole(body []byte, out *output) error {
	if !gjson.ValidBytes(body) {
		return out.badData("an answer", body)
	}
	r := gjson.ParseBytes(body)
	if r.Get("type").String() == "error" {
		return streamError(TypeAnthropic, body, out.reqID, out.key)
	}
	if !r.Get("content").IsArray() {
		return out.badData("an answer without content", body)
	}
	out.resp.Model = r.Get("model").String()
	anthropicUsage(&out.resp.Usage, r.Get("usage"))
	for _, cb := range r.Get("content").Array() {
		switch cb.Get("type").String() {
		case "text":
			out.delta(chat.TypeText, cb.Get("text").String())
		case "thinking":
			out.delta(chat.TypeThinking, cb.Get("thinking").String())
		case "tool_use", "server_tool_use":
			out.toolCall(ToolCall{ID: cb.Get("id").String(), Name: cb.Get("name").String(), Input: chat.RawJSON(cb.Get("input").Raw)})
		}
		out.closeOpen()
	}
	out.finish(r.Get("stop_reason").String())
	return nil
}

// anthropicUsage copies the usage fields present in u into dst (the
// message_delta usage is cumulative and may repeat input figures).
func anthropicUsage(dst *chat.Usage, u gjson.Result) {
	if !u.IsObject() {
		return
	}
	set := func(p *int64, k string) {
		if v := u.Get(k); v.Exists() && v.Int() > 0 {
			*p = v.Int()
		}
	}
	set(&dst.InputTokens, "input_tokens")
	set(&dst.OutputTokens, "output_tokens")
	set(&dst.CacheReadTokens, "cache_read_input_tokens")
	set(&dst.CacheCreationTokens, "cache_creation_input_tokens")
}
