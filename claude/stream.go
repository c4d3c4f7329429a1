package claude

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// This file handles the model's output: stream events as the model
// streams, the whole assistant messages the CLI prints per content block,
// and the tool results it prints as user messages.

// blockKey identifies a content block being streamed: subagent messages
// (parent_tool_use_id set) number their blocks independently.
type blockKey struct {
	parent string
	index  int64
}

// msgKey identifies a message seen through stream events: subagent
// messages are kept apart.
type msgKey struct {
	parent, id string
}

type block struct {
	seq    int
	id     string // event id
	typ    string // chat type: text, thinking, tool_call
	msgID  string // the model's message id
	main   bool   // the main agent's
	toolID string
	name   string
	input  []byte
	text   strings.Builder // a main-agent text block's text, until confirmed
}

func (p *Parser) streamEvent(line string) {
	r := gjson.GetMany(line, "event", "parent_tool_use_id")
	ev := r[0]
	if !ev.IsObject() {
		return
	}
	parent := r[1].Str
	e := gjson.GetMany(ev.Raw, "type", "index", "delta", "content_block", "message.id")
	switch e[0].Str {
	case "message_start":
		id := e[4].Str
		if parent == "" && p.out.Timings.FirstByte.IsZero() {
			p.out.Timings.FirstByte = time.Now()
		}
		if parent == "" {
			// A new message of the main agent: text of an earlier one
			// still unconfirmed was a stream cut short.
			p.discard("a new message started")
			p.countTurn(id)
			if p.out.GotResult {
				p.workAfter = true
			}
		}
		if id != "" {
			p.streamed[msgKey{strings.Clone(parent), strings.Clone(id)}] = true
		}
		if parent == "" {
			p.streamMsg = strings.Clone(id)
		}
	case "content_block_start":
		key := blockKey{parent, e[1].Int()}
		if old := p.blocks[key]; old != nil {
			p.endBlock(old)
			delete(p.blocks, key)
		}
		cb := gjson.GetMany(e[3].Raw, "type", "id", "name")
		b := &block{id: p.ev.NewID(), seq: p.ev.Seq(), main: parent == ""}
		if b.main {
			b.msgID = p.streamMsg
		}
		props := map[string]any{}
		switch cb[0].Str {
		case "text":
			b.typ = chat.TypeText
			if !b.main {
				b.typ = chat.TypeThinking // a subagent's text is not the answer
			}
		case "thinking", "redacted_thinking":
			b.typ = chat.TypeThinking
		case "tool_use", "server_tool_use", "mcp_tool_use":
			b.typ = chat.TypeToolCall
			b.toolID = agentcli.String(cb[1])
			b.name = agentcli.String(cb[2])
			props["name"] = b.name
			props["id"] = b.toolID
			p.addToolCall(b.toolID, b.name, b.main)
		default:
			return // images, citations, ...: nothing to show
		}
		if !b.main {
			parent = strings.Clone(parent)
			key.parent = parent
			props["parent_tool_use_id"] = parent
		}
		if len(props) == 0 {
			props = nil
		}
		p.blocks[key] = b
		if b.main && b.typ == chat.TypeText {
			p.pending = append(p.pending, b)
		}
		p.emit(chat.Event{Event: chat.Start, ID: b.id, Type: b.typ, Props: props})
	case "content_block_delta":
		b := p.blocks[blockKey{parent, e[1].Int()}]
		if b == nil {
			return
		}
		d := gjson.GetMany(e[2].Raw, "type", "text", "thinking", "partial_json")
		var t string
		switch d[0].Str {
		case "text_delta":
			t = agentcli.String(d[1])
			if b.main && b.typ == chat.TypeText {
				b.text.WriteString(t)
				if t != "" && p.out.Timings.FirstText.IsZero() {
					p.out.Timings.FirstText = time.Now()
				}
			}
		case "thinking_delta":
			t = agentcli.String(d[2])
		case "input_json_delta":
			t = agentcli.String(d[3])
			b.input = append(b.input, t...)
		default:
			return // signature_delta, citations_delta
		}
		if t != "" {
			p.emit(chat.Event{Event: chat.Delta, ID: b.id, Type: b.typ, Text: t})
		}
	case "content_block_stop":
		key := blockKey{parent, e[1].Int()}
		if b := p.blocks[key]; b != nil {
			p.endBlock(b)
			delete(p.blocks, key)
		}
	case "message_stop":
		// Blocks are closed by their own stop events; close stragglers.
		p.closeBlocks(func(k blockKey) bool { return k.parent == parent })
	}
}

// confirm adds the text streamed for the main agent's message msgID to the
// answer: the CLI printed the message, so its stream was not cut short.
func (p *Parser) confirm(msgID string) {
	kept := p.pending[:0]
	for _, b := range p.pending {
		if b.msgID != msgID {
			kept = append(kept, b)
			continue
		}
		if b.text.Len() > 0 {
			p.addAnswer(b.text.String())
		}
	}
	clear(p.pending[len(kept):])
	p.pending = kept
}

