// Package chat holds the vocabulary every part of agentbox speaks: conversation
// messages, the chat events streamed to clients, and usage figures.
//
// # Event stream
//
// A chat turn is a sequence of events. Each message the client sees has an id
// and a type and goes through start, any number of deltas, and end:
//
//	{"event":"start","id":"m1","type":"text"}
//	{"event":"delta","id":"m1","type":"text","text":"Hel"}
//	{"event":"delta","id":"m1","type":"text","text":"lo"}
//	{"event":"end","id":"m1","type":"text"}
//
// A message that is complete when it is created (a tool result, a notice) is
// sent as start with its text and props followed at once by end. The stream
// ends with exactly one "done" event carrying usage and session info.
//
// Message types: text, thinking, tool_call, tool_result, loading, error,
// notice, session, and any type a hook defines with ctx.Send.
package chat

import (
	"encoding/json"
	"strings"
)

// Roles of conversation messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of a conversation, in the shape OpenAI-compatible
// clients send. Content is plain text; structured content parts are
// flattened to text by the server before they reach the pipeline.
type Message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	Name       string `json:"name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Event phases.
const (
	Start = "start"
	Delta = "delta"
	End   = "end"
	Done  = "done"
	// Replace swaps a message's type, text and props for new ones (hooks'
	// ctx.Replace); deltas after it append to the new text.
	Replace = "replace"
)

// Message types used by agentbox itself. Hooks may send any other type.
const (
	TypeText       = "text"
	TypeThinking   = "thinking"
	TypeToolCall   = "tool_call"
	TypeToolResult = "tool_result"
	TypeLoading    = "loading"
	TypeError      = "error"
	TypeNotice     = "notice"
	TypeSession    = "session"
)

// Event is one item of the chat event stream (see the package doc).
//
// Props by type:
//   - tool_call: name, id, input (the tool's JSON input, on end)
//   - tool_result: tool_call_id, content, is_error
//   - error: code (see the Err* codes), message
//   - notice: code, message
//   - session: session_id, model, tools, mcp_servers, skills, cwd
//   - loading: message
type Event struct {
	Event string         `json:"event"`
	ID    string         `json:"id,omitempty"`
	Type  string         `json:"type,omitempty"`
	Text  string         `json:"text,omitempty"`
	Props map[string]any `json:"props,omitempty"`
	// Final is set on the done event only.
	Final *Final `json:"done,omitempty"`
}

// Final is the payload of the done event.
type Final struct {
	Usage     Usage  `json:"usage"`
	SessionID string `json:"session_id,omitempty"`
	// Error is the error code of a failed turn ("" on success).
	Error string `json:"error,omitempty"`
	// Content is the answer text of the turn (after a Next hook replaced it,
	// its replacement).
	Content string `json:"content,omitempty"`
	// Data is what a Next hook returned as {data}, when it did.
	Data any `json:"data,omitempty"`
}

// Usage is what a turn cost.
type Usage struct {
	InputTokens         int64   `json:"input_tokens"`
	OutputTokens        int64   `json:"output_tokens"`
	CacheReadTokens     int64   `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64   `json:"cache_creation_tokens,omitempty"`
	CostUSD             float64 `json:"cost_usd,omitempty"`
	Turns               int     `json:"turns,omitempty"`
	DurationMS          int64   `json:"duration_ms,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheCreationTokens += o.CacheCreationTokens
	u.CostUSD += o.CostUSD
	u.Turns += o.Turns
	u.DurationMS += o.DurationMS
}

// EmitFunc receives events in order. Implementations must be safe to call
// from the goroutine that produces the events; they may block (back
// pressure from a slow client). An EmitFunc never retains Props maps after
// it returns unless it copies them.
type EmitFunc func(Event)

// Error codes carried by error events and error classes of the HTTP API.
const (
	ErrTimeout        = "timeout"
	ErrRateLimit      = "rate_limit"
	ErrAuth           = "auth"
	ErrNetwork        = "network"
	ErrInvalidRequest = "invalid_request"
	ErrUpstream       = "upstream"
	ErrSandbox        = "sandbox"
	ErrExecutor       = "executor"
	ErrHook           = "hook"
	ErrCanceled       = "canceled"
	ErrInternal       = "internal"
	ErrMaxTurns       = "max_turns"
)

// Whole emits a complete message: start with text and props, then end.
func Whole(emit EmitFunc, id, typ, text string, props map[string]any) {
	emit(Event{Event: Start, ID: id, Type: typ, Text: text, Props: props})
	emit(Event{Event: End, ID: id, Type: typ})
}

// ErrorEvent emits a whole error message with a code and a human-readable
// message.
func ErrorEvent(emit EmitFunc, id, code, message string) {
	Whole(emit, id, TypeError, message, map[string]any{"code": code, "message": message})
}

// Notice emits a whole notice message.
func Notice(emit EmitFunc, id, code, message string) {
	Whole(emit, id, TypeNotice, message, map[string]any{"code": code, "message": message})
}

// Collector accumulates an event stream into the final answer text, as a
// non-streaming client would see it. The zero value is ready to use. It is
// not safe for concurrent use.
type Collector struct {
	text  strings.Builder
	types map[string]string
}

// Add records one event.
func (c *Collector) Add(e Event) {
	if c.types == nil {
		c.types = map[string]string{}
	}
	switch e.Event {
	case Start:
		c.types[e.ID] = e.Type
		if e.Type == TypeText {
			c.text.WriteString(e.Text)
		}
	case Delta:
		if c.types[e.ID] == TypeText || e.Type == TypeText {
			c.text.WriteString(e.Text)
		}
	}
}

// Text returns the answer text collected so far.
func (c *Collector) Text() string { return c.text.String() }

// RawJSON marks a value already encoded as JSON, so a tool input is passed
// through without being decoded and re-encoded.
type RawJSON = json.RawMessage
