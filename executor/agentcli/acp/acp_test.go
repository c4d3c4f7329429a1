package acp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
)

// cli is the CLI's side for a parser: a Monitor that records what the
// parser sends (agentcli.Sender) and whether the turn settled.
type cli struct {
	sent    []string
	settled bool
	stopped bool
}

func (c *cli) Answered()            {}
func (c *cli) Busy(bool)            {}
func (c *cli) Settled(settled bool) { c.settled = settled }
func (c *cli) Stop()                { c.stopped = true }
func (c *cli) Send(msg []byte) error {
	if !strings.HasSuffix(string(msg), "\n") {
		return fmt.Errorf("message without its newline: %q", msg)
	}
	c.sent = append(c.sent, string(msg))
	return nil
}

// last is the method (or, for a response, the id) of the last message
// sent.
func (c *cli) last(t *testing.T) gjson.Result {
	t.Helper()
	if len(c.sent) == 0 {
		t.Fatal("nothing sent")
	}
	return gjson.Parse(c.sent[len(c.sent)-1])
}

func feed(p *acp.Parser, lines ...string) {
	for _, l := range lines {
		p.Line(agentcli.Line{Bytes: []byte(l)})
	}
}

func update(kind, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":%q,"content":{"type":"text","text":%q}}}}`, kind, text)
}

// A loaded session's replay is not shown: the prompt goes once a probe
// comes back with no update before it.
func TestLoadSkipsReplay(t *testing.T) {
	conn := acp.NewConn("/workspace", "s1", "again")
	conn.Start()
	m := &cli{}
	var log chattest.Recorder
	p := acp.NewParser(conn, log.Emit, acp.Options{IDPrefix: "t", Monitor: m})
	feed(p, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`)
	if r := m.last(t); r.Get("method").String() != "session/load" || r.Get("params.sessionId").String() != "s1" || r.Get("id").Int() != 2 {
		t.Fatalf("after initialize: %s", r.Raw)
	}
	feed(p, `{"jsonrpc":"2.0","id":2,"result":{}}`, update("user_message_chunk", "before"), update("agent_message_chunk", "old answer"))
	if r := m.last(t); r.Get("method").String() != "agentbox/probe" || r.Get("id").Int() != 3 {
		t.Fatalf("after load: %s", r.Raw)
	}
	// An update came while the first probe was out: another one.
	feed(p, update("agent_message_chunk", "older"), `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}`)
	if r := m.last(t); r.Get("method").String() != "agentbox/probe" || r.Get("id").Int() != 4 {
		t.Fatalf("after a probe with a replay: %s", r.Raw)
	}
	feed(p, `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found"}}`)
	if r := m.last(t); r.Get("method").String() != "session/prompt" || r.Get("params.prompt.0.text").String() != "again" || r.Get("id").Int() != 5 {
		t.Fatalf("after a quiet probe: %s", r.Raw)
	}
	feed(p, update("agent_message_chunk", "new"), `{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":2}}}`)
	out := p.Close()
	if out.Content != "new" || out.SessionID != "s1" || !out.GotResult || !m.settled || out.Usage.OutputTokens != 2 {
		t.Errorf("outcome %+v settled %v", out, m.settled)
	}
	chattest.Check(t, log.Events())
}

// A CLI that resumes a session without a replay is asked to
// (session/resume), and the prompt follows its response.
func TestResume(t *testing.T) {
	conn := acp.NewConn("/workspace", "s1", "again")
	conn.Start()
	m := &cli{}
	p := acp.NewParser(conn, func(chat.Event) {}, acp.Options{Monitor: m})
	feed(p, `{"jsonrpc":"2.0","id":1,"result":{"agentCapabilities":{"sessionCapabilities":{"resume":{}}}}}`)
	if r := m.last(t); r.Get("method").String() != "session/resume" {
		t.Fatalf("after initialize: %s", r.Raw)
	}
	feed(p, `{"jsonrpc":"2.0","id":2,"result":{}}`)
	if r := m.last(t); r.Get("method").String() != "session/prompt" || r.Get("params.sessionId").String() != "s1" {
		t.Fatalf("after resume: %s", r.Raw)
	}
}