// discard takes back the main agent's text that streamed without the
// CLI confirming it: its stream was cut short (the CLI retries), so it is
// not part of the answer. Each such message is replaced by an empty one.
func (p *Parser) discard(why string) {
	if len(p.pending) == 0 {
		return
	}
	n := 0
	for _, b := range p.pending {
		if b.text.Len() == 0 {
			continue
		}
		n += b.text.Len()
		p.emit(chat.Event{Event: chat.Replace, ID: b.id, Type: chat.TypeText,
			Props: map[string]any{"discarded": true, "reason": NoticeStreamCut}})
	}
	clear(p.pending)
	p.pending = p.pending[:0]
	if n > 0 {
		p.out.Discarded += n
		p.ev.Notice(NoticeStreamCut, fmt.Sprintf("the model's answer stream was cut short (%s); the %d bytes of text it had shown were taken back", why, n),
			map[string]any{"bytes": n})
	}
}

// addAnswer appends a text block to the answer.
func (p *Parser) addAnswer(s string) {
	if p.answer.Len() > 0 {
		p.answer.WriteString("\n\n")
	}
	p.answer.WriteString(s)
}

// closeBlocks ends the open blocks that match, in the order they started.
func (p *Parser) closeBlocks(match func(blockKey) bool) {
	var open []blockKey
	for k := range p.blocks {
		if match(k) {
			open = append(open, k)
		}
	}
	slices.SortFunc(open, func(a, b blockKey) int { return p.blocks[a].seq - p.blocks[b].seq })
	for _, k := range open {
		p.endBlock(p.blocks[k])
		delete(p.blocks, k)
	}
}

func (p *Parser) endBlock(b *block) {
	if b.typ != chat.TypeToolCall {
		p.emit(chat.Event{Event: chat.End, ID: b.id, Type: b.typ})
		return
	}
	raw := toolInput(string(b.input))
	if i, ok := p.toolIdx[b.toolID]; ok {
		p.out.ToolCalls[i].Input = raw
	}
	p.emit(chat.Event{Event: chat.End, ID: b.id, Type: b.typ, Props: map[string]any{"input": raw}})
}

// toolInput is a tool call's input as JSON of its own: "{}" when it is
// missing or not valid JSON.
func toolInput(s string) chat.RawJSON {
	s = strings.TrimSpace(s)
	if s == "" || !gjson.Valid(s) {
		return chat.RawJSON("{}")
	}
	return chat.RawJSON(s)
}

// addToolCall records a tool call (a main-agent one runs until its
// result comes).
func (p *Parser) addToolCall(id, name string, main bool) {
	if id == "" {
		return
	}
	if main {
		p.running[id] = true
	}
	if i, ok := p.toolIdx[id]; ok {
		p.toolName[i] = name
		return
	}
	p.toolIdx[id] = len(p.out.ToolCalls)
	p.out.ToolCalls = append(p.out.ToolCalls, executor.ToolCall{ID: id, Name: name, Started: time.Now()})
	p.toolName = append(p.toolName, name)
}

func (p *Parser) countTurn(msgID string) {
	if msgID == "" || p.turns[msgID] {
		return
	}
	p.turns[strings.Clone(msgID)] = true
}

// assistant handles a whole assistant message. With partial messages on it
// repeats what the stream events already showed and confirms their text;
// a message that never streamed is emitted whole. An API error the CLI
// reports as an assistant message is kept for the turn's error, never
// shown as text.
func (p *Parser) assistant(line string) {
	r := gjson.GetMany(line, "parent_tool_use_id", "message.id", "message.content", "error", "is_api_error_message", "api_error_status", "message.model")
	parent := r[0].Str
	if r[4].Bool() || (r[3].String() != "" && r[6].Str == "<synthetic>") {
		p.apiError(int(r[5].Int()), r[3].String(), r[2])
		return
	}
	msgID := r[1].Str
	if parent == "" {
		p.countTurn(msgID)
		p.confirm(msgID)
	}
	if msgID != "" && p.streamed[msgKey{parent, msgID}] {
		return
	}
	var props map[string]any
	if parent != "" {
		parent = strings.Clone(parent)
		props = map[string]any{"parent_tool_use_id": parent}
	}
	r[2].ForEach(func(_, c gjson.Result) bool {
		f := gjson.GetMany(c.Raw, "type", "text", "thinking", "id", "name", "input")
		switch f[0].Str {
		case "text":
			t := agentcli.String(f[1])
			if t == "" {
				break
			}
			typ := chat.TypeText
			if parent != "" {
				typ = chat.TypeThinking
			} else {
				p.addAnswer(t)
			}
			chat.Whole(p.emit, p.ev.NewID(), typ, t, props)
		case "thinking":
			if t := agentcli.String(f[2]); t != "" {
				chat.Whole(p.emit, p.ev.NewID(), chat.TypeThinking, t, props)
			}
		case "tool_use", "server_tool_use", "mcp_tool_use":
			id, name := agentcli.String(f[3]), agentcli.String(f[4])
			p.addToolCall(id, name, parent == "")
			start := map[string]any{"name": name, "id": id}
			if parent != "" {
				start["parent_tool_use_id"] = parent
			}
			raw := toolInput(f[5].Raw)
			if i, ok := p.toolIdx[id]; ok {
				p.out.ToolCalls[i].Input = raw
			}
			eid := p.ev.NewID()
			p.emit(chat.Event{Event: chat.Start, ID: eid, Type: chat.TypeToolCall, Props: start})
			p.emit(chat.Event{Event: chat.End, ID: eid, Type: chat.TypeToolCall, Props: map[string]any{"input": raw}})
		}
		return true
	})
}

