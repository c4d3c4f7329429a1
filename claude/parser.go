package claude

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// Notice codes raised by the parser. They appear as the code prop of notice
// events and in executor.Result.Notices.
const (
	// NoticeMCPFailed: an MCP server did not connect (init reports a status
	// other than connected or pending).
	NoticeMCPFailed = agentcli.NoticeMCPFailed
	// NoticeSkillMissing: a skill the assistant defines is not among the
	// skills the CLI loaded.
	NoticeSkillMissing = "skill_missing"
	// NoticePermissionDenied: the CLI refused a tool call.
	NoticePermissionDenied = "permission_denied"
	// NoticeRepeatedToolFailure: the same tool failed several times in a
	// row (seed 004 "repeated-tool-error").
	NoticeRepeatedToolFailure = agentcli.NoticeRepeatedToolFailure
	// NoticeMaxTurnsNear: the agent keeps calling tools with only a few of
	// its max_turns left (seed 004 "max-steps-approaching").
	NoticeMaxTurnsNear = "max_turns_near"
	// NoticeAPIRetry: the CLI is retrying a failed model API call.
	NoticeAPIRetry = "api_retry"
)

// Defaults for ParserOptions.
const (
	DefaultFailureThreshold = agentcli.DefaultFailureThreshold
	DefaultNearMaxTurns     = 2
	// DefaultMaxEventContent caps a tool result's content in events; the
	// full size is reported in the content_bytes prop.
	DefaultMaxEventContent = agentcli.DefaultMaxEventContent
)

// ParserOptions configure a Parser. The zero value is usable.
type ParserOptions struct {
	// IDPrefix starts every event id ("cc" when empty): ids are
	// IDPrefix-1, IDPrefix-2, ... in the order messages start.
	IDPrefix string
	// MaxTurns is the run's --max-turns, for the max_turns_near notice
	// (0: no such notice).
	MaxTurns int
	// NearMaxTurns is how many turns before MaxTurns the notice is raised
	// (DefaultNearMaxTurns when 0).
	NearMaxTurns int
	// FailureThreshold is how many consecutive failures of one tool raise
	// repeated_tool_failure (DefaultFailureThreshold when 0).
	FailureThreshold int
	// Skills are the skill names the assistant defines; one missing from
	// the init message's skills raises skill_missing.
	Skills []string
	// MaxEventContent caps tool result content in events
	// (DefaultMaxEventContent when 0; the Outcome keeps the same cap).
	MaxEventContent int
	// OnResult, when set, is called as soon as the result line is parsed
	// (from the parsing goroutine), so a runner can start its grace timer.
	OnResult func()
}

// Outcome is what a parsed stream amounts to.
type Outcome struct {
	agentcli.Outcome
	// APIErrorStatus is the last HTTP status the CLI reported for a failed
	// model API call (api_retry or result), 0 if none.
	APIErrorStatus int `json:"api_error_status,omitempty"`
	agentcli.LineStats
}

// blockKey identifies a content block being streamed: subagent messages
// (parent_tool_use_id set) number their blocks independently.
type blockKey struct {
	parent string
	index  int64
}

type block struct {
	seq    int
	id     string
	typ    string // chat type: text, thinking, tool_call
	toolID string
	name   string
	input  []byte
}

// Parser turns Claude Code's stream-json output into chat events. Feed it
// lines with Line (or a whole stream with Parse) and call Close at the
// end. It is not safe for concurrent use; events are emitted from the
// calling goroutine, in order.
type Parser struct {
	emit chat.EmitFunc
	opts ParserOptions
	ev   agentcli.Events // event ids, notices

	blocks   map[blockKey]*block
	streamed map[msgKey]bool // messages seen through stream events
	turns    map[string]bool // main-agent message ids
	toolIdx  map[string]int  // tool id -> index in out.ToolCalls
	toolName []string        // by index: the name the tool id last had
	denied   map[string]bool

	nearSent bool

	text strings.Builder
	out  Outcome

	cuts cutIndex // strings the line reader shortened in the current line
}

