package claude

import (
	"encoding/json"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// settledMonitor records what the parser last said of the turn's end.
type settledMonitor struct{ settled bool }

func (*settledMonitor) Answered()        {}
func (*settledMonitor) Busy(bool)        {}
func (m *settledMonitor) Settled(s bool) { m.settled = s }
func (*settledMonitor) Stop()            {}

// TestSayHoldsTheTurn: a message sent into the turn holds it open past
// the result until the CLI took it (its replay, by uuid) and the result
// that follows came; an interrupt's error_during_execution result ends
// the turn with the interrupted notice, not an error.
func TestSayHoldsTheTurn(t *testing.T) {
	var rec chattest.Recorder
	m := &settledMonitor{}
	p := NewParser(rec.Emit, ParserOptions{Monitor: m})
	feed := func(lines ...string) {
		for _, l := range lines {
			p.Line(agentcli.Line{Bytes: []byte(l), Size: int64(len(l))})
		}
	}
	feed(`{"type":"system","subtype":"init","session_id":"s1","model":"m"}`,
		`{"type":"user","message":{"role":"user","content":"build it"},"uuid":"u0","isReplay":true}`)
	line, at, err := p.Say(chat.Message{Role: chat.RoleUser, Content: "use tabs"})
	if err != nil || at != 0 {
		t.Fatalf("Say: %v at %d", err, at)
	}
	var sent struct {
		Type, UUID string
		Message    struct{ Content string }
	}
	if err := json.Unmarshal(line, &sent); err != nil || sent.Type != "user" || sent.UUID == "" || sent.Message.Content != "use tabs" {
		t.Fatalf("the line sent: %s (%v)", line, err)
	}
	feed(`{"type":"result","subtype":"success","result":"Built.","session_id":"s1"}`)
	if m.settled {
		t.Fatal("settled before the CLI took the message")
	}
	feed(`{"type":"system","subtype":"init","session_id":"s1","model":"m"}`,
		`{"type":"user","message":{"role":"user","content":"use tabs"},"uuid":"`+sent.UUID+`","isReplay":true}`)
	if m.settled {
		t.Fatal("settled before the message's answer")
	}
	feed(`{"type":"result","subtype":"success","result":"Tabs.","session_id":"s1"}`)
	if !m.settled {
		t.Fatal("not settled after the message's answer")
	}

	if _, err := p.Interrupt(); err != nil {
		t.Fatal(err)
	}
	feed(`{"type":"control_response","response":{"subtype":"success","request_id":"agentbox-interrupt-1"}}`,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s1"}`)
	out := p.Close()
	if out.Err != nil || !m.settled {
		t.Errorf("interrupted: error %v, settled %v", out.Err, m.settled)
	}
	if n := out.Notices; len(n) != 1 || n[0] != NoticeInterrupted {
		t.Errorf("notices %v, want interrupted", n)
	}
	if _, _, err := p.Say(chat.Message{Content: "  "}); err == nil {
		t.Error("an empty message was sent")
	}
}
