package acp

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// maxDetail caps the detail of a CLI's error shown in a message.
const maxDetail = 300

// Options configure a Parser. The zero value is usable.
type Options struct {
	// IDPrefix starts the event ids ("gm": gm-1, gm-2, ...).
	IDPrefix string
	// Program names the CLI in messages ("the Gemini CLI").
	Program string
	// Model, Skills and MCPServers are what the executor configured,
	// reported in the session event (the protocol reports none of them).
	Model              string
	Skills, MCPServers []string
	// Monitor is told what the CLI does; when it is also an
	// agentcli.Sender (a Run) the parser's requests and answers go there.
	Monitor agentcli.Monitor
	// FailureThreshold is the repeated_tool_failure threshold.
	FailureThreshold int
	// PermissionMode is the turn's permission_mode, named when a call is
	// refused for want of an approval.
	PermissionMode string
	// ToolName names a call from its id and the title of its first
	// update (the title when nil).
	ToolName func(id, title string) string
	// Permission answers the CLI's permission requests (Refuse when nil,
	// unless Approve is set).
	Permission Permission
	// Approve, when set, decides the CLI's permission requests under the
	// assistant's approval policy (agentcli.Plan.Approve; see Approve).
	Approve executor.Approver
	// MaxTurns ends the turn with a max_turns error when the agent starts
	// another model step after MaxTurns (0: the CLI's own limit). A kept
	// CLI's own limit may count over its whole process (the Gemini CLI's
	// maxSessionTurns); this one counts the turn's steps.
	MaxTurns int
	// Stderr reads the CLI's stderr tail and log on the process's first
	// turn, for what only they report (an MCP server that did not
	// connect).
	Stderr func(c *agentcli.Chat, text string)
}

// PermissionRequest is the CLI asking whether a call may run.
type PermissionRequest struct {
	// ToolCallID, Tool and Title are the call's id, its tool's name and
	// the CLI's description of it; Input its input when the CLI sent it.
	ToolCallID, Tool, Title string
	Input                   chat.RawJSON
	// Kind is the call's kind as the CLI reports it (execute, edit,
	// read, fetch, other, ...).
	Kind string
	// Diffs are the file changes the call would make (an edit's).
	Diffs []Diff
	// Options are the answers the CLI offers.
	Options []PermissionOption
}

// Diff is a file change of a call: the file's text before (Old; New
// alone for a file the call creates) and after.
type Diff struct {
	Path, Old, New string
	Created        bool
}

// PermissionOption is an answer to a permission request: its id, its
// name and its kind (allow_once, allow_always, reject_once,
// reject_always).
type PermissionOption struct {
	ID, Name, Kind string
}

// Permission decides a permission request: the id of the option chosen,
// or "" to cancel the call. It runs on the goroutine that reads the
// CLI's output; the CLI waits for the answer.
type Permission func(r PermissionRequest) string

// Parser reads one turn of a CLI's side of the conversation into chat
// events (see the package doc). It is an agentcli.Parser and an
// agentcli.StderrReader.
type Parser struct {
	conn *Conn
	c    *agentcli.Chat
	opts Options
	send agentcli.Sender
	// first: the turn opens the process's session.
	first bool
	shown bool // the session event was emitted
	steps int
	tools bool   // tool results since the last model step
	msgID string // the message the text chunks belong to
	calls map[string]*call
	// denied are the reasons of the calls Approve denied since the last
	// prompt: the CLI does not pass them on, so they follow as a prompt.
	denied   []string
	canceled bool // the turn was canceled (Cancel)
	limited  bool // the turn passed MaxTurns and was canceled
}

// call is a tool call the CLI announced.
type call struct {
	name, title, kind string
	input             string
	shown             bool
}

// NewParser returns the parser of the turn of conn the CLI is about to
// take; its events go to emit.
func NewParser(conn *Conn, emit chat.EmitFunc, opts Options) *Parser {
	if opts.ToolName == nil {
		opts.ToolName = func(_, title string) string { return title }
	}
	if opts.Program == "" {
		opts.Program = "the CLI"
	}
	p := &Parser{conn: conn, opts: opts, steps: 1, calls: map[string]*call{},
		c: agentcli.NewChat(emit, agentcli.ChatOptions{IDPrefix: opts.IDPrefix, Monitor: opts.Monitor, FailureThreshold: opts.FailureThreshold})}
	p.send, _ = opts.Monitor.(agentcli.Sender)
	conn.mu.Lock()
	p.first = !conn.opened
	conn.opened = true
	conn.mu.Unlock()
	return p
}

