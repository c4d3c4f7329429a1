package codex

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// A kept chat's CLI runs `codex app-server`: the Codex app server's
// JSON-RPC on stdio, one process for all the chat's turns. The client
// initializes it, starts the chat's thread (or resumes it: thread/resume,
// which replays nothing) with the sandbox and approvals of `codex exec
// --dangerously-bypass-approvals-and-sandbox`, and sends each turn's
// message as turn/start; the server's notifications carry the items
// `codex exec --json` prints (in the server's own shape, mapped onto the
// exec parser's) and the answer's text as it streams; turn/completed ends
// the turn; turn/interrupt cancels one and leaves the CLI usable.

var _ agentcli.Keeper = cli{}

// NextMessage implements agentcli.Keeper: a turn/start request.
func (cli) NextMessage(next agentcli.Next) ([]byte, error) {
	conn, ok := next.Plan.Protocol.(*appConn)
	if !ok || conn == nil {
		return nil, errors.New("the kept CLI was not started as codex app-server")
	}
	// The thread holds the conversation: the prompt is the new messages.
	return conn.next(agentcli.Prompt(nil, next.Input, next.Session))
}

// appConn is the client's side of the conversation with one app server.
type appConn struct {
	cwd, resume, prompt string
	// asks: the thread asks before commands and file changes
	// (approvalPolicy untrusted), answered with the turn's
	// Plan.Approve.
	asks bool

	mu     sync.Mutex
	ids    int
	thread string
	setup  int    // the initialize or thread request pending
	starts int    // the turn/start request pending
	turn   string // the turn running
	active bool   // a turn runs (started, not completed)
	opened bool   // the process's first turn has been read
}

func newAppConn(cwd, resume, prompt string, asks bool) *appConn {
	return &appConn{cwd: cwd, resume: resume, prompt: prompt, asks: asks}
}

// message encodes a request (id > 0) or a notification.
func message(id int, method string, params any) []byte {
	m := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id > 0 {
		m["id"] = id
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // only maps of JSON values
	}
	return append(b, '\n')
}

// request encodes a request with the next id; c.mu is held.
func (c *appConn) request(method string, params any) (int, []byte) {
	c.ids++
	return c.ids, message(c.ids, method, params)
}

// start is the process's first message: the initialize request.
func (c *appConn) start() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, b := c.request("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "agentbox", "title": nil, "version": "1"},
		"capabilities": nil,
	})
	c.setup = id
	return b
}

// openThread is what follows the initialize response: the initialized
// notification and the thread's start (or resume), with the sandbox and
// approvals of --dangerously-bypass-approvals-and-sandbox: the container
// is the sandbox. Under an approval policy the thread asks before every
// command but those Codex knows to only read (untrusted), and before
// every file change.
func (c *appConn) openThread() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	policy := "never"
	if c.asks {
		policy = "untrusted"
	}
	params := map[string]any{"cwd": c.cwd, "approvalPolicy": policy, "sandbox": "danger-full-access"}
	method := "thread/start"
	if c.resume != "" {
		method, params["threadId"], params["excludeTurns"] = "thread/resume", c.resume, true
	}
	id, b := c.request(method, params)
	c.setup = id
	return append(message(0, "initialized", map[string]any{}), b...)
}

// startTurn is the turn/start request of text; c.mu is held.
func (c *appConn) startTurn(text string) []byte {
	id, b := c.request("turn/start", map[string]any{
		"threadId": c.thread,
		"input":    []map[string]any{{"type": "text", "text": text, "text_elements": []any{}}},
	})
	c.starts, c.active, c.turn = id, true, ""
	return b
}

// next is the turn/start request of a later turn's message.
func (c *appConn) next(text string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.thread == "" {
		return nil, errors.New("the kept CLI has no thread")
	}
	if c.active {
		return nil, errors.New("the kept CLI is still running a turn")
	}
	return c.startTurn(text), nil
}

