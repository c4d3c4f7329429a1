package pipeline

import (
	"context"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// maxMessages bounds how many messages one request may carry.
const maxMessages = 10000

// conversation is a turn's messages, split the way executors need them.
type conversation struct {
	// system is every system message, joined (prompts first, once
	// withPrompts put them in).
	system []string
	// history is what came before this turn (prompt examples, stored or
	// client-sent history), oldest first.
	history []chat.Message
	// examples is how many messages at the start of history are prompt
	// examples (not stored with the chat).
	examples int
	// input is this turn's trailing user message(s).
	input []chat.Message
	// replace is set when the client sent the whole conversation, which
	// then replaces the stored history.
	replace bool
	// added are messages before the input that this turn adds to the
	// stored history (Request.Continue).
	added []chat.Message
}

func (c conversation) systemPrompt() string { return strings.Join(c.system, "\n\n") }

// all is the conversation as one list, system first: what hooks see.
func (c conversation) all() []chat.Message {
	out := make([]chat.Message, 0, len(c.system)+len(c.history)+len(c.input))
	for _, s := range c.system {
		out = append(out, chat.Message{Role: chat.RoleSystem, Content: s})
	}
	out = append(out, c.history...)
	return append(out, c.input...)
}

// split turns a flat message list back into a conversation.
func split(msgs []chat.Message) conversation {
	var c conversation
	rest := make([]chat.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == chat.RoleSystem {
			c.system = append(c.system, m.Content)
			continue
		}
		rest = append(rest, m)
	}
	i := len(rest)
	for i > 0 && (rest[i-1].Role == chat.RoleUser || rest[i-1].Role == chat.RoleTool) {
		i--
	}
	c.history, c.input = rest[:i], rest[i:]
	return c
}

func checkMessages(msgs []chat.Message) error {
	if len(msgs) == 0 {
		return badRequest("messages: at least one message is required")
	}
	if len(msgs) > maxMessages {
		return badRequest("messages: %d messages, at most %d are allowed", len(msgs), maxMessages)
	}
	for i, m := range msgs {
		switch m.Role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return badRequest("messages[%d].role: %q is not one of system, user, assistant, tool", i, m.Role)
		}
	}
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleUser && last.Role != chat.RoleTool {
		return badRequest("messages: the last message must be from the user (or a tool result), got %q", last.Role)
	}
	return nil
}

// assemble builds the turn's conversation before the Create hook: either
// the stored history (when the client sent only the new message) or the
// client's whole conversation. The prompts come later (withPrompts): as in
// Yao, Create sees the conversation without them, and may pick a preset.
func (t *turn) assemble(ctx context.Context) (conversation, error) {
	client := split(t.req.Messages)
	c := conversation{system: client.system, input: client.input}
	if len(client.history) > 0 && !t.req.Continue {
		c.replace = true
		c.history = client.history
		return c, nil
	}
	stored, err := t.p.cfg.History.History(ctx, t.req.UserID, t.req.ChatID)
	if err != nil {
		return c, historyError(ctx, err)
	}
	c.history = append(answered(stored), client.history...)
	c.added = client.history
	return c, nil
}

// withPrompts puts the turn's prompts in front: system prompts before the
// conversation's own system messages, the others (examples) before its
// history.
func (c conversation) withPrompts(prompts []chat.Message) conversation {
	var system []string
	var examples []chat.Message
	for _, p := range prompts {
		if p.Role == chat.RoleSystem {
			system = append(system, p.Content)
		} else {
			examples = append(examples, p)
		}
	}
	c.system = append(system, c.system...)
	c.history = append(examples, c.history...)
	c.examples = len(examples)
	return c
}

// answered is a stored history as a model sees it: what was said, not
// what went wrong. An exchange whose turn failed before it answered
// anything (the messages it added and its failure) is left out; a failed
// answer cut short keeps its text.
func answered(msgs []chat.Message) []chat.Message {
	out := make([]chat.Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Failure.Code == "":
			out = append(out, m)
		case m.Content != "" || len(m.ToolCalls) > 0:
			m.Failure = chat.Failure{}
			out = append(out, m)
		default:
			for len(out) > 0 && out[len(out)-1].Role != chat.RoleAssistant {
				out = out[:len(out)-1]
			}
		}
	}
	return out
}

// maxFailureBytes bounds the error message a failed turn stores.
const maxFailureBytes = 4 << 10

// saveFailure stores a turn that failed or stopped after it held its chat
// (the request's messages, what was answered, and the error), so the chat
// shows it, titled by its first message, after a reload too.
func (t *turn) saveFailure(ctx context.Context, err error) {
	if t.conv == nil || t.saved || t.trial != nil {
		return
	}
	ce := chat.AsError(err)
	msg := ce.Message
	if len(msg) > maxFailureBytes {
		msg = strings.ToValidUTF8(msg[:maxFailureBytes], "") + "…"
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	if serr := t.saveHistory(sctx, *t.conv, chat.Failure{Code: ce.Code, Message: msg}); serr != nil {
		t.p.log.Error("failed turn not saved", "user", t.req.UserID, "chat", t.req.ChatID, "error", serr)
	}
}

// saveHistory stores this turn (input and answer, with the answer's tool
// calls, and the failure of a turn that failed) in the chat history,
// unless the request is ephemeral.
func (t *turn) saveHistory(ctx context.Context, c conversation, failure chat.Failure) error {
	if t.req.Ephemeral {
		return nil
	}
	t.saved = true
	answer := chat.Message{Role: chat.RoleAssistant, Content: t.content, ToolCalls: t.toolCalls, Failure: failure}
	h := t.p.cfg.History
	if c.replace {
		msgs := append(append(append([]chat.Message{}, c.history[min(c.examples, len(c.history)):]...), c.input...), answer)
		return h.ReplaceHistory(ctx, t.req.UserID, t.req.ChatID, t.asst.ID, msgs)
	}
	msgs := append(append(append([]chat.Message{}, c.added...), c.input...), answer)
	return h.AppendMessages(ctx, t.req.UserID, t.req.ChatID, t.asst.ID, msgs...)
}

// historyError is a failed read or write of the chat's history: canceled
// or timed out when the request's context ended (the store's error only
// says it was interrupted), else an internal error.
func historyError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return chat.AsError(context.Cause(ctx))
	}
	return &chat.Error{Code: chat.ErrInternal, Message: "chat history unavailable", Err: err}
}
