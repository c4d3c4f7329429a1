package agentcli

import (
	"log/slog"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// This file is the chat side every JSON-lines parser of a CLI shares: a
// parser reads its CLI's events and tells a Chat what happened (text,
// thinking, a tool call, its result, the usage, a failure); the Chat emits
// the chat events in the order and shape clients know from the claude
// executor and keeps the outcome.

// ChatOptions configure a Chat. The zero value is usable.
type ChatOptions struct {
	// IDPrefix starts every event id (IDPrefix-1, IDPrefix-2, ...).
	IDPrefix string
	// FailureThreshold is how many consecutive failures of one tool raise
	// repeated_tool_failure (DefaultFailureThreshold when 0; the driver
	// sets the assistant's in Plan.FailureThreshold).
	FailureThreshold int
	// MaxEventContent caps a tool result's content in events
	// (DefaultMaxEventContent when 0); the full size is reported in the
	// content_bytes prop.
	MaxEventContent int
	// Monitor, when set, is told when the CLI answered and settled.
	Monitor Monitor
}

// StreamOutcome is what a parsed stream of a CLI amounts to: the shared
// outcome and the line counts.
type StreamOutcome struct {
	Outcome
	LineStats
}

// LogValue is what the driver logs of the outcome.
func (o *StreamOutcome) LogValue() slog.Value { return o.LogGroup(o.LineStats.LogAttrs()...) }

// chatTool is a tool call seen in the stream.
type chatTool struct {
	name string
	idx  int // in out.ToolCalls
	done bool
}

// Chat turns what a parser reads into chat events. It is not safe for
// concurrent use; events are emitted from the calling goroutine, in order.
type Chat struct {
	emit chat.EmitFunc
	opts ChatOptions
	ev   Events

	textID, thinkID string
	answer          strings.Builder
	tools           map[string]*chatTool
	mcpFailed       map[string]bool
	out             StreamOutcome
}

// NewChat returns a Chat that sends events to emit.
func NewChat(emit chat.EmitFunc, opts ChatOptions) *Chat {
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = DefaultFailureThreshold
	}
	if opts.MaxEventContent <= 0 {
		opts.MaxEventContent = DefaultMaxEventContent
	}
	return &Chat{emit: emit, opts: opts, tools: map[string]*chatTool{},
		ev: NewEvents(emit, opts.IDPrefix, opts.FailureThreshold)}
}

// ChatLines are the line reader options of a Chat's CLI: lines up to
// DefaultMaxLine (a longer one is dropped with a notice), strings not
// shortened.
var ChatLines = LineOptions{}

// Line hands line to handle when it is a JSON object (see
// LineStats.Object); a line the reader dropped for its length raises a
// notice.
func (c *Chat) Line(line Line, handle func(line string)) {
	if s, ok := c.out.Object(line); ok {
		handle(s)
	} else if line.Dropped {
		c.ev.LineDropped(line.Size)
	}
}

// Skip counts a line the parser could not dispatch on.
func (c *Chat) Skip() { c.out.Skipped++ }

// Outcome is the outcome so far (the parser fills what only it knows).
func (c *Chat) Outcome() *StreamOutcome { return &c.out }

// Session emits the session message and keeps its id and model.
func (c *Chat) Session(s Session) {
	if s.ID != "" {
		c.out.SessionID = s.ID
	}
	if s.Model != "" {
		c.out.Model = s.Model
	}
	c.ev.Session(s)
	for _, m := range s.MCPServers {
		st := strings.ToLower(m.Status)
		if strings.Contains(st, "fail") || strings.Contains(st, "error") || st == "disconnected" {
			c.MCPFailed(m.Name, m.Status, "")
		}
	}
}

// Text streams text into the open text message (opening one, and closing
// open thinking, first).
func (c *Chat) Text(text string) {
	if text == "" {
		return
	}
	if c.textID == "" {
		c.EndThinking()
		c.textID = c.ev.NewID()
		if c.answer.Len() > 0 {
			c.answer.WriteString("\n\n")
		}
		c.emit(chat.Event{Event: chat.Start, ID: c.textID, Type: chat.TypeText})
	}
	c.emit(chat.Event{Event: chat.Delta, ID: c.textID, Type: chat.TypeText, Text: text})
	c.answer.WriteString(text)
}

// AnswerLen is the length in bytes of the answer's text so far.
func (c *Chat) AnswerLen() int { return c.answer.Len() }

// EndText closes the open text message.
func (c *Chat) EndText() {
	if c.textID != "" {
		c.emit(chat.Event{Event: chat.End, ID: c.textID, Type: chat.TypeText})
		c.textID = ""
	}
}

// Thinking streams text into the open thinking message.
func (c *Chat) Thinking(text string) {
	if text == "" {
		return
	}
	if c.thinkID == "" {
		c.EndText()
		c.thinkID = c.ev.NewID()
		c.emit(chat.Event{Event: chat.Start, ID: c.thinkID, Type: chat.TypeThinking})
	}
	c.emit(chat.Event{Event: chat.Delta, ID: c.thinkID, Type: chat.TypeThinking, Text: text})
}