// interrupt is the turn/interrupt request of the turn running (nil when
// none is known).
func (c *appConn) interrupt() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active || c.turn == "" {
		return nil
	}
	_, b := c.request("turn/interrupt", map[string]any{"threadId": c.thread, "turnId": c.turn})
	return b
}

// appParser reads one turn of an app server's output with the exec
// parser's mapping.
type appParser struct {
	*Parser
	conn  *appConn
	send  agentcli.Sender
	first bool
	shown bool
	// streamed are the agent messages whose text was shown as it came.
	streamed map[string]bool
	usage    chat.Usage
	approve  executor.Approver
	// changes are the file changes of the fileChange items started, by
	// item id: what a file change approval request is about.
	changes map[string]gjson.Result

	// Talking to the running turn (talk.go): the steers sent and not yet
	// answered (their text by request id); the messages refused by a
	// turn that had ended, for a turn of their own; the turn/completed
	// waiting for those answers; and whether the user interrupted the
	// turn.
	steers      map[int]string
	queued      []string
	ending      gjson.Result
	interrupted bool
}

func newAppParser(conn *appConn, emit chat.EmitFunc, opts ParserOptions, approve executor.Approver) *appParser {
	p := &appParser{Parser: NewParser(emit, opts), conn: conn, streamed: map[string]bool{}, approve: approve, changes: map[string]gjson.Result{}}
	p.send, _ = opts.Monitor.(agentcli.Sender)
	conn.mu.Lock()
	p.first = !conn.opened
	conn.opened = true
	conn.mu.Unlock()
	return p
}

// Line handles one line of the server's output (agentcli.Parser).
func (p *appParser) Line(line agentcli.Line) { p.c.Line(line, p.line) }

// Finish is Close (agentcli.Parser).
func (p *appParser) Finish() agentcli.Finished { return p.Close() }

// Parse reads the stream to its end (a recorded transcript).
func (p *appParser) Parse(r io.Reader) error {
	return agentcli.ReadLines(r, agentcli.ChatLines, p.Line)
}

// Stderr reads the CLI's stderr on the process's first turn (a kept
// process's stderr holds every turn's).
func (p *appParser) Stderr(tail string) {
	if p.first {
		p.Parser.Stderr(tail)
	}
}

// Cancel implements agentcli.Canceler: turn/interrupt, which the server
// answers by completing the turn as interrupted.
func (p *appParser) Cancel() bool {
	msg := p.conn.interrupt()
	return msg != nil && p.send != nil && p.send.Send(msg) == nil
}

func (p *appParser) sendMsg(msg []byte) {
	if p.send == nil {
		return
	}
	if err := p.send.Send(msg); err != nil {
		p.c.Fail(chat.ErrExecutor, err.Error())
		p.c.Stop()
	}
}

func (p *appParser) showSession(id string) {
	if p.shown || id == "" {
		return
	}
	p.shown = true
	p.Parser.line(`{"type":"thread.started","thread_id":` + jsonOf(id) + `}`)
}

func (p *appParser) line(line string) {
	r := gjson.GetMany(line, "id", "method", "params", "result", "error")
	id, method, params := r[0], r[1].String(), r[2]
	if !p.first {
		p.conn.mu.Lock()
		thread := p.conn.thread
		p.conn.mu.Unlock()
		p.showSession(thread)
	}
	switch {
	case method != "" && id.Exists():
		p.request(json.RawMessage(id.Raw), method, params)
	case method != "":
		p.notification(method, params)
	case id.Exists():
		p.response(int(id.Int()), r[3], r[4])
	default:
		p.c.Skip()
	}
}

