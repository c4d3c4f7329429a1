package claude

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// Talking to a running turn of a kept CLI (agentcli.Talker). Claude Code
// reads stream-json user lines while it works and queues them: 2.1.197
// hands a message that comes while a tool runs to the model's next
// request of the same turn (as "The user sent a new message while you
// were working"), and one that comes after the turn's last request to a
// turn of its own after the result. With --replay-user-messages it prints
// each message back (isReplay, with the uuid it was sent with) when it
// takes it, so the parser holds the turn open until every message sent
// into it was taken and the results that follow it came. An interrupt is
// the control request of the Agent SDK's streaming mode ({"type":
// "control_request", "request": {"subtype": "interrupt"}}): the CLI
// aborts the model's answer or the running tool, answers with a
// control_response and ends the turn with an error_during_execution
// result, and waits for the next message.

// NoticeInterrupted: the turn was interrupted by its user; the answer is
// what was said up to then.
const NoticeInterrupted = "interrupted"

var _ agentcli.Talker = (*Parser)(nil)

// Say implements agentcli.Talker: the message as a stream-json user line
// with a uuid of its own.
func (p *Parser) Say(msg chat.Message) ([]byte, int, error) {
	if strings.TrimSpace(msg.Content) == "" {
		return nil, 0, agentcli.Invalid("the message is empty")
	}
	// Unique in the session: the CLI may take two messages with one
	// uuid for one.
	id := uuid.NewString()
	line, err := json.Marshal(map[string]any{"type": "user", "uuid": id,
		"message": map[string]any{"role": "user", "content": msg.Content}})
	if err != nil {
		return nil, 0, err
	}
	if p.awaiting == nil {
		p.awaiting = map[string]bool{}
	}
	p.awaiting[id] = true
	p.report()
	return append(line, '\n'), p.answer.Len(), nil
}

// Interrupt implements agentcli.Talker.
func (p *Parser) Interrupt() ([]byte, error) {
	p.interrupts++
	p.interrupted = true
	return fmt.Appendf(nil, `{"type":"control_request","request_id":"agentbox-interrupt-%d","request":{"subtype":"interrupt"}}`+"\n", p.interrupts), nil
}

// replayed notes a message the CLI printed back as it took it; false for
// a line that is not a replay.
func (p *Parser) replayed(line string) bool {
	f := gjson.GetMany(line, "isReplay", "uuid")
	if !f[0].Bool() {
		return false
	}
	delete(p.awaiting, f[1].Str)
	return true
}

// controlResponse reads the CLI's answer to a control request (an
// interrupt): a refused one is a notice.
func (p *Parser) controlResponse(line string) {
	f := gjson.GetMany(line, "response.subtype", "response.error")
	if f[0].Str == "error" {
		p.interrupted = false
		p.ev.Notice(NoticeInterrupted, "the CLI refused the interrupt: "+agentcli.String(f[1]), nil)
	}
}