// Parse reads the stream to its end (a recorded transcript).
func (p *Parser) Parse(r io.Reader) error { return agentcli.ReadLines(r, agentcli.ChatLines, p.Line) }

// Line handles one line of the CLI's output (agentcli.Parser).
func (p *Parser) Line(line agentcli.Line) { p.c.Line(line, p.line) }

// Finish is Close (agentcli.Parser).
func (p *Parser) Finish() agentcli.Finished { return p.Close() }

// Close ends open messages and returns the outcome.
func (p *Parser) Close() *agentcli.StreamOutcome { return p.c.Close() }

// Stderr implements agentcli.StderrReader: Options.Stderr on the
// process's first turn (a kept process's stderr holds every turn's).
func (p *Parser) Stderr(text string) {
	if p.first && p.opts.Stderr != nil {
		p.opts.Stderr(p.c, text)
	}
}

func (p *Parser) line(line string) {
	r := gjson.GetMany(line, "id", "method", "params", "result", "error")
	id, method := r[0], r[1].String()
	if !p.first {
		p.showSession(p.conn.Session())
	}
	switch {
	case method != "" && id.Exists():
		p.request(id.Raw, method, r[2])
	case method == "session/update":
		p.update(r[2].Get("update"))
	case method != "":
		p.c.Skip()
	case id.Exists() && id.Type == gjson.Number:
		p.response(int(id.Int()), r[3], r[4])
	default:
		p.c.Skip()
	}
}

// showSession emits the session event (once a turn).
func (p *Parser) showSession(id string) {
	if p.shown || id == "" {
		return
	}
	p.shown = true
	p.c.Session(agentcli.Session{ID: id, Model: p.opts.Model, Cwd: p.conn.cwd,
		Skills: append([]string{}, p.opts.Skills...), MCPServers: agentcli.Configured(p.opts.MCPServers)})
}

// sendMsg sends msg to the CLI; a CLI that cannot take it fails the turn.
func (p *Parser) sendMsg(msg []byte) {
	if p.send == nil {
		return
	}
	if err := p.send.Send(msg); err != nil {
		p.c.Fail(chat.ErrExecutor, err.Error())
		p.c.Result("error")
		p.c.Stop()
	}
}

// response handles the CLI's response to one of the client's requests.
func (p *Parser) response(id int, result, rerr gjson.Result) {
	conn := p.conn
	conn.mu.Lock()
	setup, pending, probe, initialized := conn.setup, conn.pending, conn.probe, conn.ids > 1
	conn.mu.Unlock()
	msg := cmp.Or(agentcli.String(rerr.Get("message")), "error "+rerr.Get("code").String())
	if d := rerr.Get("data"); d.Exists() && d.Raw != "null" {
		// Its detail (what was wrong with a request), cut short.
		msg += ": " + agentcli.CapUTF8(d.Raw, maxDetail)
	}
	switch {
	case id == setup && rerr.Exists():
		what := "start"
		if initialized {
			what = "open its session"
		}
		// A CLI without a session takes no turn: it is stopped (not
		// kept), which ends the turn.
		p.c.Fail(agentcli.Classify(msg), fmt.Sprintf("%s could not %s: %s", p.opts.Program, what, msg))
		p.c.Stop()
	case id == setup && !initialized:
		conn.mu.Lock()
		conn.resumes = result.Get("agentCapabilities.sessionCapabilities.resume").Exists()
		conn.mu.Unlock()
		p.sendMsg(conn.openSession())
	case id == setup:
		conn.mu.Lock()
		conn.setup = 0
		conn.session = cmp.Or(agentcli.String(result.Get("sessionId")), conn.resume)
		session := conn.session
		var msg []byte
		if conn.loading {
			msg = conn.probeRequest()
		} else {
			msg = conn.promptRequest(conn.prompt)
		}
		conn.mu.Unlock()
		p.showSession(session)
		p.sendMsg(msg)
	case id == probe:
		conn.mu.Lock()
		var msg []byte
		if conn.replay && conn.probes < maxProbes {
			msg = conn.probeRequest()
		} else {
			conn.probe, conn.loading = 0, false
			msg = conn.promptRequest(conn.prompt)
		}
		conn.mu.Unlock()
		p.sendMsg(msg)
	case id == pending:
		conn.mu.Lock()
		conn.pending = 0
		conn.mu.Unlock()
		p.result(result, rerr, msg)
	default:
		p.c.Skip()
	}
}