// response handles the server's response to one of the client's requests.
func (p *appParser) response(id int, result, rerr gjson.Result) {
	conn := p.conn
	conn.mu.Lock()
	setup, starts, initialized := conn.setup, conn.starts, conn.ids > 1
	conn.mu.Unlock()
	if p.steered(id, rerr) {
		return
	}
	msg := cmp.Or(agentcli.String(rerr.Get("message")), "error "+rerr.Get("code").String())
	switch {
	case rerr.Exists() && (id == setup || id == starts):
		what := "start its turn"
		if id == setup {
			what = "start its thread"
		}
		p.c.Fail(agentcli.Classify(msg), "codex could not "+what+": "+msg)
		// Without a thread or a turn, nothing will end the turn.
		p.c.Stop()
	case id == setup && !initialized:
		p.sendMsg(conn.openThread())
	case id == setup:
		conn.mu.Lock()
		conn.setup = 0
		conn.thread = cmp.Or(result.Get("thread.id").String(), conn.resume)
		thread := conn.thread
		msg := conn.startTurn(conn.prompt)
		conn.mu.Unlock()
		p.showSession(thread)
		p.sendMsg(msg)
	case id == starts:
		conn.mu.Lock()
		conn.starts = 0
		if conn.active && conn.turn == "" {
			conn.turn = result.Get("turn.id").String()
		}
		conn.mu.Unlock()
	default:
		p.c.Skip()
	}
}

// notification maps a notification of the server onto the exec parser's
// events.
func (p *appParser) notification(method string, params gjson.Result) {
	switch method {
	case "turn/started":
		p.conn.mu.Lock()
		if p.conn.active && p.conn.turn == "" {
			p.conn.turn = params.Get("turn.id").String()
		}
		p.conn.mu.Unlock()
	case "item/agentMessage/delta":
		if p.limited || !p.step() {
			return
		}
		p.streamed[params.Get("itemId").String()] = true
		p.c.Text(agentcli.String(params.Get("delta")))
	case "item/started", "item/completed":
		it := params.Get("item")
		done := method == "item/completed"
		if it.Get("type").String() == "agentMessage" && p.streamed[it.Get("id").String()] {
			if done {
				p.c.EndText()
			}
			return
		}
		if it.Get("type").String() == "fileChange" {
			if done {
				delete(p.changes, it.Get("id").String())
			} else {
				p.changes[it.Get("id").String()] = it.Get("changes")
			}
		}
		if item := execItem(it); item != "" {
			p.Parser.line(`{"type":"item.` + map[bool]string{true: "completed", false: "started"}[done] + `","item":` + item + `}`)
		}
	case "thread/tokenUsage/updated":
		last := params.Get("tokenUsage.last")
		p.usage.InputTokens += last.Get("inputTokens").Int()
		p.usage.CacheReadTokens += last.Get("cachedInputTokens").Int()
		p.usage.OutputTokens += last.Get("outputTokens").Int()
	case "warning", "configWarning":
		p.c.Notice(NoticeCLIWarning, agentcli.String(params.Get("message")), nil)
	case "error":
		if params.Get("willRetry").Bool() {
			p.c.Notice(NoticeCLIWarning, agentcli.String(params.Get("error.message")), nil)
		} else {
			p.Parser.line(`{"type":"error","message":` + jsonOf(params.Get("error.message").String()) + `}`)
		}
	case "turn/completed":
		p.completed(params.Get("turn"))
	default:
		// Thread status, rate limits, deltas of items shown whole.
	}
}