// NewParser returns a parser that sends events to emit.
func NewParser(emit chat.EmitFunc, opts ParserOptions) *Parser {
	if opts.IDPrefix == "" {
		opts.IDPrefix = "cc"
	}
	if opts.NearMaxTurns <= 0 {
		opts.NearMaxTurns = DefaultNearMaxTurns
	}
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = DefaultFailureThreshold
	}
	if opts.MaxEventContent <= 0 {
		opts.MaxEventContent = DefaultMaxEventContent
	}
	return &Parser{
		emit:     emit,
		opts:     opts,
		ev:       agentcli.NewEvents(emit, opts.IDPrefix, opts.FailureThreshold),
		blocks:   map[blockKey]*block{},
		streamed: map[msgKey]bool{},
		turns:    map[string]bool{},
		toolIdx:  map[string]int{},
		denied:   map[string]bool{},
	}
}

// Parse reads r to its end, line by line, with no limit on line length.
// It returns nil at EOF and the read error otherwise. It does not call
// Close. Its memory does not grow with the stream: a huge tool result
// line is not held whole (only what survives MaxEventContent is).
func (p *Parser) Parse(r io.Reader) error {
	lr := newLineReader(r)
	// Strings of a huge user line (tool results) are kept up to a little
	// more than the content cap.
	lr.keep = p.opts.MaxEventContent + 16
	lr.elide = isUserLine
	return p.parse(lr)
}

func (p *Parser) parse(lr *lineReader) error {
	for {
		line, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read stream: %w", err)
		}
		if cuts := lr.cuts(); len(cuts) > 0 && len(line) > 0 {
			p.cuts = cutIndex{base: uintptrOf(line), cuts: cuts}
		}
		p.Line(line)
		p.cuts = cutIndex{}
	}
}

// isUserLine reports a line that starts as a user message, judging from
// its first member (the CLI prints type first). Only the tool results of
// user lines are read, capped, so only their strings may be shortened.
func isUserLine(start []byte) bool {
	it := newObjIter(unsafe.String(unsafe.SliceData(start), len(start)))
	k, v, ok := it.next()
	return ok && k == "type" && v == `"user"`
}

func uintptrOf(b []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// cutIndex finds the strings of a line that the line reader shortened.
type cutIndex struct {
	base uintptr // the line's first byte
	cuts []cut
}

// dropped returns how many decoded bytes were dropped from the end of a
// string value of the line (0 when it is whole).
func (c cutIndex) dropped(raw string) int {
	if len(c.cuts) == 0 || raw == "" {
		return 0
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(raw))) - c.base)
	for _, k := range c.cuts {
		if k.at == off {
			return k.dropped
		}
	}
	return 0
}

// Line handles one line of output (without its newline). Lines that are
// not JSON objects are counted and dropped (see agentcli.LineStats; a
// line without a string "type" is dropped too); unknown message types are
// ignored. The parser does not retain line.
func (p *Parser) Line(line []byte) {
	if s, ok := p.out.Object(line); ok {
		p.line(s)
	}
}

// lineFields are the top-level members the parser dispatches on, and the
// members of a stream event, as raw JSON ("" when absent).
type lineFields struct {
	typ, event, message, parent string
	// In event:
	evType, evIndex, evDelta, evBlock, evMessage string
}

// complete reports whether every member the line's type needs is found.
func (f *lineFields) complete() bool {
	switch f.typ {
	case "":
		return false
	case `"stream_event"`:
		return f.event != "" && f.parent != ""
	case `"assistant"`, `"user"`:
		return f.message != "" && f.parent != ""
	}
	return true
}