// result ends the turn with the prompt's response.
func (p *Parser) result(result, rerr gjson.Result, errMsg string) {
	if rerr.Exists() {
		p.c.Fail(agentcli.Classify(errMsg), errMsg)
		p.c.Result("error")
		return
	}
	u := result.Get("usage")
	var usage chat.Usage
	if q := result.Get("_meta.quota.token_count"); !u.Exists() && q.Exists() {
		// The Gemini CLI's: its quota's count.
		usage = chat.Usage{InputTokens: q.Get("input_tokens").Int(), OutputTokens: q.Get("output_tokens").Int()}
	} else {
		usage = chat.Usage{
			InputTokens: u.Get("inputTokens").Int(), OutputTokens: u.Get("outputTokens").Int(),
			CacheReadTokens: u.Get("cachedReadTokens").Int(), CacheCreationTokens: u.Get("cachedWriteTokens").Int(),
		}
	}
	reason := result.Get("stopReason").String()
	if len(p.denied) > 0 && !p.canceled && (reason == "end_turn" || reason == "" || reason == "cancelled") {
		// The CLI ended the prompt on a refused call without telling the
		// model why: it reads the reasons in a prompt of the same turn.
		p.c.AddUsage(usage)
		text := strings.Join(p.denied, "\n")
		p.denied = nil
		p.conn.mu.Lock()
		msg := p.conn.promptRequest(text)
		p.conn.mu.Unlock()
		p.tools = true
		p.sendMsg(msg)
		return
	}
	usage.Turns = p.steps
	p.c.AddUsage(usage)
	if p.limited {
		// Past MaxTurns, however the prompt ended (the step the cancel
		// came after may have been the last).
		reason = "max_turn_requests"
	}
	switch reason {
	case "end_turn", "max_tokens", "":
		p.c.Result("success")
	case "max_turn_requests":
		p.c.Fail(chat.ErrMaxTurns, p.maxTurnsMessage())
		p.c.Result("error_max_turns")
	case "cancelled":
		p.c.Fail(chat.ErrCanceled, "the turn was canceled")
		p.c.Result("error")
	default:
		p.c.Fail(chat.ErrExecutor, p.opts.Program+" stopped: "+reason)
		p.c.Result("error")
	}
}

// Cancel implements agentcli.Canceler: a session/cancel notification,
// which the CLI answers by ending the prompt (stopReason cancelled).
func (p *Parser) Cancel() bool {
	msg := p.conn.cancelNotice()
	if msg == nil || p.send == nil {
		return false
	}
	p.canceled = true
	return p.send.Send(msg) == nil
}

// maxTurnsMessage is the error of a turn that reached its turn limit.
func (p *Parser) maxTurnsMessage() string {
	if p.opts.MaxTurns > 0 {
		return fmt.Sprintf("%s reached max_turns (%d) before it finished", p.opts.Program, p.opts.MaxTurns)
	}
	return p.opts.Program + " reached its turn limit (max_turns) before it finished"
}

// step counts a model step: the first output after tool results starts a
// new one. Past MaxTurns the turn is canceled, the CLI kept (false: the
// output is not shown).
func (p *Parser) step() bool {
	if p.limited {
		return false
	}
	if !p.tools {
		return true
	}
	p.tools = false
	p.steps++
	if p.opts.MaxTurns > 0 && p.steps > p.opts.MaxTurns {
		p.limited = true
		if !p.Cancel() {
			p.c.Fail(chat.ErrMaxTurns, p.maxTurnsMessage())
			p.c.Result("error_max_turns")
			p.c.Stop()
		}
		return false
	}
	return true
}