// completed ends the turn: its usage, then its result. It waits for the
// answers to the messages sent into the turn (Say), and goes on in a turn
// of their own with those the server refused.
func (p *appParser) completed(turn gjson.Result) {
	p.conn.mu.Lock()
	p.conn.active, p.conn.turn = false, ""
	p.conn.mu.Unlock()
	status := turn.Get("status").String()
	if len(p.steers) > 0 {
		p.ending = turn
		return
	}
	if status == "interrupted" && p.interrupted {
		// Its user interrupted it: the answer is what was said, and the
		// messages sent into it are not run.
		p.queued = nil
		p.c.Notice(NoticeInterrupted, "the turn was interrupted by its user", nil)
		status = "completed"
	} else if p.more(status) {
		return
	}
	u := p.usage
	usage := `{"input_tokens":` + jsonOf(u.InputTokens+u.CacheReadTokens) + `,"cached_input_tokens":` + jsonOf(u.CacheReadTokens) +
		`,"output_tokens":` + jsonOf(u.OutputTokens) + `}`
	switch status {
	case "completed":
		p.Parser.line(`{"type":"turn.completed","usage":` + usage + `}`)
	case "interrupted":
		p.c.AddUsage(chat.Usage{InputTokens: u.InputTokens, CacheReadTokens: u.CacheReadTokens, OutputTokens: u.OutputTokens, Turns: p.steps})
		p.c.Fail(chat.ErrCanceled, "the turn was interrupted")
		p.c.Result("error")
	default:
		msg := cmp.Or(turn.Get("error.message").String(), "the turn failed")
		p.Parser.line(`{"type":"turn.failed","error":{"message":` + jsonOf(msg) + `}}`)
	}
}

// execItem is an app server's item in the shape `codex exec --json`
// prints it ("" for an item the exec parser does not show).
func execItem(it gjson.Result) string {
	f := gjson.GetMany(it.Raw, "id", "type", "status")
	m := map[string]any{"id": f[0].String()}
	status := strings.ReplaceAll(f[2].String(), "inProgress", "in_progress")
	switch f[1].String() {
	case "agentMessage":
		m["type"], m["text"] = "agent_message", it.Get("text").String()
	case "reasoning":
		var parts []string
		for _, s := range it.Get("summary").Array() {
			parts = append(parts, s.String())
		}
		if len(parts) == 0 {
			for _, s := range it.Get("content").Array() {
				parts = append(parts, s.String())
			}
		}
		m["type"], m["text"] = "reasoning", strings.Join(parts, "\n\n")
	case "commandExecution":
		m["type"], m["command"], m["aggregated_output"], m["status"] = "command_execution", it.Get("command").String(), it.Get("aggregatedOutput").String(), status
		if c := it.Get("exitCode"); c.Type == gjson.Number {
			m["exit_code"] = c.Int()
		}
	case "fileChange":
		var changes []map[string]string
		it.Get("changes").ForEach(func(_, c gjson.Result) bool {
			changes = append(changes, map[string]string{"path": c.Get("path").String(), "kind": c.Get("kind.type").String()})
			return true
		})
		m["type"], m["changes"], m["status"] = "file_change", changes, status
	case "mcpToolCall":
		m["type"], m["server"], m["tool"], m["status"] = "mcp_tool_call", it.Get("server").String(), it.Get("tool").String(), status
		if a := it.Get("arguments"); a.IsObject() {
			m["arguments"] = json.RawMessage(a.Raw)
		}
		if r := it.Get("result"); r.IsObject() {
			m["result"] = json.RawMessage(r.Raw)
		}
		if e := it.Get("error.message"); e.Exists() {
			m["error"] = map[string]string{"message": e.String()}
		}
	case "webSearch":
		m["type"], m["query"] = "web_search", it.Get("query").String()
	default:
		return ""
	}
	return jsonOf(m)
}

// request answers a request of the server: the approvals of a command or
// a file change under an approval policy (the turn's Plan.Approve);
// none other is served.
func (p *appParser) request(id json.RawMessage, method string, params gjson.Result) {
	var result any
	switch {
	case p.approve == nil:
		// The thread was started not to ask (approvalPolicy never).
	case method == "item/commandExecution/requestApproval":
		result = p.decide(params, []ruleCall{{"Bash", jsonOf(map[string]string{"command": shellScript(params.Get("command").String())})}})
	case method == "item/fileChange/requestApproval":
		result = p.decide(params, fileCalls(p.changes[params.Get("itemId").String()]))
	}
	if result == nil {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": -32601, "message": "the client does not serve " + method}})
		p.sendMsg(append(b, '\n'))
		return
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		panic(err) // only JSON values
	}
	p.sendMsg(append(b, '\n'))
}