// line handles a JSON line. line aliases the reader's buffer: every string
// that outlives the call (emitted or stored) is copied.
//
// The top-level members are walked once, stopping as soon as the ones the
// line's type needs are found: the CLI prints type, event or message and
// parent_tool_use_id first, so the bulky tool_use_result that follows a
// tool result is never read. A stream event's members are read on the way.
func (p *Parser) line(line string) {
	var f lineFields
	it := newObjIter(line)
	for !f.complete() {
		k, ok := it.key()
		if !ok {
			break
		}
		if k == "event" && f.event == "" && it.peek() == '{' {
			ev := it.enter()
			for k, v, ok := ev.next(); ok; k, v, ok = ev.next() {
				switch k {
				case "type":
					f.evType = first(f.evType, v)
				case "index":
					f.evIndex = first(f.evIndex, v)
				case "delta":
					f.evDelta = first(f.evDelta, v)
				case "content_block":
					f.evBlock = first(f.evBlock, v)
				case "message":
					f.evMessage = first(f.evMessage, v)
				}
			}
			if f.event, ok = it.leave(&ev); !ok {
				break
			}
			continue
		}
		v, ok := it.value()
		if !ok {
			break
		}
		switch k {
		case "type":
			f.typ = first(f.typ, v)
		case "event":
			f.event = first(f.event, v)
		case "message":
			f.message = first(f.message, v)
		case "parent_tool_use_id":
			f.parent = first(f.parent, v)
		}
	}
	if len(f.typ) == 0 || f.typ[0] != '"' {
		p.out.Skipped++
		return
	}
	switch text(f.typ) {
	case "stream_event":
		p.streamEvent(f)
	case "assistant":
		p.assistant(f)
	case "user":
		p.user(f)
	case "system":
		p.system(line)
	case "result":
		p.result(line)
	}
}

// Close ends every message still open (output cut short) and returns the
// outcome. Further lines are not expected after Close.
func (p *Parser) Close() *Outcome {
	p.closeBlocks(func(blockKey) bool { return true })
	p.out.Notices = p.ev.Notices()
	if p.out.Content == "" {
		p.out.Content = p.text.String()
	}
	return &p.out
}

// startText separates the answer's text messages in Outcome.Content.
func (p *Parser) startText() {
	if p.text.Len() > 0 {
		p.addText("\n\n")
	}
}

// addText appends to the answer text, doubling its buffer when full
// (strings.Builder grows a big buffer by a quarter at a time, which costs
// a long answer several times its size in copies).
func (p *Parser) addText(s string) {
	if p.text.Cap()-p.text.Len() < len(s) {
		p.text.Grow(max(p.text.Cap(), len(s)))
	}
	p.text.WriteString(s)
}

// msgKey identifies a message seen through stream events: subagent
// messages (parent_tool_use_id set) are kept apart.
type msgKey struct {
	parent, id string
}

func (p *Parser) streamEvent(f lineFields) {
	if len(f.event) == 0 || f.event[0] != '{' {
		return
	}
	typ, index, delta, cb, message := f.evType, f.evIndex, f.evDelta, f.evBlock, f.evMessage
	parent := text(f.parent) // aliases the line: cloned where kept
	switch text(typ) {
	case "message_start":
		id := text(member(message, "id"))
		if id != "" {
			p.streamed[msgKey{strings.Clone(parent), strings.Clone(id)}] = true
		}
		if parent == "" {
			p.countTurn(id)
		}
	case "content_block_start":
		key := blockKey{parent, intVal(index)}
		if old := p.blocks[key]; old != nil {
			p.endBlock(old)
			delete(p.blocks, key)
		}
		var cbType, cbID, cbName string
		it := newObjIter(cb)
		for k, v, ok := it.next(); ok; k, v, ok = it.next() {
			switch k {
			case "type":
				cbType = first(cbType, v)
			case "id":
				cbID = first(cbID, v)
			case "name":
				cbName = first(cbName, v)
			}
		}
		b := &block{id: p.ev.NewID(), seq: p.ev.Seq()}
		props := map[string]any{}
		switch text(cbType) {
		case "text":
			b.typ = chat.TypeText
			if parent != "" {
				b.typ = chat.TypeThinking // a subagent's text is not the answer
			} else {
				p.startText()
			}
		case "thinking", "redacted_thinking":
			b.typ = chat.TypeThinking
		case "tool_use", "server_tool_use", "mcp_tool_use":
			b.typ = chat.TypeToolCall
			b.toolID = owned(cbID)
			b.name = owned(cbName)
			props["name"] = b.name
			props["id"] = b.toolID
			p.addToolCall(b.toolID, b.name)
		default:
			return // images, citations, ...: nothing to show
		}
		if parent != "" {
			parent = strings.Clone(parent)
			key.parent = parent
			props["parent_tool_use_id"] = parent
		}
		if len(props) == 0 {
			props = nil
		}
		p.blocks[key] = b
		p.emit(chat.Event{Event: chat.Start, ID: b.id, Type: b.typ, Props: props})
	case "content_block_delta":
		b := p.blocks[blockKey{parent, intVal(index)}]
		if b == nil {
			return
		}
		var dType, dText, dThinking, dJSON string
		it := newObjIter(delta)
		for k, v, ok := it.next(); ok; k, v, ok = it.next() {
			switch k {
			case "type":
				dType = first(dType, v)
			case "text":
				dText = first(dText, v)
			case "thinking":
				dThinking = first(dThinking, v)
			case "partial_json":
				dJSON = first(dJSON, v)
			}
		}
		var t string
		switch text(dType) {
		case "text_delta":
			t = owned(dText)
			if b.typ == chat.TypeText && parent == "" {
				p.addText(t)
			}
		case "thinking_delta":
			t = owned(dThinking)
		case "input_json_delta":
			t = owned(dJSON)
			b.input = append(b.input, t...)
		default:
			return // signature_delta, citations_delta
		}
		if t != "" {
			p.emit(chat.Event{Event: chat.Delta, ID: b.id, Type: b.typ, Text: t})
		}
	case "content_block_stop":
		key := blockKey{parent, intVal(index)}
		if b := p.blocks[key]; b != nil {
			p.endBlock(b)
			delete(p.blocks, key)
		}
	case "message_stop":
		// Blocks are closed by their own stop events; close stragglers.
		p.closeBlocks(func(k blockKey) bool { return k.parent == parent })
	}
}