// A CLI that cannot open its session is stopped with its error; a kept
// one takes later turns as prompts, can be canceled, and is answered
// "method not found" for a request the client does not serve.
func TestSessionLifecycle(t *testing.T) {
	conn := acp.NewConn("/workspace", "", "hi")
	conn.Start()
	m := &cli{}
	p := acp.NewParser(conn, func(chat.Event) {}, acp.Options{Monitor: m, Program: "the CLI"})
	feed(p, `{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error","data":{"details":"no auth"}}}`)
	out := p.Close()
	if !m.stopped || out.Err == nil || !strings.Contains(out.Err.Message, "could not open its session: Internal error: {\"details\":\"no auth\"}") {
		t.Fatalf("setup failure: stopped %v, err %v", m.stopped, out.Err)
	}
	if _, err := conn.Next([]chat.Message{{Role: chat.RoleUser, Content: "x"}}); err == nil {
		t.Error("a conversation without a session took a prompt")
	}

	conn = acp.NewConn("/workspace", "", "hi")
	conn.Start()
	m = &cli{}
	p = acp.NewParser(conn, func(chat.Event) {}, acp.Options{Monitor: m})
	feed(p, `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s9"}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`)
	if !p.Close().GotResult {
		t.Fatal("first turn has no result")
	}
	msg, err := acp.NextMessage(agentcli.Next{Input: []chat.Message{{Content: "one"}, {Content: "two"}}, Plan: &agentcli.Plan{Protocol: conn}})
	if err != nil {
		t.Fatal(err)
	}
	if r := gjson.ParseBytes(msg); r.Get("method").String() != "session/prompt" || r.Get("id").Int() != 4 || r.Get("params.prompt.0.text").String() != "one\n\ntwo" {
		t.Fatalf("next prompt: %s", msg)
	}
	m = &cli{}
	var log chattest.Recorder
	p = acp.NewParser(conn, log.Emit, acp.Options{Monitor: m})
	feed(p, `{"jsonrpc":"2.0","id":"x1","method":"fs/read_text_file","params":{"path":"/etc/passwd"}}`)
	if r := m.last(t); r.Get("id").String() != "x1" || r.Get("error.code").Int() != -32601 {
		t.Fatalf("answer to an unserved request: %s", r.Raw)
	}
	if !p.Cancel() {
		t.Fatal("a pending prompt could not be canceled")
	}
	if r := m.last(t); r.Get("method").String() != "session/cancel" || r.Get("params.sessionId").String() != "s9" || r.Get("id").Exists() {
		t.Fatalf("cancel: %s", r.Raw)
	}
	feed(p, `{"jsonrpc":"2.0","id":4,"result":{"stopReason":"cancelled"}}`)
	if out := p.Close(); out.Err == nil || out.Err.Code != chat.ErrCanceled || !m.settled {
		t.Errorf("canceled turn: %+v settled %v", out.Err, m.settled)
	}
	if s := log.Starts(chat.TypeSession); len(s) != 1 {
		t.Errorf("a kept turn's session events: %+v", s)
	}
	if p.Cancel() {
		t.Error("canceled a turn that was over")
	}
	if _, err := acp.NextMessage(agentcli.Next{Plan: &agentcli.Plan{}}); err == nil {
		t.Error("a plan without a conversation took a prompt")
	}
}

