package codex

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

const appDir = "../testdata/codex/appserver"

// appConnFor is the conversation transcript name continues: for "next"
// the one first.jsonl opened, with the turn "second" started; else a new
// one, initialized (the ids of the recording: initialize 1, thread 2,
// turn 3).
func appConnFor(t *testing.T, name string) *appConn {
	t.Helper()
	conn := newAppConn("/workspace", "", "first", false)
	conn.start()
	if name != "next" {
		return conn
	}
	f, err := os.Open(appDir + "/first.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := newAppParser(conn, func(chat.Event) {}, ParserOptions{}, nil)
	if err := p.Parse(f); err != nil {
		t.Fatal(err)
	}
	if !p.Close().GotResult {
		t.Fatal("first.jsonl has no result")
	}
	if _, err := conn.next("second"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestGoldenAppServer parses the app server transcripts of a kept CLI
// (testdata/codex/appserver, see its README) as the kept executor does.
func TestGoldenAppServer(t *testing.T) {
	clitest.Golden(t, clitest.GoldenOptions[*agentcli.StreamOutcome]{
		Dir: appDir, Package: "./codex", Update: *update,
		NewParser: func(name string, emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
			return newAppParser(appConnFor(t, name), emit, ParserOptions{Model: "test-model"}, nil)
		},
		Check: func(t *testing.T, got clitest.Transcript[*agentcli.StreamOutcome]) {
			if o := got.Outcome; !o.GotResult || o.SessionID == "" || o.Content == "" || o.Usage.OutputTokens == 0 {
				t.Errorf("outcome %+v", o)
			}
		},
	})
}

// sender records what a parser sends.
type sender struct{ sent []string }

func (s *sender) Answered()    {}
func (s *sender) Busy(bool)    {}
func (s *sender) Settled(bool) {}
func (s *sender) Stop()        {}
func (s *sender) Send(b []byte) error {
	s.sent = append(s.sent, string(b))
	return nil
}

// The client's side: initialized and thread/resume after initialize, the
// turn after the thread, turn/interrupt to cancel it, and an error
// answer to the server's requests (without a policy approvals are not
// asked for).
func TestAppServerRequests(t *testing.T) {
	conn := newAppConn("/workspace", "th-1", "again", false)
	if m := gjson.ParseBytes(conn.start()); m.Get("method").String() != "initialize" || m.Get("id").Int() != 1 {
		t.Fatalf("start: %s", m.Raw)
	}
	s := &sender{}
	p := newAppParser(conn, func(chat.Event) {}, ParserOptions{Monitor: s}, nil)
	p.Line(agentcli.Line{Bytes: []byte(`{"id":1,"result":{}}`)})
	lines := strings.Split(strings.TrimSpace(strings.Join(s.sent, "")), "\n")
	if len(lines) != 2 || gjson.Get(lines[0], "method").String() != "initialized" || gjson.Get(lines[1], "method").String() != "thread/resume" ||
		gjson.Get(lines[1], "params.threadId").String() != "th-1" || !gjson.Get(lines[1], "params.excludeTurns").Bool() ||
		gjson.Get(lines[1], "params.approvalPolicy").String() != "never" {
		t.Fatalf("after initialize: %q", s.sent)
	}
	p.Line(agentcli.Line{Bytes: []byte(`{"id":2,"result":{"thread":{"id":"th-1"}}}`)})
	if m := gjson.Parse(s.sent[len(s.sent)-1]); m.Get("method").String() != "turn/start" || m.Get("params.input.0.text").String() != "again" {
		t.Fatalf("after the thread: %s", m.Raw)
	}
	if p.Cancel() {
		t.Error("canceled a turn whose id is not known")
	}
	p.Line(agentcli.Line{Bytes: []byte(`{"id":3,"result":{"turn":{"id":"tu-1"}}}`)})
	if !p.Cancel() {
		t.Fatal("could not cancel the turn")
	}
	if m := gjson.Parse(s.sent[len(s.sent)-1]); m.Get("method").String() != "turn/interrupt" || m.Get("params.turnId").String() != "tu-1" {
		t.Fatalf("cancel: %s", m.Raw)
	}
	p.Line(agentcli.Line{Bytes: []byte(`{"id":"ap-1","method":"item/commandExecution/requestApproval","params":{}}`)})
	if m := gjson.Parse(s.sent[len(s.sent)-1]); m.Get("id").String() != "ap-1" || m.Get("error.code").Int() != -32601 {
		t.Fatalf("answer to a request: %s", m.Raw)
	}
	p.Line(agentcli.Line{Bytes: []byte(`{"method":"turn/completed","params":{"turn":{"id":"tu-1","status":"interrupted"}}}`)})
	if o := p.Close(); o.Err == nil || o.Err.Code != chat.ErrCanceled || !o.GotResult {
		t.Errorf("interrupted turn: %+v", o)
	}
	if _, err := conn.next("more"); err != nil {
		t.Errorf("next turn after the interrupt: %v", err)
	}
}

// Under an approval policy the thread asks (approvalPolicy untrusted),
// and the server's approval requests are decided as the rules name their
// calls: a command is Bash {command}, each file of a change Write
// {file_path, content} or Edit {file_path, diff}; a denial declines the
// request and steers its reason into the turn.
func TestAppServerApprovals(t *testing.T) {
	conn := newAppConn("/workspace", "", "go", true)
	conn.start()
	s := &sender{}
	type asked struct{ tool, input, id string }
	var got []asked
	p := newAppParser(conn, func(chat.Event) {}, ParserOptions{Monitor: s}, func(tool string, input json.RawMessage, id string) (bool, string) {
		got = append(got, asked{tool, string(input), id})
		if strings.Contains(string(input), "push") || strings.Contains(string(input), "b.txt") {
			return false, "The user denied this tool call: not on main"
		}
		return true, ""
	})
	p.Line(agentcli.Line{Bytes: []byte(`{"id":1,"result":{}}`)})
	if m := gjson.Parse(strings.SplitAfter(s.sent[len(s.sent)-1], "\n")[1]); m.Get("method").String() != "thread/start" || m.Get("params.approvalPolicy").String() != "untrusted" {
		t.Fatalf("thread: %s", m.Raw)
	}
	p.Line(agentcli.Line{Bytes: []byte(`{"id":2,"result":{"thread":{"id":"th-1"}}}`)})
	p.Line(agentcli.Line{Bytes: []byte(`{"id":3,"result":{"turn":{"id":"tu-1"}}}`)})
	last := func() gjson.Result { return gjson.Parse(s.sent[len(s.sent)-1]) }
	p.Line(agentcli.Line{Bytes: []byte(`{"id":0,"method":"item/commandExecution/requestApproval","params":{"threadId":"th-1","turnId":"tu-1","itemId":"c1","command":"touch x","startedAtMs":1}}`)})
	if m := last(); m.Get("id").Int() != 0 || m.Get("result.decision").String() != "accept" {
		t.Fatalf("allowed command: %s", m.Raw)
	}
	p.Line(agentcli.Line{Bytes: []byte(`{"method":"item/started","params":{"item":{"type":"fileChange","id":"f1","status":"inProgress","changes":[` +
		`{"path":"/workspace/a.txt","kind":{"type":"add"},"diff":"hello\n"},{"path":"/workspace/b.txt","kind":{"type":"update","move_path":null},"diff":"@@ -1 +1 @@\n-a\n+b\n"}]}}}`)})
	p.Line(agentcli.Line{Bytes: []byte(`{"id":1,"method":"item/fileChange/requestApproval","params":{"threadId":"th-1","turnId":"tu-1","itemId":"f1","startedAtMs":1}}`)})
	// The denial of b.txt declines the change, and its reason is steered
	// into the turn before the answer.
	steer, answer := gjson.Parse(s.sent[len(s.sent)-2]), last()
	if answer.Get("id").Int() != 1 || answer.Get("result.decision").String() != "decline" {
		t.Fatalf("denied change: %s", answer.Raw)
	}
	if steer.Get("method").String() != "turn/steer" || steer.Get("params.expectedTurnId").String() != "tu-1" || steer.Get("params.threadId").String() != "th-1" ||
		steer.Get("params.input.0.text").String() != "[agentbox] Your change of /workspace/b.txt was not run. The user denied this tool call: not on main" {
		t.Fatalf("steer: %s", steer.Raw)
	}
	want := []asked{
		{"Bash", `{"command":"touch x"}`, "c1"},
		{"Write", `{"content":"hello\n","file_path":"/workspace/a.txt"}`, "f1"},
		{"Edit", `{"diff":"@@ -1 +1 @@\n-a\n+b\n","file_path":"/workspace/b.txt"}`, "f1"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("asked\n%v\nwant\n%v", got, want)
	}
	// The steer's response is not the turn's.
	p.Line(agentcli.Line{Bytes: []byte(`{"id":4,"result":{"turnId":"tu-1"}}`)})
	p.Line(agentcli.Line{Bytes: []byte(`{"method":"turn/completed","params":{"turn":{"id":"tu-1","status":"completed"}}}`)})
	if o := p.Close(); o.Err != nil || !o.GotResult {
		t.Errorf("turn: %+v", o)
	}
}

// A command Codex runs through a shell is asked about as the model wrote
// it, so that Bash rules match it.
func TestShellScript(t *testing.T) {
	for in, want := range map[string]string{
		`/bin/bash -lc 'touch /workspace/ran.txt && echo ran-7731'`: "touch /workspace/ran.txt && echo ran-7731",
		`/bin/bash -lc 'echo '"'"'hi'"'"''`:                         "echo 'hi'",
		`bash -c "echo \"a\" \$HOME"`:                               `echo "a" $HOME`,
		`/bin/sh -c ls`:                                             "ls",
		`/bin/bash -lc 'ls' && rm -rf /`:                            `/bin/bash -lc 'ls' && rm -rf /`,
		`/bin/bash -lc 'unterminated`:                               `/bin/bash -lc 'unterminated`,
		`git push origin main`:                                      "git push origin main",
	} {
		if got := shellScript(in); got != want {
			t.Errorf("shellScript(%q) = %q, want %q", in, got, want)
		}
	}
}