// update handles a session/update notification.
func (p *Parser) update(u gjson.Result) {
	p.conn.mu.Lock()
	loading := p.conn.loading
	if loading {
		p.conn.replay = true
	}
	p.conn.mu.Unlock()
	if loading {
		// session/load replays the session's history: shown before.
		return
	}
	switch u.Get("sessionUpdate").String() {
	case "agent_message_chunk":
		text := agentcli.String(u.Get("content.text"))
		if text == "" {
			return
		}
		if !p.step() {
			return
		}
		if id := u.Get("messageId").String(); id != p.msgID {
			p.c.EndText()
			p.msgID = id
		}
		p.c.Text(text)
	case "agent_thought_chunk":
		text := agentcli.String(u.Get("content.text"))
		if text == "" {
			return
		}
		if !p.step() {
			return
		}
		p.c.Thinking(text)
	case "tool_call", "tool_call_update":
		p.tool(u)
	case "user_message_chunk", "available_commands_update", "current_mode_update", "plan", "usage_update",
		"config_option_update", "session_info_update":
		// Not part of the chat's events.
	default:
		p.c.Skip()
	}
}

// tool handles a call's announcement and updates: it is shown once it
// runs (its input complete; a call waiting for a permission is not yet),
// its result when it completed or failed.
func (p *Parser) tool(u gjson.Result) {
	f := gjson.GetMany(u.Raw, "toolCallId", "title", "status", "rawInput", "kind")
	id := agentcli.String(f[0])
	cl := p.calls[id]
	if cl == nil {
		cl = &call{title: agentcli.String(f[1])}
		cl.name = p.opts.ToolName(id, cl.title)
		p.calls[id] = cl
	}
	if k := f[4].String(); k != "" {
		cl.kind = k
	}
	if f[3].IsObject() {
		cl.input = f[3].Raw
	}
	status := f[2].String()
	if status == "pending" {
		return
	}
	if p.limited {
		return
	}
	if !cl.shown {
		if !p.step() {
			return
		}
		cl.shown = true
		p.c.ToolCall(id, cl.name, "", chat.RawJSON(cl.input))
	}
	if status == "completed" || status == "failed" {
		p.c.ToolResult(id, cl.name, output(u), status == "failed")
		p.tools = true
	}
}

// output is a call's result as text: the tool's own output when the CLI
// sends it (rawOutput.output), else the text of its content.
func output(u gjson.Result) string {
	if o := u.Get("rawOutput.output"); o.Type == gjson.String {
		return o.String()
	}
	var parts []string
	u.Get("content").ForEach(func(_, c gjson.Result) bool {
		switch c.Get("type").String() {
		case "content":
			if t := c.Get("content.text"); t.Exists() {
				parts = append(parts, t.String())
			}
		case "diff":
			parts = append(parts, "edited "+c.Get("path").String())
		}
		return true
	})
	return strings.Join(parts, "\n")
}

// request answers a request of the CLI: a permission through
// Options.Permission; the client serves no other.
func (p *Parser) request(id, method string, params gjson.Result) {
	resp := response{JSONRPC: "2.0", ID: json.RawMessage(id)}
	if method == "session/request_permission" {
		resp.Result = p.permission(params)
	} else {
		resp.Error = &rpcError{Code: codeMethodNotFound, Message: "the client does not serve " + method}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		panic(err) // only this package's types
	}
	p.sendMsg(append(b, '\n'))
}

// permission decides a permission request (Options.Permission, else
// Refuse) and returns its outcome.
func (p *Parser) permission(params gjson.Result) any {
	tc := params.Get("toolCall")
	id := agentcli.String(tc.Get("toolCallId"))
	req := PermissionRequest{ToolCallID: id, Title: agentcli.String(tc.Get("title"))}
	if cl := p.calls[id]; cl != nil {
		req.Tool, req.Input = cl.name, chat.RawJSON(cl.input)
	} else {
		req.Tool = p.opts.ToolName(id, req.Title)
	}
	if in := tc.Get("rawInput"); in.IsObject() {
		req.Input = chat.RawJSON(in.Raw)
	}
	req.Kind = tc.Get("kind").String()
	if req.Kind == "" && p.calls[id] != nil {
		req.Kind = p.calls[id].kind
	}
	tc.Get("content").ForEach(func(_, c gjson.Result) bool {
		if c.Get("type").String() == "diff" {
			old := c.Get("oldText")
			req.Diffs = append(req.Diffs, Diff{Path: c.Get("path").String(), Old: old.String(), New: c.Get("newText").String(),
				Created: !old.Exists() || old.Type == gjson.Null})
		}
		return true
	})
	params.Get("options").ForEach(func(_, o gjson.Result) bool {
		req.Options = append(req.Options, PermissionOption{ID: o.Get("optionId").String(), Name: o.Get("name").String(), Kind: o.Get("kind").String()})
		return true
	})
	decide := p.opts.Permission
	switch {
	case decide != nil:
	case p.opts.Approve != nil:
		decide = p.approve
	default:
		decide = p.refuse
	}
	if choice := decide(req); choice != "" {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": choice}}
	}
	return map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}
}

