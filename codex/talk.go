package codex

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// Talking to a running turn of a kept Codex CLI (agentcli.Talker). The app
// server takes input into the turn it runs (turn/steer, which names the
// turn it expects) and stops the turn's current step (turn/interrupt). A
// steered message the server refuses because its turn had just ended
// goes on in a turn of its own (turn/start) before the agentbox turn
// ends, as Claude Code runs a message that came after its last request:
// the turn's end (turn/completed) waits for the answers to the steers
// sent, so no message is lost in between.

// NoticeInterrupted: the turn was interrupted by its user; the answer is
// what was said up to then.
const NoticeInterrupted = "interrupted"

var _ agentcli.Talker = (*appParser)(nil)

// Say implements agentcli.Talker: a turn/steer request of the running
// turn.
func (p *appParser) Say(msg chat.Message) ([]byte, int, error) {
	if strings.TrimSpace(msg.Content) == "" {
		return nil, 0, agentcli.Invalid("the message is empty")
	}
	c := p.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case p.ending.Exists() || p.c.Outcome().GotResult:
		return nil, 0, executor.ErrTurnEnding
	case !c.active || c.turn == "":
		return nil, 0, fmt.Errorf("%w (codex has not started the turn yet; send it again in a moment)", executor.ErrCannotTalk)
	}
	id, line := c.request("turn/steer", map[string]any{"threadId": c.thread, "expectedTurnId": c.turn,
		"input": []map[string]any{{"type": "text", "text": msg.Content, "text_elements": []any{}}}})
	if p.steers == nil {
		p.steers = map[int]string{}
	}
	p.steers[id] = msg.Content
	return line, p.c.AnswerLen(), nil
}

// Interrupt implements agentcli.Talker: turn/interrupt; the turn then
// completes as interrupted, which ends it with what was answered.
func (p *appParser) Interrupt() ([]byte, error) {
	msg := p.conn.interrupt()
	if msg == nil {
		return nil, fmt.Errorf("%w (codex has not started the turn yet)", executor.ErrCannotTalk)
	}
	p.interrupted = true
	return msg, nil
}

// steered handles the answer to a steer sent by Say (false: id is not
// one): a refused one goes on in a turn of its own; the turn's end waits
// for the last answer.
func (p *appParser) steered(id int, rerr gjson.Result) bool {
	text, ok := p.steers[id]
	if !ok {
		return false
	}
	delete(p.steers, id)
	if rerr.Exists() {
		p.queued = append(p.queued, text)
	}
	if len(p.steers) == 0 && p.ending.Exists() {
		turn := p.ending
		p.ending = gjson.Result{}
		p.completed(turn)
	}
	return true
}

// more starts a turn for the messages the server did not take into the
// one that completed (true: one was started, the agentbox turn goes on).
func (p *appParser) more(status string) bool {
	if len(p.queued) == 0 || status != "completed" {
		return false
	}
	text := strings.Join(p.queued, "\n\n")
	p.queued = nil
	p.c.EndText()
	p.conn.mu.Lock()
	msg := p.conn.startTurn(text)
	p.conn.mu.Unlock()
	p.sendMsg(msg)
	return true
}