// first keeps the first occurrence of a member (gjson's Get semantics).
func first(have, v string) string {
	if have != "" {
		return have
	}
	return v
}

// member returns the raw value of an object's member ("" when absent or
// when raw is not an object).
func member(raw, key string) string {
	it := newObjIter(raw)
	for k, v, ok := it.next(); ok; k, v, ok = it.next() {
		if k == key {
			return v
		}
	}
	return ""
}

// closeBlocks ends the open blocks that match, in the order they started.
func (p *Parser) closeBlocks(match func(blockKey) bool) {
	var open []blockKey
	for k := range p.blocks {
		if match(k) {
			open = append(open, k)
		}
	}
	sort.Slice(open, func(i, j int) bool { return p.blocks[open[i]].seq < p.blocks[open[j]].seq })
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
	input := bytes.TrimSpace(b.input)
	if len(input) == 0 || !gjson.ValidBytes(input) {
		input = []byte("{}")
	}
	raw := chat.RawJSON(append([]byte(nil), input...))
	if i, ok := p.toolIdx[b.toolID]; ok {
		p.out.ToolCalls[i].Input = raw
	}
	p.emit(chat.Event{Event: chat.End, ID: b.id, Type: b.typ, Props: map[string]any{"input": raw}})
}

func (p *Parser) addToolCall(id, name string) {
	if id == "" {
		return
	}
	if i, ok := p.toolIdx[id]; ok {
		p.toolName[i] = name
		return
	}
	p.toolIdx[id] = len(p.out.ToolCalls)
	p.out.ToolCalls = append(p.out.ToolCalls, executor.ToolCall{ID: id, Name: name})
	p.toolName = append(p.toolName, name)
}

func (p *Parser) countTurn(msgID string) {
	if msgID == "" || p.turns[msgID] {
		return
	}
	p.turns[strings.Clone(msgID)] = true
}

