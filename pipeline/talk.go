package pipeline

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/agentbox/agentbox/chat"
)

// Talking to a running turn (executor.Talk): its user sends a message the
// agent reads before its next step, or interrupts the step at hand; the
// chat and its kept CLI go on. Cancel (CancelChat), by contrast, ends the
// turn and stops the CLI.

// TypeUserMessage is the event of a message its user sent into the
// running turn, where it came in the turn's stream; props content.
const TypeUserMessage = "user_message"

// ErrNoTurn: the chat has no running turn to talk to; the message is a
// new turn of the chat.
var ErrNoTurn = errors.New("the chat has no running turn: send the message as a new turn")

// MaxSaidBytes bounds a message sent into a running turn.
const MaxSaidBytes = 256 << 10

// Say sends text to the running turn of the user's chat: its CLI reads it
// as its next user input (executor.Talk.Say), the turn's stream shows it
// (a user_message event) and the chat's history keeps it where it was
// sent (chat.Message.Said). Errors: a chat the user does not have is one
// whose cause is sandbox.ErrNotFound; ErrNoTurn, executor.ErrCannotTalk
// and executor.ErrTurnEnding when no running turn can take it.
func (p *Pipeline) Say(ctx context.Context, user, chatID, text string) error {
	switch {
	case strings.TrimSpace(text) == "":
		return badRequest("content is empty: send {\"content\": \"...\"}")
	case len(text) > MaxSaidBytes:
		return badRequest("content is %d bytes; a message sent into a running turn holds at most %d", len(text), MaxSaidBytes)
	case !utf8.ValidString(text):
		return badRequest("content is not valid UTF-8")
	}
	t, err := p.talkingTo(ctx, user, chatID)
	if err != nil {
		return err
	}
	if err := t.talk.Say(chat.Message{Role: chat.RoleUser, Content: text}); err != nil {
		return err
	}
	p.log.Info("message sent into the running turn", "user", user, "chat", chatID, "bytes", len(text))
	chat.Whole(t.emit, t.nextID("said"), TypeUserMessage, text, map[string]any{"content": text})
	return nil
}

// Interrupt stops the current step of the running turn of the user's
// chat (the model's answer, a running tool): the turn ends with what was
// answered, an interrupted notice on its stream, and the chat's kept CLI
// takes its next message. Errors as Say's.
func (p *Pipeline) Interrupt(ctx context.Context, user, chatID string) error {
	t, err := p.talkingTo(ctx, user, chatID)
	if err != nil {
		return err
	}
	if err := t.talk.Interrupt(); err != nil {
		return err
	}
	p.log.Info("running turn interrupted by its user", "user", user, "chat", chatID)
	return nil
}

// talkingTo returns the running turn of the user's chat: the oldest, which
// holds the chat (later ones wait for it).
func (p *Pipeline) talkingTo(ctx context.Context, user, chatID string) (*turn, error) {
	if err := validateIDs(user, chatID); err != nil {
		return nil, err
	}
	if ts := p.running(user, chatID); len(ts) > 0 {
		return ts[0], nil
	}
	// Another user's chat, or none, is not found; the user's own has no
	// running turn.
	if _, err := p.GetChat(ctx, user, chatID); err != nil {
		return nil, err
	}
	return nil, ErrNoTurn
}

// saidWithin is said with each message's position kept within answer (a
// Next hook may have replaced the answer the positions were taken in),
// on a rune boundary.
func saidWithin(said []chat.Said, answer string) []chat.Said {
	if len(said) == 0 {
		return nil
	}
	out := make([]chat.Said, len(said))
	for i, s := range said {
		at := min(max(s.At, 0), len(answer))
		for at < len(answer) && !utf8.RuneStart(answer[at]) {
			at++
		}
		out[i] = chat.Said{Content: s.Content, At: at}
	}
	return out
}
