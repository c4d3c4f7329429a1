package codex

import (
	"errors"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// talkTurn is a kept app server's turn tu-1 of thread th-1, running.
func talkTurn(t *testing.T) (*appParser, *sender, *chattest.Recorder) {
	t.Helper()
	conn := newAppConn("/workspace", "", "go", false)
	conn.start()
	s := &sender{}
	log := &chattest.Recorder{}
	p := newAppParser(conn, log.Emit, ParserOptions{Monitor: s}, nil)
	if _, _, err := p.Say(chat.Message{Content: "early"}); !errors.Is(err, executor.ErrCannotTalk) {
		t.Fatalf("a message before the turn started: %v", err)
	}
	for _, l := range []string{`{"id":1,"result":{}}`, `{"id":2,"result":{"thread":{"id":"th-1"}}}`, `{"id":3,"result":{"turn":{"id":"tu-1"}}}`,
		`{"method":"item/agentMessage/delta","params":{"itemId":"m1","delta":"Working."}}`} {
		p.Line(agentcli.Line{Bytes: []byte(l)})
	}
	return p, s, log
}

func line(p *appParser, l string) { p.Line(agentcli.Line{Bytes: []byte(l)}) }

// A message sent into the running turn is a turn/steer of it, placed
// where the answer stood; the turn ends once the server answered it.
func TestTalkSteers(t *testing.T) {
	p, s, _ := talkTurn(t)
	msg, at, err := p.Say(chat.Message{Content: "use tabs"})
	if err != nil {
		t.Fatal(err)
	}
	if m := gjson.ParseBytes(msg); m.Get("method").String() != "turn/steer" || m.Get("params.expectedTurnId").String() != "tu-1" ||
		m.Get("params.threadId").String() != "th-1" || m.Get("params.input.0.text").String() != "use tabs" || at != len("Working.") {
		t.Fatalf("steer %s at %d", msg, at)
	}
	if _, _, err := p.Say(chat.Message{Content: "  "}); err == nil {
		t.Error("an empty message was taken")
	}
	// The turn completes before the steer's answer came: it waits.
	line(p, `{"method":"turn/completed","params":{"turn":{"id":"tu-1","status":"completed"}}}`)
	if p.c.Outcome().GotResult {
		t.Fatal("the turn ended before the server answered the message sent into it")
	}
	if _, _, err := p.Say(chat.Message{Content: "late"}); !errors.Is(err, executor.ErrTurnEnding) {
		t.Errorf("a message while the turn ends: %v", err)
	}
	line(p, `{"id":4,"result":{"turnId":"tu-1"}}`)
	if o := p.Close(); o.Err != nil || !o.GotResult || len(s.sent) == 0 {
		t.Errorf("turn: %+v", o)
	}
}

// A steer the server refuses (its turn had ended) goes on in a turn of
// its own within the same agentbox turn, whose answer follows.
func TestTalkRefusedSteerRunsNext(t *testing.T) {
	p, s, _ := talkTurn(t)
	if _, _, err := p.Say(chat.Message{Content: "and a README"}); err != nil {
		t.Fatal(err)
	}
	line(p, `{"method":"turn/completed","params":{"turn":{"id":"tu-1","status":"completed"}}}`)
	line(p, `{"id":4,"error":{"code":-32600,"message":"no active turn to steer"}}`)
	m := gjson.Parse(s.sent[len(s.sent)-1])
	if m.Get("method").String() != "turn/start" || m.Get("params.input.0.text").String() != "and a README" {
		t.Fatalf("after a refused steer: %s", m.Raw)
	}
	if p.c.Outcome().GotResult {
		t.Fatal("the turn ended with a message not run")
	}
	id := m.Get("id").Int()
	line(p, `{"id":`+strconv.FormatInt(id, 10)+`,"result":{"turn":{"id":"tu-2"}}}`)
	line(p, `{"method":"item/agentMessage/delta","params":{"itemId":"m2","delta":"README added."}}`)
	line(p, `{"method":"turn/completed","params":{"turn":{"id":"tu-2","status":"completed"}}}`)
	if o := p.Close(); o.Err != nil || !o.GotResult || o.Content != "Working.\n\nREADME added." {
		t.Errorf("turn: %+v", o)
	}
}

// An interrupt stops the turn's step (turn/interrupt) and ends the turn
// with what was answered and a notice, not an error (a cancel's).
func TestTalkInterrupt(t *testing.T) {
	p, _, log := talkTurn(t)
	msg, err := p.Interrupt()
	if err != nil {
		t.Fatal(err)
	}
	if m := gjson.ParseBytes(msg); m.Get("method").String() != "turn/interrupt" || m.Get("params.turnId").String() != "tu-1" {
		t.Fatalf("interrupt: %s", msg)
	}
	line(p, `{"method":"turn/completed","params":{"turn":{"id":"tu-1","status":"interrupted"}}}`)
	o := p.Close()
	if o.Err != nil || !o.GotResult || o.Content != "Working." {
		t.Errorf("interrupted turn: %+v", o)
	}
	if n := log.Starts(chat.TypeNotice); len(n) != 1 || n[0].Props["code"] != NoticeInterrupted {
		t.Errorf("notices %+v", n)
	}
}
