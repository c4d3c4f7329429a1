package cursor

import (
	"bytes"
	"cmp"
	"io"
	"log/slog"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// Notice codes raised by the parser. They appear as the code prop of notice
// events and in executor.Result.Notices. The codes are the same as the
// claude executor's, so clients handle both CLIs alike.
const (
	// NoticeMCPFailed: an MCP server did not connect (only when the CLI
	// reports servers in its init event, which the documentation announces
	// as a future field).
	NoticeMCPFailed = agentcli.NoticeMCPFailed
	// NoticeRepeatedToolFailure: the same tool failed several times in a
	// row (seed 004 "repeated-tool-error").
	NoticeRepeatedToolFailure = agentcli.NoticeRepeatedToolFailure
)

// Defaults for ParserOptions.
const (
	DefaultFailureThreshold = agentcli.DefaultFailureThreshold
	// DefaultMaxEventContent caps a tool result's content in events; the
	// full size is reported in the content_bytes prop.
	DefaultMaxEventContent = agentcli.DefaultMaxEventContent
)

// cumulativeMin is the shortest streamed text for which a delta that
// starts with everything streamed so far is taken as a cumulative repeat
// (and only its new suffix shown). Below it, a delta that merely happens
// to begin like the text before it ("I" then "I think") is ordinary text.
const cumulativeMin = 16

// ParserOptions configure a Parser. The zero value is usable.
type ParserOptions struct {
	// IDPrefix starts every event id ("cu" when empty): ids are
	// IDPrefix-1, IDPrefix-2, ... in the order messages start.
	IDPrefix string
	// FailureThreshold is how many consecutive failures of one tool raise
	// repeated_tool_failure (DefaultFailureThreshold when 0).
	FailureThreshold int
	// Skills are the skill names delivered to the workspace; the CLI does
	// not list what it loaded, so the session event reports these.
	Skills []string
	// MCPServers are the configured MCP server names, reported in the
	// session event when the CLI does not list servers itself.
	MCPServers []string
	// MaxEventContent caps tool result content in events
	// (DefaultMaxEventContent when 0).
	MaxEventContent int
	// Monitor, when set, is told when the result line is parsed (from the
	// parsing goroutine): the CLI's work is done (an agentcli.Run).
	Monitor agentcli.Monitor
}

// Outcome is what a parsed stream amounts to. Its SessionID is the chat
// id --resume takes.
type Outcome struct {
	agentcli.Outcome
	// RepeatedBytes counts assistant text dropped as a repeat of text
	// already shown (partial-output flushes, cumulative deltas).
	RepeatedBytes int `json:"repeated_bytes"`
	agentcli.LineStats
}

// NoResult gives a run that ended without a result its error code
// (agentcli.Finished): the documented failure shape is a non-zero exit,
// the stream cut short, the reason on stderr, in words (classify).
func (o *Outcome) NoResult(tail string) (code, note string) {
	if tail == "" {
		return chat.ErrExecutor, ""
	}
	return classify(tail), ""
}

// LogValue is what the driver logs of the outcome.
func (o *Outcome) LogValue() slog.Value {
	return o.LogGroup(append(o.LineStats.LogAttrs(), slog.Int("repeated_bytes", o.RepeatedBytes))...)
}

// tool is one tool call seen in the stream.
type tool struct {
	name string
	idx  int // index in out.ToolCalls
	done bool
}

// Parser turns cursor-agent's stream-json output into chat events. Feed it
// lines with Line (or a whole stream with Parse) and call Close at the
// end. It is not safe for concurrent use; events are emitted from the
// calling goroutine, in order.
type Parser struct {
	emit chat.EmitFunc
	opts ParserOptions
	ev   agentcli.Events // event ids, notices

	textID  string          // open text message ("" when none)
	seg     strings.Builder // text shown in the open segment
	turn    strings.Builder // text shown since the user message
	thinkID string          // open thinking message

	tools map[string]*tool

	answer strings.Builder
	out    Outcome
	cur    agentcli.Line // the line being handled (for its cuts)
}

// isToolCallLine reports a line that starts as a tool_call event (the CLI
// prints type first).
func isToolCallLine(start []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(start, "{ \t"), []byte(`"type":"tool_call"`))
}

// NewParser returns a parser that sends events to emit.
func NewParser(emit chat.EmitFunc, opts ParserOptions) *Parser {
	if opts.IDPrefix == "" {
		opts.IDPrefix = "cu"
	}
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = DefaultFailureThreshold
	}
	if opts.MaxEventContent <= 0 {
		opts.MaxEventContent = DefaultMaxEventContent
	}
	return &Parser{emit: emit, opts: opts, tools: map[string]*tool{},
		ev: agentcli.NewEvents(emit, opts.IDPrefix, opts.FailureThreshold)}
}

