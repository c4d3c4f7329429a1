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
// notice, session, skill_proposed, and any type a hook defines with
// ctx.Send.
package chat

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
)

// Roles of conversation messages.
const (
	RoleSystem = "system"
	// RoleDeveloper is OpenAI's newer name for system instructions
	// (prompts.yml may use it, as OpenAI clients do); providers without
	// it take it as system.
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of a conversation, in the shape OpenAI-compatible
// clients send. Content is its text. A message with images also has Parts:
// its content as it came, text and images in order (Content is then the
// text of its text parts, joined with newlines).
//
// Function calling (a direct assistant's model asking the client to run
// one of the client's tools) takes two kinds of messages: an assistant
// message with ToolCalls (and Content, possibly empty), and, for each
// call, a tool message whose ToolCallID is the call's ID and whose Content
// is the result.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Parts is the content of a message with images, in order (nil for a
	// message of text only).
	Parts      []Part `json:"parts,omitempty"`
	Name       string `json:"name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Reasoning is what the model reasoned before an assistant message of
	// the server's tool loop, sent back with it (OpenAI-compatible
	// reasoning models such as DeepSeek's and Kimi's thinking modes
	// require it). It is never read from or written to JSON.
	Reasoning string `json:"-"`
	// Failure, on an assistant message of a stored history, says why its
	// turn failed or stopped (its Code is "" for an answer that ended
	// well): Content is what was answered until then, often nothing.
	// Models never see it.
	Failure Failure `json:"error,omitzero"`
	// Said, on an assistant message of a stored history, are the
	// messages its user sent into the turn while it ran (a kept CLI takes
	// them as its next input), in order. Models never see them here: the
	// CLI's session holds them.
	Said []Said `json:"said,omitempty"`
}

// Said is a message its user sent into a running turn.
type Said struct {
	Content string `json:"content"`
	// At is where the turn's answer stood when it was sent: a byte offset
	// into the assistant message's Content.
	At int `json:"at"`
}

// Content part types of Part.Type (OpenAI's).
const (
	PartText  = "text"
	PartImage = "image_url"
)

// Part is one part of a message's content: text, or an image.
type Part struct {
	Type string `json:"type"`
	// Text is a text part's text.
	Text string `json:"text,omitempty"`
	// ImageURL is an image part's image.
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is an image of a message, in OpenAI's shape.
type ImageURL struct {
	// URL is the image as a data: URL ("data:image/png;base64,..."); an
	// http(s) address a client sent is fetched (when the server allows
	// its host) and held as one.
	URL string `json:"url"`
	// Detail is OpenAI's resolution hint (auto, low, high), passed on.
	Detail string `json:"detail,omitempty"`
}

// Images returns the message's image parts, in order.
func (m Message) Images() []ImageURL {
	var out []ImageURL
	for _, p := range m.Parts {
		if p.Type == PartImage && p.ImageURL != nil {
			out = append(out, *p.ImageURL)
		}
	}
	return out
}

// TextOf joins the text of parts with newlines: a message's Content.
func TextOf(parts []Part) string {
	var texts []string
	for _, p := range parts {
		if p.Type == PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Failure is the error a stored turn ended with: the code and message its
// client was sent.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ToolCall is a call of a client's function the model asked for. The
// client runs it and answers with a tool message.
type ToolCall struct {
	// ID links the call to its result (OpenAI's tool_calls[].id, Anthropic's
	// tool_use id).
	ID string `json:"id"`
	// Name is the function's name.
	Name string `json:"name"`
	// Input is the function's arguments as JSON, as the model wrote them
	// (a JSON string holding the text when the model's text was not JSON).
	Input RawJSON `json:"input"`
}

// Arguments returns the call's input as OpenAI's arguments string: the
// JSON text, or the model's own text when it was not JSON (Input then
// holds it as a JSON string); "{}" when there is none.
func (tc ToolCall) Arguments() string {
	t := strings.TrimSpace(string(tc.Input))
	if t == "" {
		return "{}"
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal([]byte(t), &s) == nil {
			return s
		}
	}
	return t
}

// ArgumentsInput is the inverse of Arguments: a call's input from an
// arguments string, the JSON as it is, or text that is not JSON kept as a
// JSON string.
func ArgumentsInput(args string) RawJSON {
	t := strings.TrimSpace(args)
	switch {
	case t == "":
		return RawJSON("{}")
	case json.Valid([]byte(t)):
		return RawJSON(t)
	}
	b, _ := json.Marshal(args)
	return b
}

// Finish reasons: why the model stopped, in OpenAI's words, whatever the
// provider said (Anthropic's end_turn is stop, max_tokens is length,
// tool_use is tool_calls, refusal is content_filter).
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
)

// FinishReason maps a provider's stop reason to one of the Finish*
// values: OpenAI's finish_reason and Anthropic's stop_reason alike. An
// empty or unknown reason is FinishStop.
func FinishReason(provider string) string {
	switch provider {
	case "length", "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_calls", "tool_use", "function_call":
		return FinishToolCalls
	case "content_filter", "refusal":
		return FinishContentFilter
	}
	return FinishStop
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
	// ModelCalls counts the model API calls a sandboxed turn's CLI made
	// through the bridge's model proxy (0 without one).
	ModelCalls int `json:"model_calls,omitempty"`
	// TokensFrom says who counted the token fields: MeteredByProxy (the
	// bridge's model proxy, from the provider's answers), MeteredByCLI
	// (the CLI's own report), or "" (a direct call's answer).
	TokensFrom string `json:"tokens_from,omitempty"`
	// CostFrom says who priced CostUSD: MeteredByCLI (the CLI, for the
	// calls it made itself) or "" (no cost).
	CostFrom string `json:"cost_from,omitempty"`
	// CLI is the CLI's own report of its tokens and cost when the tokens
	// above are the proxy's (nil otherwise): the two differ when the CLI
	// miscounts or the agent made calls of its own.
	CLI *Usage `json:"cli,omitempty"`
	// Egress is the sandbox's traffic through its egress proxy, per host,
	// sorted by host (empty without an egress policy).
	Egress []HostUsage `json:"egress,omitempty"`
}

// Who counted a Usage's figures (Usage.TokensFrom, Usage.CostFrom).
const (
	MeteredByProxy = "proxy"
	MeteredByCLI   = "cli"
)

// HostUsage is a turn's traffic to one host through the sandbox's egress
// proxy.
type HostUsage struct {
	// Host is "name:port" as the sandbox asked for it.
	Host string `json:"host"`
	// Requests counts the HTTP requests and tunnels forwarded to the host
	// (a tunnel whose TLS the proxy terminates counts its requests).
	Requests int64 `json:"requests"`
	// Denied counts the requests refused.
	Denied int64 `json:"denied,omitempty"`
	// BytesSent and BytesReceived count what went over the connections to
	// the host, TLS included.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
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
	u.ModelCalls += o.ModelCalls
	u.TokensFrom = cmp.Or(o.TokensFrom, u.TokensFrom)
	u.CostFrom = cmp.Or(o.CostFrom, u.CostFrom)
	if o.CLI != nil {
		if u.CLI == nil {
			u.CLI = &Usage{}
		}
		u.CLI.Add(*o.CLI)
	}
	u.Egress = MergeHostUsage(u.Egress, o.Egress)
}

// MergeHostUsage returns a new list with the counts of b added to a's, per
// host, sorted by host.
func MergeHostUsage(a, b []HostUsage) []HostUsage {
	if len(b) == 0 && len(a) == 0 {
		return nil
	}
	by := make(map[string]int, len(a)+len(b))
	out := make([]HostUsage, 0, len(a)+len(b))
	for _, list := range [][]HostUsage{a, b} {
		for _, h := range list {
			if i, ok := by[h.Host]; ok {
				p := &out[i]
				p.Requests += h.Requests
				p.Denied += h.Denied
				p.BytesSent += h.BytesSent
				p.BytesReceived += h.BytesReceived
				continue
			}
			by[h.Host] = len(out)
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(x, y HostUsage) int { return strings.Compare(x.Host, y.Host) })
	return out
}
