package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/chat"
)

// persist is the last phase of a turn that answered: the answer goes
// into the chat's history (one that cannot be stored is a notice, not the
// turn's failure: the client has its answer) and back to the caller.
func (t *turn) persist(ctx context.Context) *Response {
	if t.answer.FinishReason == "" {
		t.answer.FinishReason = chat.FinishStop
	}
	if err := t.saveHistory(ctx, chat.Failure{}); err != nil {
		t.p.log.Error("history not saved", "user", t.req.UserID, "chat", t.req.ChatID, "error", err)
		chat.Notice(t.emit, t.nextID("notice"), "history_not_saved", "the answer was not saved to the chat history: "+err.Error())
	}
	return &Response{Content: t.answer.Content, SessionID: t.answer.SessionID, Usage: t.usage, Data: t.data,
		FinishReason: t.answer.FinishReason, ToolCalls: t.answer.ToolCalls}
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
	if serr := t.saveHistory(sctx, chat.Failure{Code: ce.Code, Message: msg}); serr != nil {
		t.p.log.Error("failed turn not saved", "user", t.req.UserID, "chat", t.req.ChatID, "error", serr)
	}
}

// saveHistory stores this turn (input and answer, with the answer's tool
// calls, and the failure of a turn that failed) in the chat history,
// unless the request is ephemeral.
func (t *turn) saveHistory(ctx context.Context, failure chat.Failure) error {
	if t.req.Ephemeral {
		return nil
	}
	t.saved = true
	c := t.conv
	answer := chat.Message{Role: chat.RoleAssistant, Content: t.answer.Content, ToolCalls: t.answer.ToolCalls, Failure: failure,
		Said: saidWithin(t.answer.Said, t.answer.Content)}
	h := t.p.cfg.History
	var err error
	if c.replace {
		msgs := slices.Concat(c.history, c.input, []chat.Message{answer})
		err = h.ReplaceHistory(ctx, t.req.UserID, t.req.ChatID, t.asst.ID, msgs)
	} else {
		msgs := append(append(append([]chat.Message{}, c.added...), c.input...), answer)
		err = h.AppendMessages(ctx, t.req.UserID, t.req.ChatID, t.asst.ID, msgs...)
	}
	if err == nil {
		t.checkpoint(ctx, failure.Code != "")
	}
	return err
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

// memHistory is the in-memory History used when none is configured.
type memHistory struct {
	mu     sync.Mutex
	chats  map[string][]chat.Message
	owners map[string]string
}

func newMemHistory() *memHistory {
	return &memHistory{chats: map[string][]chat.Message{}, owners: map[string]string{}}
}

func (h *memHistory) key(user, chatID string) string { return fmt.Sprintf("%s\x00%s", user, chatID) }

func (h *memHistory) History(_ context.Context, user, chatID string) ([]chat.Message, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]chat.Message(nil), h.chats[h.key(user, chatID)]...), nil
}

func (h *memHistory) AppendMessages(_ context.Context, user, chatID, _ string, msgs ...chat.Message) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.key(user, chatID)
	h.chats[k] = append(h.chats[k], msgs...)
	return nil
}

func (h *memHistory) ClaimChat(_ context.Context, user, chatID, assistantID string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := h.key(user, chatID)
	if o := h.owners[k]; o != "" {
		return o, nil
	}
	h.owners[k] = assistantID
	return assistantID, nil
}

func (h *memHistory) ReplaceHistory(_ context.Context, user, chatID, _ string, msgs []chat.Message) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.chats[h.key(user, chatID)] = append([]chat.Message(nil), msgs...)
	return nil
}