// Parse reads r to its end, line by line (lines up to
// agentcli.DefaultMaxLine; a longer one is dropped with a notice, so
// memory stays flat whatever is written). It returns nil at EOF and the
// read error otherwise. It does not call Close.
func (p *Parser) Parse(r io.Reader) error {
	// Only a tool result's first MaxEventContent bytes are shown: the
	// strings of a long tool_call line are kept to a little more.
	return agentcli.ReadLines(r, lineOptions(p.opts.MaxEventContent), p.Line)
}

// lineOptions are how the CLI's output is read for a parser that shows
// maxContent bytes of a tool result: the strings of a long tool_call
// line are kept to a little more.
func lineOptions(maxContent int) agentcli.LineOptions {
	return agentcli.LineOptions{KeepString: maxContent + 16, Elide: isToolCallLine}
}

// Finish is Close (agentcli.Parser).
func (p *Parser) Finish() agentcli.Finished { return p.Close() }

// Line handles one line of output. Lines that are not JSON objects are
// counted and dropped (see agentcli.LineStats; a line without a string
// "type" is dropped too), a line the reader dropped for its length with a
// notice; unknown event types are ignored (the documentation allows new
// fields and events). The parser does not retain line.
func (p *Parser) Line(line agentcli.Line) {
	if s, ok := p.out.Object(line); ok {
		p.cur = line
		p.line(s)
		p.cur = agentcli.Line{}
	} else if line.Dropped {
		p.ev.LineDropped(line.Size)
	}
}

// line handles a JSON line. line aliases the reader's buffer: every string
// that outlives the call is copied with str.
func (p *Parser) line(line string) {
	typ := gjson.Get(line, "type")
	if typ.Type != gjson.String {
		p.out.Skipped++
		return
	}
	switch typ.Str {
	case "system":
		if gjson.Get(line, "subtype").String() == "init" {
			p.init(line)
		}
	case "user":
		// The CLI echoes the prompt: a new turn starts; nothing to show.
		p.endText()
		p.endThinking()
		p.turn.Reset()
	case "assistant":
		p.assistant(line)
	case "thinking":
		p.thinking(line)
	case "tool_call":
		p.toolCall(line)
	case "result":
		p.result(line)
	}
}

// Close ends every message still open (output cut short) and returns the
// outcome. Further lines are not expected after Close.
func (p *Parser) Close() *Outcome {
	p.endText()
	p.endThinking()
	p.out.Notices = p.ev.Notices()
	if p.out.Content == "" {
		p.out.Content = p.answer.String()
	}
	return &p.out
}

func (p *Parser) init(line string) {
	r := gjson.GetMany(line, "session_id", "model", "cwd", "apiKeySource", "permissionMode", "tools", "mcp_servers")
	if s := agentcli.String(r[0]); s != "" {
		p.out.SessionID = s
	}
	p.out.Model = agentcli.String(r[1])
	var servers []agentcli.ServerStatus
	if r[6].IsArray() {
		servers = agentcli.ServerStatuses(r[6])
	} else {
		for _, n := range p.opts.MCPServers {
			servers = append(servers, agentcli.ServerStatus{Name: n, Status: "configured"})
		}
	}
	p.ev.Session(agentcli.Session{
		ID: p.out.SessionID, Model: p.out.Model, Cwd: agentcli.String(r[2]),
		Tools: agentcli.Strings(r[5]), Skills: append([]string{}, p.opts.Skills...), MCPServers: servers,
		APIKeySource: agentcli.String(r[3]), PermissionMode: agentcli.String(r[4]),
	})
	for _, s := range servers {
		st := strings.ToLower(s.Status)
		if strings.Contains(st, "fail") || strings.Contains(st, "error") || st == "disconnected" {
			p.ev.MCPFailed(s.Name, s.Status)
		}
	}
}

// messageText flattens an assistant or user message's content: a string,
// or the text of its text blocks.
func messageText(c gjson.Result) string {
	if c.Type == gjson.String {
		return agentcli.String(c)
	}
	var sb strings.Builder
	c.ForEach(func(_, b gjson.Result) bool {
		if t := b.Get("type").String(); t == "text" || t == "" {
			if v := b.Get("text"); v.Type == gjson.String {
				sb.WriteString(v.String())
			}
		}
		return true
	})
	return sb.String()
}