// EndThinking closes the open thinking message.
func (c *Chat) EndThinking() {
	if c.thinkID != "" {
		c.emit(chat.Event{Event: chat.End, ID: c.thinkID, Type: chat.TypeThinking})
		c.thinkID = ""
	}
}

func (c *Chat) endOpen() {
	c.EndText()
	c.EndThinking()
}

// ToolCall emits a tool call (once per id): its name, id and input (a
// JSON object), and the CLI's own kind of tool when it has one. The run
// counts as busy until its result.
func (c *Chat) ToolCall(id, name, kind string, input chat.RawJSON) {
	if t := c.tools[id]; t != nil && id != "" {
		return
	}
	c.endOpen()
	t := &chatTool{name: name, idx: len(c.out.ToolCalls)}
	if id != "" {
		c.tools[id] = t
	}
	if len(input) == 0 {
		input = chat.RawJSON("{}")
	}
	c.out.ToolCalls = append(c.out.ToolCalls, executor.ToolCall{ID: id, Name: name, Input: input})
	eid := c.ev.NewID()
	props := map[string]any{"name": name, "id": id}
	if kind != "" {
		props["kind"] = kind
	}
	c.emit(chat.Event{Event: chat.Start, ID: eid, Type: chat.TypeToolCall, Props: props})
	c.emit(chat.Event{Event: chat.End, ID: eid, Type: chat.TypeToolCall, Props: map[string]any{"input": input}})
	if m := c.opts.Monitor; m != nil {
		m.Busy(true)
	}
}

// ToolResult emits the result of the call with id (once; a result of a
// call never announced announces it first, named name).
func (c *Chat) ToolResult(id, name, content string, isErr bool) {
	t := c.tools[id]
	if t == nil || id == "" {
		c.ToolCall(id, name, "", nil)
		t = c.tools[id]
		if t == nil { // no id: the call just added
			t = &chatTool{name: name, idx: len(c.out.ToolCalls) - 1}
		}
	}
	if t.done {
		return
	}
	t.done = true
	c.endOpen()
	capped := CapString(content, len(content), c.opts.MaxEventContent)
	r := chat.ToolResult{ToolCallID: id, Name: t.name, Content: capped.Content, IsError: isErr}
	if capped.Truncated {
		r.Size = capped.Size
	}
	tc := &c.out.ToolCalls[t.idx]
	tc.Result = KeptResult(capped.Content)
	tc.IsError = isErr
	chat.WholeToolResult(c.emit, c.ev.NewID(), r)
	c.ev.ToolResultContent(t.name, isErr, capped.Content)
	if m := c.opts.Monitor; m != nil {
		m.Busy(false)
	}
}

// Notice emits a notice with code and message.
func (c *Chat) Notice(code, message string, extra map[string]any) {
	c.endOpen()
	c.ev.Notice(code, message, extra)
}

// MCPFailed raises NoticeMCPFailed for server (once a server), which the
// CLI reports with status (and detail, when it says why).
func (c *Chat) MCPFailed(server, status, detail string) {
	if c.mcpFailed[server] {
		return
	}
	if c.mcpFailed == nil {
		c.mcpFailed = map[string]bool{}
	}
	c.mcpFailed[server] = true
	c.endOpen()
	c.ev.MCPFailedWhy(server, status, detail)
}

// Denied raises NoticePermissionDenied for the call with id of tool,
// refused under permission_mode mode: message says why and what to set.
func (c *Chat) Denied(id, tool, mode, message string) {
	c.endOpen()
	c.ev.Denied(chat.Denial{Tool: tool, ToolUseID: id}, message, map[string]any{"permission_mode": mode})
}

// Fail records the turn's failure (the first one) and emits its error.
func (c *Chat) Fail(code, message string) {
	c.endOpen()
	if c.out.Err == nil {
		c.out.Err = &chat.Error{Code: code, Message: message}
	}
	chat.ErrorEvent(c.emit, c.ev.NewID(), code, message)
}

// AddUsage adds a step's usage to the turn's.
func (c *Chat) AddUsage(u chat.Usage) {
	o := &c.out.Usage
	o.InputTokens += u.InputTokens
	o.OutputTokens += u.OutputTokens
	o.CacheReadTokens += u.CacheReadTokens
	o.CacheCreationTokens += u.CacheCreationTokens
	o.CostUSD += u.CostUSD
	o.Turns += u.Turns
}

// Result records the CLI's final result (subtype "success" or its kind of
// failure): the turn has an answer unless it failed, and the CLI's work is
// done.
func (c *Chat) Result(subtype string) {
	c.endOpen()
	c.out.GotResult = true
	c.out.Subtype = subtype
	if m := c.opts.Monitor; m != nil {
		if c.out.Err == nil {
			m.Answered()
		}
		m.Settled(true)
	}
}

// Stop stops the CLI at once (a failure that will not heal).
func (c *Chat) Stop() {
	if m := c.opts.Monitor; m != nil {
		m.Stop()
	}
}

// Close ends open messages and returns the outcome.
func (c *Chat) Close() *StreamOutcome {
	c.endOpen()
	c.out.Notices = c.ev.Notices()
	if c.out.Content == "" {
		c.out.Content = c.answer.String()
	}
	return &c.out
}