// Under an approval policy (Options.Approve) a permission request is
// decided as the rules name its calls: a command is Bash {command}, each
// file of an edit Edit or Write {file_path, ...}; an allowed call gets the
// allow option, a denied one the reject option, and its reason, which the
// CLI does not pass on, goes to the model as a prompt of the same turn
// when the CLI ends the prompt.
func TestApprove(t *testing.T) {
	conn := acp.NewConn("/workspace", "", "hi")
	conn.Start()
	m := &cli{}
	var log chattest.Recorder
	type asked struct{ tool, input, id string }
	var got []asked
	p := acp.NewParser(conn, log.Emit, acp.Options{Monitor: m, Approve: func(tool string, input json.RawMessage, id string) (bool, string) {
		got = append(got, asked{tool, string(input), id})
		if strings.Contains(string(input), "push") {
			return false, "The user denied this tool call: not on main"
		}
		return true, ""
	}})
	options := `"options":[{"optionId":"once","kind":"allow_once","name":"Allow once"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]`
	feed(p, `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`,
		`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1","title":"ls","kind":"execute","rawInput":{"command":"ls -la"}},`+options+`}}`)
	if r := m.last(t); r.Get("id").Int() != 0 || r.Get("result.outcome.outcome").String() != "selected" || r.Get("result.outcome.optionId").String() != "once" {
		t.Fatalf("answer to an allowed call: %s", r.Raw)
	}
	feed(p, `{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c2","title":"edit","kind":"edit","content":[`+
		`{"type":"diff","path":"/workspace/a.txt","oldText":"a\n","newText":"b\n"},{"type":"diff","path":"/workspace/new.txt","oldText":null,"newText":"n\n"}]},`+options+`}}`)
	if r := m.last(t); r.Get("result.outcome.optionId").String() != "once" {
		t.Fatalf("answer to an allowed edit: %s", r.Raw)
	}
	feed(p, `{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c3","title":"git push","kind":"execute","rawInput":{"command":"git push"}},`+options+`}}`)
	if r := m.last(t); r.Get("result.outcome.optionId").String() != "reject" {
		t.Fatalf("answer to a denied call: %s", r.Raw)
	}
	want := []asked{
		{"Bash", `{"command":"ls -la"}`, "c1"},
		{"Edit", `{"file_path":"/workspace/a.txt","new_string":"b\n","old_string":"a\n"}`, "c2"},
		{"Write", `{"content":"n\n","file_path":"/workspace/new.txt"}`, "c2"},
		{"Bash", `{"command":"git push"}`, "c3"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("asked\n%v\nwant\n%v", got, want)
	}
	// The CLI ends the prompt on the refusal: the reason follows.
	feed(p, `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":2}}}`)
	if r := m.last(t); r.Get("method").String() != "session/prompt" || r.Get("id").Int() != 4 ||
		!strings.Contains(r.Get("params.prompt.0.text").String(), "Your Bash (git push) call was not run. The user denied this tool call: not on main") {
		t.Fatalf("after the refused prompt: %s", r.Raw)
	}
	if m.settled {
		t.Fatal("the turn settled before the model read the reason")
	}
	feed(p, update("agent_message_chunk", "Not pushing."), `{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":3}}}`)
	out := p.Close()
	if !m.settled || out.Content != "Not pushing." || out.Usage.InputTokens != 22 || out.Usage.OutputTokens != 5 {
		t.Errorf("outcome %+v settled %v", out, m.settled)
	}
	chattest.Check(t, log.Events())
}

// MaxTurns counts a turn's model steps, not the process's: a kept CLI's
// second turn has the whole budget, and a turn that starts a step past it
// is canceled (the CLI stays) and ends with max_turns, what it printed
// after the limit not shown.
func TestMaxTurns(t *testing.T) {
	conn := acp.NewConn("/workspace", "", "hi")
	conn.Start()
	call := func(id string) []string {
		return []string{
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":%q,"title":"ls","status":"in_progress","rawInput":{}}}}`, id),
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":%q,"status":"completed","rawOutput":{"output":"ok"}}}}`, id),
		}
	}
	m := &cli{}
	p := acp.NewParser(conn, func(chat.Event) {}, acp.Options{Monitor: m, MaxTurns: 2})
	feed(p, `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`)
	feed(p, call("a")...)
	feed(p, update("agent_message_chunk", "done"), `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`)
	if out := p.Close(); out.Err != nil || out.Usage.Turns != 2 {
		t.Fatalf("first turn, two steps of two: err %v, turns %d", out.Err, out.Usage.Turns)
	}

	// The next turn on the same CLI: two steps again (a call each), then
	// a third.
	msg, err := acp.NextMessage(agentcli.Next{Input: []chat.Message{{Content: "more"}}, Plan: &agentcli.Plan{Protocol: conn}})
	if err != nil {
		t.Fatal(err)
	}
	m = &cli{sent: []string{string(msg)}}
	var log chattest.Recorder
	p = acp.NewParser(conn, log.Emit, acp.Options{Monitor: m, MaxTurns: 2})
	feed(p, call("b")...)
	feed(p, call("c")...)
	feed(p, call("d")...)
	if r := m.last(t); r.Get("method").String() != "session/cancel" {
		t.Fatalf("past max_turns the turn is not canceled: last sent %s", r.Raw)
	}
	feed(p, update("agent_message_chunk", "after the limit"), `{"jsonrpc":"2.0","id":4,"result":{"stopReason":"cancelled"}}`)
	out := p.Close()
	if out.Err == nil || out.Err.Code != chat.ErrMaxTurns || m.stopped || !m.settled {
		t.Fatalf("past max_turns: err %+v, stopped %v, settled %v", out.Err, m.stopped, m.settled)
	}
	if strings.Contains(out.Content, "after the limit") || len(log.Starts(chat.TypeToolCall)) != 2 {
		t.Errorf("shown after the limit: content %q, tool calls %+v", out.Content, log.Starts(chat.TypeToolCall))
	}
}
