package scripted

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Request is one HTTP request the server received, recorded before it was
// answered.
type Request struct {
	// Method and Path are the request line ("POST", "/v1/messages");
	// RawQuery is the query string without "?" (e.g. "beta=true").
	Method   string
	Path     string
	RawQuery string
	// Time is when the request arrived.
	Time time.Time
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// API is "anthropic" (POST /v1/messages), "openai"
	// (/v1/chat/completions), "responses" (/v1/responses), "gemini"
	// (/v1beta/models/MODEL:METHOD), "count_tokens", "models" or "other".
	API string
	// Side reports a request that did not consume a turn (see the package
	// doc): title generation, quota probes, count_tokens, model listings.
	Side bool
	// Turn is the index in Script.Turns of the turn that answered, or -1.
	Turn int
}

// Message is one conversation message of a request, in the Anthropic shape.
// OpenAI requests are normalized: assistant tool_calls (Responses:
// function_call items) become tool_use blocks and "tool" messages
// (function_call_output items) become tool_result blocks (role "tool");
// Gemini contents keep their role ("model" becomes "assistant"), with
// functionCall and functionResponse parts as tool_use and tool_result
// blocks.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is one content block of a Message.
type Block struct {
	// Type is "text", "thinking", "tool_use", "tool_result", "image", ...
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// ID and Name identify a tool_use; Input is its raw input.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID links a tool_result to its tool_use; Content is its raw
	// content (a string or a list of blocks) and IsError its error flag.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// ContentText returns the text of a tool_result's content (a string, or the
// text blocks of a list joined with newlines).
func (b Block) ContentText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var blocks []Block
	if json.Unmarshal(b.Content, &blocks) == nil {
		var parts []string
		for _, c := range blocks {
			if c.Type == "text" {
				parts = append(parts, c.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// ToolResult is a tool_result together with the name of the tool whose
// call it answers.
type ToolResult struct {
	Block
	// Tool is the tool name of the matching tool_use, "" when not found.
	Tool string
}

// JSON decodes the body into a generic map; nil when it is not an object.
func (r Request) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

// Model returns the request's "model" field (for Gemini, the model its
// path names).
func (r Request) Model() string {
	if r.API == "gemini" {
		return geminiModel(r.Path)
	}
	var b struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Model
}

// Stream reports whether the request asked for a streamed response.
func (r Request) Stream() bool {
	if r.API == "gemini" {
		_, m := geminiMethod(r.Path[strings.LastIndexByte(r.Path, '/')+1:])
		return m == "streamGenerateContent"
	}
	var b struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Stream
}

// ToolNames returns the names of the tools the request offers (with a
// Responses namespace's tools).
func (r Request) ToolNames() []string {
	if r.API == "gemini" {
		return geminiToolNames(r.Body)
	}
	var b struct {
		Tools []struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(r.Body, &b)
	var names []string
	for _, t := range b.Tools {
		if t.Name != "" {
			names = append(names, t.Name)
		} else if t.Function.Name != "" {
			names = append(names, t.Function.Name)
		}
		for _, n := range t.Tools {
			names = append(names, n.Name)
		}
	}
	return names
}

// System returns the system prompt text (Anthropic "system", string or
// blocks; OpenAI system/developer messages and Responses instructions;
// Gemini's systemInstruction), joined with newlines.
func (r Request) System() string {
	if r.API == "gemini" {
		return strings.Join(geminiSystem(r.Body), "\n")
	}
	var b struct {
		System       json.RawMessage `json:"system"`
		Instructions string          `json:"instructions"`
	}
	_ = json.Unmarshal(r.Body, &b)
	var parts []string
	if len(b.System) > 0 {
		parts = append(parts, textOf(b.System)...)
	}
	if b.Instructions != "" {
		parts = append(parts, b.Instructions)
	}
	if r.API == "openai" || r.API == "responses" {
		for _, m := range r.Messages() {
			if m.Role == "system" || m.Role == "developer" {
				for _, c := range m.Content {
					parts = append(parts, c.Text)
				}
			}
		}
	}
	return strings.Join(parts, "\n")
}

// Messages returns the conversation messages of the request (see Message).
func (r Request) Messages() []Message {
	switch r.API {
	case "responses":
		return responsesMessages(r.Body)
	case "gemini":
		return geminiMessages(r.Body)
	}
	var b struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return nil
	}
	out := make([]Message, 0, len(b.Messages))
	for _, m := range b.Messages {
		msg := Message{Role: m.Role}
		if m.Role == "tool" {
			msg.Content = []Block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content}}
			out = append(out, msg)
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if s != "" {
				msg.Content = []Block{{Type: "text", Text: s}}
			}
		} else {
			_ = json.Unmarshal(m.Content, &msg.Content)
		}
		for _, tc := range m.ToolCalls {
			in := json.RawMessage(tc.Function.Arguments)
			if !json.Valid(in) {
				in = nil
			}
			msg.Content = append(msg.Content, Block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: in})
		}
		out = append(out, msg)
	}
	return out
}

// LastUserText returns the text blocks of the latest user message joined
// with newlines ("" when there is none). Messages with other roles after it
// (Claude Code appends role "system" reminders) are skipped.
func (r Request) LastUserText() string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var parts []string
		for _, c := range msgs[i].Content {
			if c.Type == "text" {
				parts = append(parts, c.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// NewText returns the text of the messages after the latest assistant
// message, of any role, tool results' content included, joined with
// newlines.
func (r Request) NewText() string {
	msgs := r.Messages()
	var parts []string
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != "assistant"; i-- {
		var in []string
		for _, c := range msgs[i].Content {
			switch c.Type {
			case "text":
				in = append(in, c.Text)
			case "tool_result":
				in = append(in, c.ContentText())
			}
		}
		parts = append(in, parts...)
	}
	return strings.Join(parts, "\n")
}

// LastPromptText returns the text of the user's latest prompt: the latest
// user message that has text and no tool_result (the tool results of an
// agent loop, and the text a CLI puts beside them, are not prompts).
func (r Request) LastPromptText() string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var parts []string
		prompt := true
		for _, c := range msgs[i].Content {
			switch c.Type {
			case "text":
				parts = append(parts, c.Text)
			case "tool_result":
				prompt = false
			}
		}
		if prompt && len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// ToolResults returns the tool results of the latest turn: the tool_result
// blocks of the latest user message (Anthropic) or the trailing tool
// messages (OpenAI), each with the name of the tool it answers.
func (r Request) ToolResults() []ToolResult {
	msgs := r.Messages()
	names := map[string]string{}
	for _, m := range msgs {
		for _, c := range m.Content {
			if c.Type == "tool_use" {
				names[c.ID] = c.Name
			}
		}
	}
	var out []ToolResult
	i := len(msgs) - 1
	for i >= 0 && msgs[i].Role == "system" {
		i--
	}
	if i >= 0 && msgs[i].Role == "tool" {
		for i >= 0 && msgs[i].Role == "tool" {
			i--
		}
		for _, m := range msgs[i+1:] {
			for _, c := range m.Content {
				out = append(out, ToolResult{Block: c, Tool: cmp.Or(names[c.ToolUseID], c.Name)})
			}
		}
		return out
	}
	if i >= 0 && msgs[i].Role == "user" {
		for _, c := range msgs[i].Content {
			if c.Type == "tool_result" {
				out = append(out, ToolResult{Block: c, Tool: cmp.Or(names[c.ToolUseID], c.Name)})
			}
		}
	}
	return out
}

// AllToolResults returns every tool_result in the conversation, in order.
func (r Request) AllToolResults() []ToolResult {
	msgs := r.Messages()
	names := map[string]string{}
	var out []ToolResult
	for _, m := range msgs {
		for _, c := range m.Content {
			switch c.Type {
			case "tool_use":
				names[c.ID] = c.Name
			case "tool_result":
				out = append(out, ToolResult{Block: c, Tool: cmp.Or(names[c.ToolUseID], c.Name)})
			}
		}
	}
	return out
}

func (m *Match) matches(r *Request) bool {
	if m == nil {
		return true
	}
	if m.Contains != "" && !strings.Contains(r.LastUserText(), m.Contains) {
		return false
	}
	if m.PromptContains != "" && !strings.Contains(r.LastPromptText(), m.PromptContains) {
		return false
	}
	if m.Sees != "" && !strings.Contains(r.NewText(), m.Sees) {
		return false
	}
	if m.AfterToolResult != "" {
		found := false
		for _, tr := range r.ToolResults() {
			if tr.Tool == m.AfterToolResult {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func textOf(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var blocks []Block
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return parts
}