// assistant handles a whole assistant message. With partial messages on it
// repeats what the stream events already showed, so it only fills gaps: a
// message that never streamed is emitted whole.
func (p *Parser) assistant(f lineFields) {
	parent := text(f.parent)
	var msgIDRaw, content string
	it := newObjIter(f.message)
	for k, v, ok := it.next(); ok; k, v, ok = it.next() {
		switch k {
		case "id":
			msgIDRaw = first(msgIDRaw, v)
		case "content":
			content = first(content, v)
		}
	}
	msgID := text(msgIDRaw)
	if parent == "" {
		p.countTurn(msgID)
	}
	if msgID != "" && p.streamed[msgKey{parent, msgID}] {
		return
	}
	var props map[string]any
	if parent != "" {
		parent = strings.Clone(parent)
		props = map[string]any{"parent_tool_use_id": parent}
	}
	items := newArrIter(content)
	for c, ok := items.next(); ok; c, ok = items.next() {
		var typ, txt, thinking, id, name, input string
		it := newObjIter(c)
		for k, v, ok := it.next(); ok; k, v, ok = it.next() {
			switch k {
			case "type":
				typ = first(typ, v)
			case "text":
				txt = first(txt, v)
			case "thinking":
				thinking = first(thinking, v)
			case "id":
				id = first(id, v)
			case "name":
				name = first(name, v)
			case "input":
				input = first(input, v)
			}
		}
		switch text(typ) {
		case "text":
			t := owned(txt)
			typ := chat.TypeText
			if parent != "" {
				typ = chat.TypeThinking
			} else if t != "" {
				p.startText()
				p.addText(t)
			}
			if t != "" {
				chat.Whole(p.emit, p.ev.NewID(), typ, t, props)
			}
		case "thinking":
			if t := owned(thinking); t != "" {
				chat.Whole(p.emit, p.ev.NewID(), chat.TypeThinking, t, props)
			}
		case "tool_use", "server_tool_use", "mcp_tool_use":
			id := owned(id)
			name := owned(name)
			p.addToolCall(id, name)
			start := map[string]any{"name": name, "id": id}
			if parent != "" {
				start["parent_tool_use_id"] = parent
			}
			if input == "" {
				input = "{}"
			}
			raw := chat.RawJSON(input) // a copy
			if i, ok := p.toolIdx[id]; ok {
				p.out.ToolCalls[i].Input = raw
			}
			eid := p.ev.NewID()
			p.emit(chat.Event{Event: chat.Start, ID: eid, Type: chat.TypeToolCall, Props: start})
			p.emit(chat.Event{Event: chat.End, ID: eid, Type: chat.TypeToolCall, Props: map[string]any{"input": raw}})
		}
	}
}

// user handles tool results (the CLI reports them as user messages).
func (p *Parser) user(f lineFields) {
	parent := text(f.parent)
	content := member(f.message, "content")
	if len(content) == 0 || content[0] != '[' {
		return
	}
	if parent != "" {
		parent = strings.Clone(parent)
	}
	items := newArrIter(content)
	for c, ok := items.next(); ok; c, ok = items.next() {
		var typ, idRaw, isErrRaw, body string
		it := newObjIter(c)
		for k, v, ok := it.next(); ok; k, v, ok = it.next() {
			switch k {
			case "type":
				typ = first(typ, v)
			case "tool_use_id":
				idRaw = first(idRaw, v)
			case "is_error":
				isErrRaw = first(isErrRaw, v)
			case "content":
				body = first(body, v)
			}
		}
		if text(typ) != "tool_result" {
			continue
		}
		id := owned(idRaw)
		isErr := boolVal(isErrRaw)
		res, size, truncated := resultText(body, p.opts.MaxEventContent, p.cuts)
		idx, known := p.toolIdx[id]
		name := ""
		if known {
			name = p.toolName[idx]
		}
		props := map[string]any{"tool_call_id": id, "content": res, "is_error": isErr}
		if name != "" {
			props["name"] = name
		}
		if truncated {
			props["truncated"] = true
			props["content_bytes"] = size
		}
		if parent != "" {
			props["parent_tool_use_id"] = parent
		}
		if known {
			// Outcome keeps a summary; the event carried the content.
			p.out.ToolCalls[idx].Result = agentcli.KeptResult(res)
			p.out.ToolCalls[idx].IsError = isErr
		}
		chat.Whole(p.emit, p.ev.NewID(), chat.TypeToolResult, "", props)
		if parent == "" {
			p.ev.ToolResult(name, isErr)
		}
	}
	if parent == "" {
		p.checkNearMaxTurns()
	}
}