// refuse is the answer of a turn nobody can approve: the option that
// rejects the call once, with a permission_denied notice that says what
// to set.
func (p *Parser) refuse(r PermissionRequest) string {
	mode := cmp.Or(p.opts.PermissionMode, "default")
	p.c.Denied(r.ToolCallID, r.Tool, mode, fmt.Sprintf(
		"%s asked to approve the %s call: permission_mode %s leaves it to a user's approval, which this turn cannot give; set permission_mode bypassPermissions (or auto) to allow it",
		p.opts.Program, r.Tool, mode))
	for _, kind := range []string{"reject_once", "reject_always"} {
		for _, o := range r.Options {
			if o.Kind == kind {
				return o.ID
			}
		}
	}
	return ""
}

// approve decides a permission request under the approval policy
// (Options.Approve): each call the request amounts to as the rules name
// it (ruleCalls) is decided in turn, the first denial refuses the
// request, and its reason is kept for the model (see result).
func (p *Parser) approve(r PermissionRequest) string {
	for _, c := range ruleCalls(r) {
		p.c.EndText()
		allow, reason := agentcli.Ask(p.opts.Approve, p.opts.Monitor, c.tool, c.input, r.ToolCallID)
		if !allow {
			p.denied = append(p.denied, fmt.Sprintf("[agentbox] Your %s call was not run. %s", describe(c), reason))
			return option(r.Options, "reject_once", "reject_always")
		}
	}
	return option(r.Options, "allow_once", "allow_always")
}

// option is the id of the first option of the first kind offered ("":
// none, which cancels the call).
func option(opts []PermissionOption, kinds ...string) string {
	for _, kind := range kinds {
		for _, o := range opts {
			if o.Kind == kind {
				return o.ID
			}
		}
	}
	return ""
}

// ruleCall is a call as the approval rules name it.
type ruleCall struct {
	tool  string
	input json.RawMessage
}

// ruleCalls are the calls a permission request amounts to, as the
// approval rules name them: a command (kind execute) is Bash {command};
// a file change (its diffs) Edit {file_path, old_string, new_string}, or
// Write {file_path, content} for a file it creates, one call a file; any
// other call its tool with its input.
func ruleCalls(r PermissionRequest) []ruleCall {
	in := gjson.Parse(string(r.Input))
	switch {
	case r.Kind == "execute":
		cmd := in.Get("command").String()
		if cmd == "" {
			cmd = r.Title
		}
		return []ruleCall{{"Bash", jsonObject(map[string]any{"command": cmd})}}
	case len(r.Diffs) > 0:
		out := make([]ruleCall, 0, len(r.Diffs))
		for _, d := range r.Diffs {
			if d.Created {
				out = append(out, ruleCall{"Write", jsonObject(map[string]any{"file_path": d.Path, "content": d.New})})
			} else {
				out = append(out, ruleCall{"Edit", jsonObject(map[string]any{"file_path": d.Path, "old_string": d.Old, "new_string": d.New})})
			}
		}
		return out
	case r.Kind == "edit":
		path := cmp.Or(in.Get("file_path").String(), in.Get("filePath").String(), in.Get("path").String())
		return []ruleCall{{"Edit", jsonObject(map[string]any{"file_path": path})}}
	}
	input := json.RawMessage(r.Input)
	if !in.IsObject() {
		input = json.RawMessage(`{}`)
	}
	return []ruleCall{{cmp.Or(r.Tool, r.Title, "unknown"), input}}
}

// describe names a call for the model: "Bash (git push)".
func describe(c ruleCall) string {
	in := gjson.ParseBytes(c.input)
	if s := cmp.Or(in.Get("command").String(), in.Get("file_path").String()); s != "" {
		return c.tool + " (" + agentcli.CapUTF8(s, 200) + ")"
	}
	return c.tool
}

func jsonObject(m map[string]any) json.RawMessage {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // strings only
	}
	return b
}