// ruleCall is a call as the approval rules name it.
type ruleCall struct{ tool, input string }

// decide asks about each call of a request in turn: the first denial
// declines the request, and the model, which Codex tells only that the
// call was declined, reads the reason as input steered into its turn.
func (p *appParser) decide(params gjson.Result, calls []ruleCall) map[string]string {
	item := params.Get("itemId").String()
	if len(calls) == 0 {
		// A change the client did not see start: nothing to show.
		calls = []ruleCall{{"Edit", `{}`}}
	}
	for _, c := range calls {
		p.c.EndText()
		allow, reason := agentcli.Ask(p.approve, p.opts.Monitor, c.tool, json.RawMessage(c.input), item)
		if !allow {
			p.steer(fmt.Sprintf("[agentbox] Your %s was not run. %s", describe(c), reason), params.Get("turnId").String())
			return map[string]string{"decision": "decline"}
		}
	}
	return map[string]string{"decision": "accept"}
}

// steer sends text into the running turn as the user's (turn/steer).
func (p *appParser) steer(text, turn string) {
	p.conn.mu.Lock()
	thread := p.conn.thread
	turn = cmp.Or(turn, p.conn.turn)
	_, msg := p.conn.request("turn/steer", map[string]any{"threadId": thread, "expectedTurnId": turn,
		"input": []map[string]any{{"type": "text", "text": text, "text_elements": []any{}}}})
	p.conn.mu.Unlock()
	p.sendMsg(msg)
}

// fileCalls are a file change's files as the approval rules name them:
// Write {file_path, content} for a file it adds, Edit {file_path, diff}
// for one it updates (or deletes: {file_path, delete: true}).
func fileCalls(changes gjson.Result) []ruleCall {
	var out []ruleCall
	changes.ForEach(func(_, c gjson.Result) bool {
		path, diff := c.Get("path").String(), c.Get("diff").String()
		switch c.Get("kind.type").String() {
		case "add":
			out = append(out, ruleCall{"Write", jsonOf(map[string]string{"file_path": path, "content": diff})})
		case "delete":
			out = append(out, ruleCall{"Edit", jsonOf(map[string]any{"file_path": path, "delete": true})})
		default:
			out = append(out, ruleCall{"Edit", jsonOf(map[string]string{"file_path": path, "diff": diff})})
		}
		return true
	})
	return out
}

// describe names a call for the model: "command (git push)".
func describe(c ruleCall) string {
	in := gjson.Parse(c.input)
	if c.tool == "Bash" {
		return "command (" + agentcli.CapUTF8(in.Get("command").String(), 200) + ")"
	}
	return "change of " + in.Get("file_path").String()
}

// shellScript is the script of a command Codex runs through a shell, as
// the model wrote it: the approval request's command is the command line
// Codex runs (/bin/bash -lc 'touch a && echo b'), which Bash rules would
// not match. Any other command is returned as it is.
func shellScript(cmd string) string {
	for _, sh := range []string{"/bin/bash", "/usr/bin/bash", "bash", "/bin/sh", "sh", "/bin/zsh", "/usr/bin/zsh", "zsh"} {
		for _, flag := range []string{" -lc ", " -c "} {
			if rest, ok := strings.CutPrefix(cmd, sh+flag); ok {
				if script, ok := shellWord(rest); ok {
					return script
				}
			}
		}
	}
	return cmd
}

// shellWord reads s as one POSIX shell word ('...', "..." with its
// backslash escapes, \x): ok false when s is not exactly one.
func shellWord(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return "", false
			}
		case '\\':
			if i+1 >= len(s) {
				return "", false
			}
			i++
			b.WriteByte(s[i])
		case ' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}