// assistant handles an assistant event. With --stream-partial-output the
// CLI prints three kinds (output-format documentation): deltas with new
// text (timestamp_ms, no model_call_id), a flush of the segment before a
// tool call (timestamp_ms and model_call_id) and a final flush at the end
// of the turn (neither). Without partial output every event is a whole
// segment. Flushes only add what was not streamed; a message that does
// not extend what was shown starts a new text message.
func (p *Parser) assistant(line string) {
	r := gjson.GetMany(line, "message.content", "timestamp_ms", "model_call_id")
	text := messageText(r[0])
	isDelta := r[1].Exists() && r[1].Type != gjson.Null && (!r[2].Exists() || r[2].Type == gjson.Null || r[2].String() == "")
	if isDelta {
		p.delta(text)
		return
	}
	p.flush(text)
	p.endText()
}

// delta appends streamed text, dropping a repeat of the open segment when
// the CLI re-sends it cumulatively.
func (p *Parser) delta(text string) {
	if text == "" {
		return
	}
	if seg := p.seg.Len(); seg >= cumulativeMin && len(text) > seg && text[:seg] == p.seg.String() {
		p.out.RepeatedBytes += seg
		text = text[seg:]
	} else if seg >= cumulativeMin && text == p.seg.String() {
		p.out.RepeatedBytes += seg
		return
	}
	p.appendText(text)
}

// flush handles a whole segment's text.
func (p *Parser) flush(text string) {
	if text == "" {
		return
	}
	seg, turn := p.seg.String(), p.turn.String()
	switch {
	case seg != "" && strings.HasPrefix(text, seg):
		p.out.RepeatedBytes += len(seg)
		p.appendText(text[len(seg):])
	case seg != "" && strings.HasPrefix(seg, text):
		p.out.RepeatedBytes += len(text)
	case turn != "" && (strings.HasSuffix(turn, text) || strings.HasPrefix(turn, text)):
		// A repeat of the last segment(s) or of the turn so far. Both
		// checks cost the length of text, not of the turn.
		p.out.RepeatedBytes += len(text)
	case turn != "" && strings.HasPrefix(text, turn):
		p.out.RepeatedBytes += len(turn)
		p.appendText(text[len(turn):])
	default:
		// New text, or text that does not extend what was shown: it cannot
		// be taken back, so it becomes a message of its own.
		p.endText()
		p.appendText(text)
	}
}

func (p *Parser) appendText(text string) {
	if text == "" {
		return
	}
	text = strings.Clone(text)
	if p.textID == "" {
		p.endThinking()
		p.textID = p.ev.NewID()
		if p.answer.Len() > 0 {
			p.answer.WriteString("\n\n")
		}
		p.emit(chat.Event{Event: chat.Start, ID: p.textID, Type: chat.TypeText})
	}
	p.emit(chat.Event{Event: chat.Delta, ID: p.textID, Type: chat.TypeText, Text: text})
	p.seg.WriteString(text)
	p.turn.WriteString(text)
	p.answer.WriteString(text)
}

// endText ends the open text message and its segment.
func (p *Parser) endText() {
	if p.textID != "" {
		p.emit(chat.Event{Event: chat.End, ID: p.textID, Type: chat.TypeText})
		p.textID = ""
	}
	p.seg.Reset()
}

// thinking handles thinking events (documented as suppressed in print
// mode; CLI versions that print them send delta and completed subtypes).
func (p *Parser) thinking(line string) {
	r := gjson.GetMany(line, "subtype", "text")
	switch r[0].String() {
	case "delta":
		t := agentcli.String(r[1])
		if t == "" {
			return
		}
		if p.thinkID == "" {
			p.endText()
			p.thinkID = p.ev.NewID()
			p.emit(chat.Event{Event: chat.Start, ID: p.thinkID, Type: chat.TypeThinking})
		}
		p.emit(chat.Event{Event: chat.Delta, ID: p.thinkID, Type: chat.TypeThinking, Text: t})
	case "completed":
		p.endThinking()
	}
}

func (p *Parser) endThinking() {
	if p.thinkID != "" {
		p.emit(chat.Event{Event: chat.End, ID: p.thinkID, Type: chat.TypeThinking})
		p.thinkID = ""
	}
}

