// Package chat holds the vocabulary every part of agentbox speaks:
// conversation messages, the chat events streamed to clients and their one
// encoding (event.go, wire.go), a turn's options (options.go), the error
// type with its code (error.go), and usage figures. It imports nothing of
// agentbox, so every other package can use it.
//
// # Event stream
//
// A chat turn is a sequence of events. Each message the client sees has an id
// and a type and goes through start, any number of deltas, and end; every
// event of a message carries its type, so a consumer never has to remember
// it:
//
//	{"event":"start","id":"m1","type":"text"}
//	{"event":"delta","id":"m1","type":"text","text":"Hel"}
//	{"event":"delta","id":"m1","type":"text","text":"lo"}
//	{"event":"end","id":"m1","type":"text"}
//
// A message that is complete when it is created (a tool result, a notice) is
// sent as start with its text and props followed at once by end. A replace
// event swaps a message's type, text and props; later events of
// the message carry the new type. The stream ends with exactly one "done"
// event carrying usage and session info.
//
// Message types: text, thinking, tool_call, tool_result, loading, error,
// notice, session, and any type a hook defines with ctx.Send.
package chat

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
