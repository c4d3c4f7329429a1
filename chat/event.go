package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Event phases.
const (
	Start = "start"
	Delta = "delta"
	End   = "end"
	Done  = "done"
	// Replace swaps a message's type, text and props for new ones (hooks'
	// ctx.Replace); deltas after it append to the new text.
	Replace = "replace"
	// Merge merges Value (an object) into the object at Path of a
	// message (hooks' ctx.Merge; Path "" is "props"), Set puts Value at
	// Path (ctx.Set), and Append adds Value to what is at Path, a string
	// or a list (ctx.Append of anything but the message's text, which is
	// a delta). Paths are Yao's: dotted, from the message
	// ("props.items"). Clients that read only text (the OpenAI APIs) let
	// them be.
	Merge  = "merge"
	Set    = "set"
	Append = "append"
	// BlockEnd ends a block of messages (hooks' ctx.EndBlock): ID is the
	// block's id, the one the messages' Block names; Type is "block".
	BlockEnd = "block_end"
)

// TypeBlock is the type of a block_end event.
const TypeBlock = "block"

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
	// TypeSkillProposed: the agent drafted a skill for its user, who
	// approves or rejects it (GET /api/skills/proposals/{id}); it is not
	// used until approved.
	TypeSkillProposed = "skill_proposed"
)

// Event is one item of the chat event stream (see the package doc). Every
// event but done has an ID and a Type (Check says so); a producer sets the
// type on deltas and ends too, so consumers need no memory of it.
//
// Props by type:
//   - tool_call: name, id, input (the tool's JSON input, on end); client:
//     true when the call is for the client to run (a direct assistant's
//     model calling the client's function: the turn ends with finish
//     reason tool_calls), absent for tools the agent runs itself
//   - tool_result: tool_call_id, name, content, is_error; truncated and
//     content_bytes when content is the first part of a longer result;
//     parent_tool_use_id for a subagent's call (see ToolResult)
//   - error: code (see the Err* codes), message
//   - notice: code, message
//   - session: session_id, model, tools, mcp_servers, skills, cwd
//   - loading: message
//   - skill_proposed: proposal_id, assistant_id, name, description, files
//     (the paths beside SKILL.md), status ("pending"), replaces (true when
//     approving it replaces the user's skill of that name), test (true
//     when a test turn runs after this turn)
type Event struct {
	Event string         `json:"event"`
	ID    string         `json:"id,omitempty"`
	Type  string         `json:"type,omitempty"`
	Text  string         `json:"text,omitempty"`
	Props map[string]any `json:"props,omitempty"`
	// Path is where a merge, set or append event changes its message;
	// Value is what it merges, sets or appends there.
	Path  string `json:"path,omitempty"`
	Value any    `json:"value,omitempty"`
	// Block is the block a start event's message belongs to (a hook's
	// ctx.Send with a block id): clients may group the messages of a
	// block until its block_end.
	Block string `json:"block,omitempty"`
	// Agent is set on the events of another assistant a hook called
	// (ctx.agent with stream: true), streamed inside this turn: whose they
	// are. Their ids are the call's, prefixed, so they never meet the
	// turn's own; they are not the turn's answer (Collector skips them).
	Agent *AgentRef `json:"agent,omitempty"`
	// Final is set on the done event only.
	Final *Final `json:"done,omitempty"`
	// Result is the typed report of a tool_result message, set on its
	// start event by its producer (WholeToolResult), for the layers that
	// read it back in the process (executor.Watch). Denial is set on the
	// start of a notice of a tool call the agent's CLI refused
	// (WholeDenial). Neither is encoded: on the wire the props carry
	// them, and an event decoded from there, or made by a hook, has
	// neither.
	Result *ToolResult `json:"-"`
	Denial *Denial     `json:"-"`
}

// ToolResult is what a tool_result message reports (its props:
// tool_call_id, name, content, is_error, truncated and content_bytes,
// parent_tool_use_id).
type ToolResult struct {
	// ToolCallID is the id of the call it answers.
	ToolCallID string
	// Name is the tool's ("" when its producer does not know it: no
	// name prop).
	Name    string
	Content string
	IsError bool
	// Size is the result's size in bytes when Content is only its
	// first part (truncated), else 0.
	Size int
	// Parent is the call of the subagent that made the call ("" for the
	// main agent's).
	Parent string
}

// Props are r's props on the wire.
func (r *ToolResult) Props() map[string]any {
	props := map[string]any{"tool_call_id": r.ToolCallID, "content": r.Content, "is_error": r.IsError}
	if r.Name != "" {
		props["name"] = r.Name
	}
	if r.Size > 0 {
		props["truncated"] = true
		props["content_bytes"] = r.Size
	}
	if r.Parent != "" {
		props["parent_tool_use_id"] = r.Parent
	}
	return props
}

// WholeToolResult emits a complete tool_result message reporting r; its
// start event carries r (Event.Result).
func WholeToolResult(emit EmitFunc, id string, r ToolResult) {
	emit(Event{Event: Start, ID: id, Type: TypeToolResult, Props: r.Props(), Result: &r})
	emit(Event{Event: End, ID: id, Type: TypeToolResult})
}