// toolCall handles tool_call started and completed events: the tool is
// the single key of tool_call (readToolCall, shellToolCall, ..., or a
// function object), its args and, on completion, its result.
func (p *Parser) toolCall(line string) {
	r := gjson.GetMany(line, "subtype", "call_id", "tool_call")
	sub := r[0].String()
	if sub != "started" && sub != "completed" {
		return
	}
	kind, body := toolBody(r[2])
	if kind == "" {
		return
	}
	id := agentcli.String(r[1])
	p.endText()
	p.endThinking()
	t := p.tools[id]
	if t == nil || id == "" {
		name, input := describeTool(kind, body)
		t = &tool{name: name, idx: len(p.out.ToolCalls)}
		if id != "" {
			p.tools[id] = t
		}
		p.out.ToolCalls = append(p.out.ToolCalls, executor.ToolCall{ID: id, Name: name, Input: input})
		eid := p.ev.NewID()
		p.emit(chat.Event{Event: chat.Start, ID: eid, Type: chat.TypeToolCall,
			Props: map[string]any{"name": name, "id": id, "kind": kind}})
		p.emit(chat.Event{Event: chat.End, ID: eid, Type: chat.TypeToolCall,
			Props: map[string]any{"input": input}})
	}
	if sub != "completed" || t.done {
		return
	}
	t.done = true
	res := toolResult(kind, body, p.cur, p.opts.MaxEventContent)
	rep := chat.ToolResult{ToolCallID: id, Name: t.name, Content: res.content, IsError: res.isErr}
	if res.truncated {
		rep.Size = res.size
	}
	tc := &p.out.ToolCalls[t.idx]
	tc.Result = agentcli.KeptResult(res.content)
	tc.IsError = res.isErr
	chat.WholeToolResult(p.emit, p.ev.NewID(), rep)
	p.ev.ToolResultContent(t.name, res.isErr, res.content)
}

func (p *Parser) result(line string) {
	p.endText()
	p.endThinking()
	p.out.GotResult = true
	r := gjson.GetMany(line, "subtype", "is_error", "session_id", "usage", "duration_ms", "result", "error", "num_turns")
	p.out.Subtype = agentcli.String(r[0])
	if s := agentcli.String(r[2]); s != "" {
		p.out.SessionID = s
	}
	u := r[3]
	p.out.Usage = chat.Usage{
		InputTokens:         firstInt(u, "inputTokens", "input_tokens"),
		OutputTokens:        firstInt(u, "outputTokens", "output_tokens"),
		CacheReadTokens:     firstInt(u, "cacheReadTokens", "cache_read_input_tokens", "cache_read_tokens"),
		CacheCreationTokens: firstInt(u, "cacheWriteTokens", "cache_creation_input_tokens", "cache_write_tokens"),
		Turns:               int(r[7].Int()),
		DurationMS:          r[4].Int(),
	}
	text := agentcli.String(r[5])
	failed := r[1].Bool() || (p.out.Subtype != "" && p.out.Subtype != "success")
	if !failed && p.answer.Len() == 0 && text != "" {
		// Nothing streamed: the result text is the answer.
		p.appendText(text)
		p.endText()
	}
	if failed {
		msg := text
		if e := r[6]; msg == "" && e.Exists() {
			msg = cmp.Or(agentcli.String(e.Get("message")), agentcli.String(e))
		}
		if msg == "" {
			msg = "the CLI reported " + cmp.Or(p.out.Subtype, "an error")
		}
		code := classify(msg)
		p.out.Err = &chat.Error{Code: code, Message: msg}
		chat.ErrorEvent(p.emit, p.ev.NewID(), code, msg)
	}
	if m := p.opts.Monitor; m != nil {
		if !failed {
			m.Answered()
		}
		m.Settled(true)
	}
}

func firstInt(obj gjson.Result, keys ...string) int64 {
	for _, k := range keys {
		if v := obj.Get(k); v.Exists() {
			return v.Int()
		}
	}
	return 0
}

// failureRules are the words of the CLI's failure messages (a failed
// result's text, its stderr): it reports no status codes.
var failureRules = agentcli.Rules{
	{Code: chat.ErrAuth, Any: []string{"unauthorized", "unauthenticated", "authentication", "invalid api key", "api key is invalid",
		"not logged in", "login required", "forbidden", " 401", " 403"}},
	{Code: chat.ErrRateLimit, Any: []string{"rate limit", "rate-limit", "too many requests", "usage limit", "quota", " 429"}},
	{Code: chat.ErrNetwork, Any: []string{"enotfound", "econnrefused", "econnreset", "etimedout", "getaddrinfo", "network error",
		"could not connect", "connection refused", "unable to connect"}},
	{Code: chat.ErrInvalidRequest, Any: []string{"model"}, And: []string{"not found", "not available", "unknown", "invalid"}},
}

// classify maps a failure message to a chat error code (failureRules).
func classify(msg string) string { return failureRules.Classify(msg) }