// resultText flattens a tool_result content (a string, or blocks of which
// the text ones count) and caps it at max bytes on a UTF-8 boundary. size
// is the length of the whole flattened content; only the part that
// survives the cap is decoded into memory.
func resultText(raw string, max int, cuts cutIndex) (content string, size int, truncated bool) {
	// One byte more than the cap shows whether the cut splits a rune.
	limit := max + 1
	var buf []byte
	switch {
	case isString(raw):
		buf, size = appendText(nil, raw, limit, cuts)
	case len(raw) > 0 && raw[0] == '[':
		items := newArrIter(raw)
		for b, ok := items.next(); ok; b, ok = items.next() {
			var typ, txt string
			it := newObjIter(b)
			for k, v, ok := it.next(); ok; k, v, ok = it.next() {
				switch k {
				case "type":
					typ = first(typ, v)
				case "text":
					txt = first(txt, v)
				}
			}
			var n int
			switch text(typ) {
			case "text":
				if size > 0 {
					buf, n = appendCapped(buf, "\n", limit-size)
					size += n
				}
				buf, n = appendText(buf, txt, limit-size, cuts)
			case "image":
				if size > 0 {
					buf, n = appendCapped(buf, "\n", limit-size)
					size += n
				}
				buf, n = appendCapped(buf, "[image]", limit-size)
			default:
				continue
			}
			size += n
		}
	}
	content = unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is ours
	if size > max {
		return agentcli.CapUTF8(content, max), size, true
	}
	return content, size, false
}

// appendText appends up to limit bytes of the text of the raw JSON value
// (see text) to dst and returns the whole text's length, counting what
// the line reader dropped from it.
func appendText(dst []byte, raw string, limit int, cuts cutIndex) ([]byte, int) {
	if !isString(raw) {
		return appendCapped(dst, text(raw), limit)
	}
	dropped := cuts.dropped(raw)
	inner := raw[1 : len(raw)-1]
	var n int
	if strings.IndexByte(inner, '\\') < 0 {
		dst, n = appendCapped(dst, inner, limit)
	} else {
		if dst == nil {
			dst = make([]byte, 0, min(len(inner), max(limit, 0)))
		}
		dst, n = appendUnescaped(dst, inner, limit)
	}
	return dst, n + dropped
}

// appendCapped appends up to limit bytes of s to dst and returns len(s).
func appendCapped(dst []byte, s string, limit int) ([]byte, int) {
	if limit > 0 {
		if dst == nil {
			// The first and usually only part: allocate it exactly.
			dst = make([]byte, 0, min(len(s), limit))
		}
		dst = append(dst, s[:min(len(s), limit)]...)
	}
	return dst, len(s)
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
		map[string]any{"turns": used, "max_turns": p.opts.MaxTurns})
}

func (p *Parser) system(line string) {
	switch gjson.Get(line, "subtype").String() {
	case "init":
		p.init(line)
	case "permission_denied":
		r := gjson.GetMany(line, "tool_name", "tool_use_id", "message", "decision_reason")
		p.denial(agentcli.String(r[0]), agentcli.String(r[1]), cmp.Or(agentcli.String(r[2]), agentcli.String(r[3])))
	case "api_retry":
		r := gjson.GetMany(line, "attempt", "max_retries", "error_status", "error")
		status := int(r[2].Int())
		if status != 0 {
			p.out.APIErrorStatus = status
		}
		msg := fmt.Sprintf("model API call failed (%s), retrying (attempt %d of %d)",
			describeAPIError(status, r[3].String()), r[0].Int(), r[1].Int())
		// A loading message: the retry is progress information, not a
		// finding about the run.
		chat.Whole(p.emit, p.ev.NewID(), chat.TypeLoading, msg, map[string]any{
			"message": msg, "code": NoticeAPIRetry, "attempt": r[0].Int(), "status": status})
	}
}

func describeAPIError(status int, kind string) string {
	switch {
	case status != 0 && kind != "":
		return strconv.Itoa(status) + " " + kind
	case status != 0:
		return "HTTP " + strconv.Itoa(status)
	case kind != "":
		return kind
	}
	return "unknown error"
}