// Denial is a tool call the agent's CLI refused, reported in a notice
// (props tool and tool_use_id).
type Denial struct {
	Tool, ToolUseID string
}

// WholeDenial emits a complete notice with code, message and props (code
// and message added) reporting d (props tool and tool_use_id); its start
// event carries d (Event.Denial).
func WholeDenial(emit EmitFunc, id, code, message string, d Denial, props map[string]any) {
	p := map[string]any{"code": code, "message": message, "tool": d.Tool, "tool_use_id": d.ToolUseID}
	for k, v := range props {
		p[k] = v
	}
	emit(Event{Event: Start, ID: id, Type: TypeNotice, Text: message, Props: p, Denial: &d})
	emit(Event{Event: End, ID: id, Type: TypeNotice})
}

// AgentRef names the assistant call an event belongs to.
type AgentRef struct {
	// ID is the called assistant.
	ID string `json:"id"`
	// Call identifies the call within the turn ("agent-1", ...); the
	// event's id starts with it.
	Call string `json:"call"`
}

// Check reports what makes e break the event contract: an unknown phase, a
// message event without an id or a type, a done event without its final
// payload.
func (e Event) Check() error {
	switch e.Event {
	case Start, Delta, End, Replace, Merge, Set, Append, BlockEnd:
		switch {
		case e.ID == "":
			return fmt.Errorf("%s event has no id", e.Event)
		case e.Type == "":
			return fmt.Errorf("%s event of message %q has no type", e.Event, e.ID)
		case strings.ContainsAny(e.Type, "\r\n"):
			return fmt.Errorf("%s event of message %q has a type with a line break", e.Event, e.ID)
		case e.Event == Set && e.Path == "":
			return fmt.Errorf("set event of message %q has no path", e.ID)
		}
		return nil
	case Done:
		if e.Final == nil {
			return errors.New("done event has no final payload")
		}
		return nil
	case "":
		return errors.New("event has no phase")
	}
	return fmt.Errorf("unknown event phase %q", e.Event)
}

// Final is the payload of the done event.
type Final struct {
	Usage     Usage  `json:"usage"`
	SessionID string `json:"session_id,omitempty"`
	// Error is the error code of a failed turn ("" on success).
	Error string `json:"error,omitempty"`
	// Notices are the codes of the notices the turn raised, in order: what
	// the client should know of a turn that succeeded (background work
	// stopped at the timeout, a CLI that hung after its answer, ...).
	Notices []string `json:"notices,omitempty"`
	// Content is the answer text of the turn (after a Next hook replaced it,
	// its replacement).
	Content string `json:"content,omitempty"`
	// Data is what a Next hook returned as {data}, when it did.
	Data any `json:"data,omitempty"`
	// FinishReason says why the answer ended (one of the Finish* values);
	// "tool_calls" means the model waits for the client's tool results.
	FinishReason string `json:"finish_reason,omitempty"`
	// Timings say where the turn's time went (nil when not measured).
	Timings *Timings `json:"timings,omitempty"`
}

// EmitFunc receives events in order. Implementations must be safe to call
// from the goroutine that produces the events; they may block (back
// pressure from a slow client). An EmitFunc never retains Props maps after
// it returns unless it copies them. Serial makes one safe for concurrent
// producers.
type EmitFunc func(Event)

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

// TextSeparator is put between the texts of two separate text messages
// wherever a turn's answer is read as one text: the Collector, a direct
// connector's Response.Content, the OpenAI-compatible endpoints, streamed
// or not. It is a blank line, as the CLI executors join an agent's
// messages, so that an answer reads the same however it is received.
const TextSeparator = "\n\n"

// Collector accumulates an event stream into one text, as a non-streaming
// client sees the answer: the text of every message of its Type (text when
// empty), messages joined with TextSeparator. A replace event into the
// type counts when the message had no text of the type yet (a loading
// message that became the answer). The zero value collects text; it is
// not safe for concurrent use.
type Collector struct {
	// Type is the message type collected ("" means TypeText).
	Type string

	text strings.Builder
	last string // id of the message the text ends with
	has  map[string]bool
}

// Add records one event.
func (c *Collector) Add(e Event) { c.Append(e) }

// Append records one event and returns the text it adds to the answer,
// separator included ("" when it adds none): what a client that streams
// the answer as one text must send for e.
func (c *Collector) Append(e Event) string {
	typ := c.Type
	if typ == "" {
		typ = TypeText
	}
	if e.Type != typ || e.Text == "" || e.Agent != nil {
		return ""
	}
	switch e.Event {
	case Start, Delta:
	case Replace:
		if c.has[e.ID] {
			return "" // text already out cannot be taken back
		}
	default:
		return ""
	}
	if c.has == nil {
		c.has = map[string]bool{}
	}
	c.has[e.ID] = true
	piece := e.Text
	if c.text.Len() > 0 && c.last != e.ID {
		piece = TextSeparator + piece
	}
	c.last = e.ID
	c.text.WriteString(piece)
	return piece
}

// Text returns the answer text collected so far.
func (c *Collector) Text() string { return c.text.String() }

// RawJSON marks a value already encoded as JSON, so a tool input is passed
// through without being decoded and re-encoded.
type RawJSON = json.RawMessage