// apiError keeps a model API failure the CLI reported as a message (its
// text, "API Error: ...", is not an answer): the result that follows is
// the turn's error.
func (p *Parser) apiError(status int, kind string, content gjson.Result) {
	var msg strings.Builder
	content.ForEach(func(_, c gjson.Result) bool {
		if t := c.Get("text").String(); t != "" {
			if msg.Len() > 0 {
				msg.WriteString("\n")
			}
			msg.WriteString(t)
		}
		return true
	})
	if content.Type == gjson.String {
		msg.WriteString(content.Str)
	}
	if status != 0 {
		p.out.APIErrorStatus = status
	}
	p.apiErr = &apiError{status: status, kind: strings.Clone(kind), message: strings.Clone(msg.String())}
}

// user handles tool results (the CLI reports them as user messages).
func (p *Parser) user(line string) {
	if p.replayed(line) {
		return
	}
	r := gjson.GetMany(line, "parent_tool_use_id", "message.content")
	content := r[1]
	if !content.IsArray() {
		return
	}
	parent := strings.Clone(r[0].Str)
	content.ForEach(func(_, c gjson.Result) bool {
		f := gjson.GetMany(c.Raw, "type", "tool_use_id", "is_error", "content")
		if f[0].Str != "tool_result" {
			return true
		}
		// The values are read from c.Raw, whose offsets in the line start
		// at c.Index: resultText needs them to find what the line reader
		// cut.
		body := f[3]
		body.Index += c.Index
		p.toolResult(agentcli.String(f[1]), f[2].Bool(), body, parent)
		return true
	})
	if parent == "" {
		p.checkNearMaxTurns()
	}
}

// toolResult emits one tool result.
func (p *Parser) toolResult(id string, isErr bool, body gjson.Result, parent string) {
	res := p.resultText(body)
	idx, known := p.toolIdx[id]
	name := ""
	if known {
		name = p.toolName[idx]
	}
	r := chat.ToolResult{ToolCallID: id, Name: name, Content: res.Content, IsError: isErr, Parent: parent}
	if res.Truncated {
		r.Size = res.Size
	}
	if known {
		// Outcome keeps a summary; the event carried the content.
		p.out.ToolCalls[idx].Result = agentcli.KeptResult(res.Content)
		p.out.ToolCalls[idx].IsError = isErr
		p.out.ToolCalls[idx].Ended = time.Now()
	}
	if msg, ok := p.progress[id]; ok {
		p.endLoading(msg, nil)
		delete(p.progress, id)
	}
	delete(p.running, id)
	chat.WholeToolResult(p.emit, p.ev.NewID(), r)
	if parent == "" {
		p.ev.ToolResultContent(name, isErr, res.Content)
	}
}

// resultText flattens a tool_result's content (a string, or blocks of
// which text and images count) capped at MaxEventContent bytes, with the
// whole content's size.
func (p *Parser) resultText(body gjson.Result) agentcli.Text {
	max := p.opts.MaxEventContent
	if !body.IsArray() {
		return agentcli.CapText(body, p.line, max)
	}
	var sb strings.Builder
	size := 0
	add := func(s string, whole int) {
		if size > 0 {
			size++
			if sb.Len() <= max {
				sb.WriteByte('\n')
			}
		}
		size += whole
		if sb.Len() <= max {
			sb.WriteString(s[:min(len(s), max+1-sb.Len())])
		}
	}
	body.ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "text":
			txt := agentcli.CapText(b.Get("text"), p.line, max+1)
			add(txt.Content, txt.Size)
		case "image":
			add("[image]", len("[image]"))
		}
		return true
	})
	return agentcli.CapString(sb.String(), size, max)
}

// checkNearMaxTurns raises max_turns_near once when tool results keep the
// agent going with NearMaxTurns or fewer turns left.
func (p *Parser) checkNearMaxTurns() {
	if p.nearSent || p.opts.MaxTurns <= 0 {
		return
	}
	used := len(p.turns)
	if used < p.opts.MaxTurns-p.opts.NearMaxTurns || used < 1 {
		return
	}
	p.nearSent = true
	p.ev.Notice(NoticeMaxTurnsNear,
		fmt.Sprintf("the agent has used %d of its %d turns and is still calling tools", used, p.opts.MaxTurns),
		map[string]any{"turns": used, "max_turns": p.opts.MaxTurns,
			"suggested_action": "Wrap up: report what is done and what is left, or raise max_turns for tasks this long."})
}