func (p *Parser) init(line string) {
	r := gjson.GetMany(line, "session_id", "model", "tools", "mcp_servers", "skills", "cwd", "permissionMode", "claude_code_version")
	p.out.SessionID = agentcli.String(r[0])
	p.out.Model = agentcli.String(r[1])
	servers := agentcli.ServerStatuses(r[3])
	skillNames := agentcli.Strings(r[4])
	p.ev.Session(agentcli.Session{
		ID: p.out.SessionID, Model: p.out.Model, Cwd: agentcli.String(r[5]),
		Tools: agentcli.Strings(r[2]), Skills: skillNames, MCPServers: servers,
		PermissionMode: agentcli.String(r[6]), Version: agentcli.String(r[7]),
	})
	for _, s := range servers {
		switch s.Status {
		case "connected", "pending":
			continue
		}
		p.ev.MCPFailed(s.Name, s.Status)
	}
	have := make(map[string]bool, len(skillNames))
	for _, s := range skillNames {
		have[s] = true
	}
	for _, s := range p.opts.Skills {
		if !have[s] {
			p.ev.Notice(NoticeSkillMissing,
				fmt.Sprintf("skill %q was not loaded by the CLI", s),
				map[string]any{"skill": s})
		}
	}
}

func (p *Parser) denial(tool, id, reason string) {
	if id != "" {
		if p.denied[id] {
			return
		}
		p.denied[id] = true
	}
	msg := fmt.Sprintf("permission denied for tool %s", tool)
	if reason != "" {
		msg += ": " + reason
	}
	p.ev.Notice(NoticePermissionDenied, msg, map[string]any{"tool": tool, "tool_use_id": id})
}

func (p *Parser) result(line string) {
	p.out.GotResult = true
	r := gjson.GetMany(line, "subtype", "is_error", "session_id", "usage", "total_cost_usd",
		"num_turns", "duration_ms", "result", "errors", "permission_denials", "api_error_status")
	p.out.Subtype = agentcli.String(r[0])
	if s := agentcli.String(r[2]); s != "" {
		p.out.SessionID = s
	}
	u := r[3]
	p.out.Usage = chat.Usage{
		InputTokens:         u.Get("input_tokens").Int(),
		OutputTokens:        u.Get("output_tokens").Int(),
		CacheReadTokens:     u.Get("cache_read_input_tokens").Int(),
		CacheCreationTokens: u.Get("cache_creation_input_tokens").Int(),
		CostUSD:             r[4].Float(),
		Turns:               int(r[5].Int()),
		DurationMS:          r[6].Int(),
	}
	if st := int(r[10].Int()); st != 0 {
		p.out.APIErrorStatus = st
	}
	r[9].ForEach(func(_, d gjson.Result) bool {
		p.denial(agentcli.String(d.Get("tool_name")), agentcli.String(d.Get("tool_use_id")), "")
		return true
	})
	text := agentcli.String(r[7])
	if p.text.Len() == 0 && !r[1].Bool() && text != "" {
		// Nothing streamed (an old CLI, partial messages off): the result
		// text is the answer.
		chat.Whole(p.emit, p.ev.NewID(), chat.TypeText, text, nil)
		p.addText(text)
	}
	if r[1].Bool() || strings.HasPrefix(p.out.Subtype, "error") {
		var msgs []string
		r[8].ForEach(func(_, v gjson.Result) bool { msgs = append(msgs, v.String()); return true })
		msg := strings.Clone(strings.Join(msgs, "; "))
		if msg == "" {
			msg = text
		}
		if msg == "" {
			msg = "the CLI reported " + p.out.Subtype
		}
		code := errorCode(p.out.Subtype, p.out.APIErrorStatus)
		p.out.Err = &chat.Error{Code: code, Message: msg}
		chat.ErrorEvent(p.emit, p.ev.NewID(), code, msg)
	}
	if p.opts.OnResult != nil {
		p.opts.OnResult()
	}
}

// errorCode maps a failed result to a chat error code.
func errorCode(subtype string, status int) string {
	switch subtype {
	case "error_max_turns":
		return chat.ErrMaxTurns
	}
	switch {
	case status == 401 || status == 403:
		return chat.ErrAuth
	case status == 429:
		return chat.ErrRateLimit
	case status == 400 || status == 404 || status == 413 || status == 422:
		return chat.ErrInvalidRequest
	case status >= 500:
		return chat.ErrUpstream
	}
	return chat.ErrExecutor
}
