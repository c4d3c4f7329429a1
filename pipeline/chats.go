package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/store"
)

// ChatStore lists, renames and deletes the stored chats of a user. When
// Config.History also implements it (*store.Store does), the pipeline's
// chat listing covers every stored chat; without it, only the chats with
// a running turn.
type ChatStore interface {
	ListChats(ctx context.Context, user string) ([]store.ChatInfo, error)
	Chat(ctx context.Context, user, chatID string) (store.ChatInfo, bool, error)
	RenameChat(ctx context.Context, user, chatID, title string) (bool, error)
	DeleteChat(ctx context.Context, user, chatID string) error
}

var _ ChatStore = (*store.Store)(nil)

// ChatInfo describes one of a user's chats: what the store keeps of it,
// and whether a turn runs in it now.
type ChatInfo struct {
	store.ChatInfo
	// Running: a turn of the chat has not sent its done event yet.
	Running bool `json:"running"`
}

// ChatDetail is one chat with its stored history.
type ChatDetail struct {
	ChatInfo
	// History is the stored conversation, oldest first (the running
	// turn's messages are not in it until the turn ends).
	History []chat.Message `json:"history"`
	// Workspace reports whether the chat has a workspace folder.
	Workspace bool `json:"workspace"`
}

// errNoChat is the cause of the error for a chat the user does not have
// (code chat.ErrInvalidRequest, which the HTTP server answers with 404).
func errNoChat(chatID string) error {
	return &chat.Error{Code: chat.ErrInvalidRequest, Message: fmt.Sprintf("no chat %q: GET /api/chats lists yours", chatID), Err: sandbox.ErrNotFound}
}

func (p *Pipeline) chatStore() (ChatStore, bool) {
	cs, ok := p.cfg.History.(ChatStore)
	return cs, ok
}

// running returns the turns of user (of one chat unless chatID is "")
// that run now, oldest first. A skill proposal's test turn is not one of
// the user's chats.
func (p *Pipeline) running(user, chatID string) []*turn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*turn
	for t := range p.active {
		if t.trial == nil && t.req.UserID == user && (chatID == "" || t.req.ChatID == chatID) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// ListChats returns the user's chats, most recently updated first; a chat
// whose first turn still runs is listed too.
func (p *Pipeline) ListChats(ctx context.Context, user string) ([]ChatInfo, error) {
	if err := sandbox.ValidateID("user", user); err != nil {
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	busy := map[string]*turn{}
	for _, t := range p.running(user, "") {
		busy[t.req.ChatID] = t
	}
	var stored []store.ChatInfo
	if cs, ok := p.chatStore(); ok {
		var err error
		if stored, err = cs.ListChats(ctx, user); err != nil {
			return nil, &chat.Error{Code: chat.ErrInternal, Message: "chats unavailable", Err: err}
		}
	}
	out := make([]ChatInfo, 0, len(stored)+len(busy))
	for _, c := range stored {
		t, run := busy[c.ID]
		delete(busy, c.ID)
		if run && c.Title == "" {
			// Claimed by its first turn, which stored nothing yet.
			c.Title = newChatInfo(t).Title
		}
		out = append(out, ChatInfo{ChatInfo: c, Running: run && !t.answered.Load()})
	}
	for _, t := range busy {
		out = append(out, ChatInfo{ChatInfo: newChatInfo(t), Running: !t.answered.Load()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Updated.After(out[j].Updated) })
	return out, nil
}

// newChatInfo describes the chat of a turn that is not stored yet.
func newChatInfo(t *turn) store.ChatInfo {
	info := store.ChatInfo{ID: t.req.ChatID, AssistantID: t.req.AssistantID, Created: t.start, Updated: t.start}
	for _, m := range t.req.Messages {
		if m.Role == chat.RoleUser {
			info.Title = shortTitle(m.Content)
			break
		}
	}
	return info
}

// shortTitle is the start of text, on one line, as the store derives
// titles.
func shortTitle(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(s) > 80 {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:79])) + "…"
	}
	return s
}

// GetChat returns the user's chat with its history. A chat with neither
// a stored record, a running turn nor a workspace is an error whose cause
// is sandbox.ErrNotFound.
func (p *Pipeline) GetChat(ctx context.Context, user, chatID string) (*ChatDetail, error) {
	if err := validateIDs(user, chatID); err != nil {
		return nil, err
	}
	d := &ChatDetail{ChatInfo: ChatInfo{ChatInfo: store.ChatInfo{ID: chatID}}, History: []chat.Message{}}
	found := false
	if cs, ok := p.chatStore(); ok {
		info, ok, err := cs.Chat(ctx, user, chatID)
		if err != nil {
			return nil, &chat.Error{Code: chat.ErrInternal, Message: "chat unavailable", Err: err}
		}
		if ok {
			d.ChatInfo.ChatInfo, found = info, true
		}
	}
	if ts := p.running(user, chatID); len(ts) > 0 {
		d.Running = answering(ts)
		if !found {
			d.ChatInfo.ChatInfo, found = newChatInfo(ts[0]), true
		} else if d.Title == "" {
			d.Title = newChatInfo(ts[0]).Title
		}
	}
	d.Workspace = p.hasWorkspace(user, chatID)
	h, err := p.cfg.History.History(ctx, user, chatID)
	if err != nil {
		return nil, historyError(ctx, err)
	}
	if len(h) > 0 {
		d.History, found = h, true
	}
	if !found && !d.Workspace {
		return nil, errNoChat(chatID)
	}
	return d, nil
}

func (p *Pipeline) hasWorkspace(user, chatID string) bool {
	return p.cfg.Workspaces != nil && p.cfg.Workspaces.Exists(user, chatID)
}

// RenameChat sets the title of the user's stored chat (an empty title
// derives it from the first message again) and returns the chat.
func (p *Pipeline) RenameChat(ctx context.Context, user, chatID, title string) (*ChatInfo, error) {
	if err := validateIDs(user, chatID); err != nil {
		return nil, err
	}
	cs, ok := p.chatStore()
	if !ok {
		return nil, chat.Errorf(chat.ErrInvalidRequest, "this server keeps no chat titles")
	}
	found, err := cs.RenameChat(ctx, user, chatID, title)
	switch {
	case errors.Is(err, store.ErrInvalid):
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: strings.TrimPrefix(err.Error(), "rename chat: "), Err: err}
	case err != nil:
		return nil, &chat.Error{Code: chat.ErrInternal, Message: "chat not renamed", Err: err}
	case !found:
		return nil, errNoChat(chatID)
	}
	info, _, err := cs.Chat(ctx, user, chatID)
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrInternal, Message: "chat unavailable", Err: err}
	}
	return &ChatInfo{ChatInfo: info, Running: answering(p.running(user, chatID))}, nil
}

// answering reports whether any of the turns has not sent its done event
// yet: a chat whose turn answered is no longer running for its client,
// though its sandbox may still be being removed.
func answering(ts []*turn) bool {
	for _, t := range ts {
		if !t.answered.Load() {
			return true
		}
	}
	return false
}

// CancelChat ends the turns of the user's chat, running or waiting for
// the chat, and waits for them to return (their sandboxes are removed by
// then), or for ctx; then it stops the chat's kept sandbox
// (sandbox.keep_alive), so nothing the agent left running goes on after
// its user said stop. It returns how many turns it ended. Each ends with
// the canceled error.
func (p *Pipeline) CancelChat(ctx context.Context, user, chatID string) (int, error) {
	if err := validateIDs(user, chatID); err != nil {
		return 0, err
	}
	ts := p.running(user, chatID)
	for _, t := range ts {
		p.log.Info("turn canceled by its user", "user", user, "chat", chatID, "assistant", t.req.AssistantID)
		t.cancel(context.Canceled)
	}
	for _, t := range ts {
		select {
		case <-t.done:
		case <-ctx.Done():
			return len(ts), fmt.Errorf("canceled turns still ending: %w", ctx.Err())
		}
	}
	// A turn that ended returned its kept sandbox to the idle list first.
	if c := p.kept.take(user, chatID); c != nil {
		p.kept.drop(c)
		p.log.Info("kept chat stopped by its user", "user", user, "chat", chatID, "assistant", c.assistant.ID)
	}
	return len(ts), nil
}

// deleteWait bounds how long DeleteChat waits for the chat's turns and
// terminals to end.
const deleteWait = 30 * time.Second

// DeleteChat removes the user's chat: it ends its running turns, its
// kept sandbox and its terminals, then removes its workspace, its hook
// memory (the chat namespace), the tool calls its user allowed for the
// rest of it and its stored history. A chat that has none of these is an
// error whose cause is sandbox.ErrNotFound; a workspace still held (by a
// request of another process) is one whose cause is sandbox.ErrInUse, and
// nothing else is removed then (code chat_busy).
func (p *Pipeline) DeleteChat(ctx context.Context, user, chatID string) error {
	if err := validateIDs(user, chatID); err != nil {
		return err
	}
	found := false
	cs, hasStore := p.chatStore()
	if hasStore {
		_, ok, err := cs.Chat(ctx, user, chatID)
		if err != nil {
			return &chat.Error{Code: chat.ErrInternal, Message: "chat unavailable", Err: err}
		}
		found = ok
	}
	wctx, cancel := context.WithTimeout(ctx, deleteWait)
	defer cancel()
	if n, err := p.CancelChat(wctx, user, chatID); err != nil {
		return &chat.Error{Code: chat.ErrInternal, Message: "the chat's running turn did not end", Err: err}
	} else if n > 0 {
		found = true
	}
	if n := p.closeTerminals(user, chatID); n > 0 {
		found = true
	}
	if p.hasWorkspace(user, chatID) {
		found = true
		if err := p.cfg.Workspaces.Remove(wctx, user, chatID); err != nil {
			if errors.Is(err, sandbox.ErrInUse) {
				return &chat.Error{Code: chat.ErrChatBusy, Err: err,
					Message: fmt.Sprintf("chat %q's workspace is in use (a request or a terminal of another server holds it): try again when it ends", chatID)}
			}
			return &chat.Error{Code: chat.ErrInternal, Message: "workspace not removed", Err: err}
		}
	}
	n, err := p.forgetChatMemory(ctx, user, chatID)
	if err != nil {
		return &chat.Error{Code: chat.ErrInternal, Message: "chat memory not removed", Err: err}
	}
	found = found || n > 0
	if err := p.approvals.Forget(ctx, user, chatID); err != nil {
		return &chat.Error{Code: chat.ErrInternal, Message: "chat approvals not forgotten", Err: err}
	}
	if hasStore {
		if err := cs.DeleteChat(ctx, user, chatID); err != nil {
			return &chat.Error{Code: chat.ErrInternal, Message: "chat history not removed", Err: err}
		}
	} else if h, err := p.cfg.History.History(ctx, user, chatID); err == nil && len(h) > 0 {
		found = true
		if err := p.cfg.History.ReplaceHistory(ctx, user, chatID, "", nil); err != nil {
			return &chat.Error{Code: chat.ErrInternal, Message: "chat history not removed", Err: err}
		}
	}
	if p.cfg.Checkpoints != nil {
		if err := p.cfg.Checkpoints.ForgetChat(user, chatID); err != nil {
			return &chat.Error{Code: chat.ErrInternal, Message: "chat checkpoints not removed", Err: err}
		}
		p.collectCheckpoints(user)
	}
	if !found {
		return errNoChat(chatID)
	}
	p.log.Info("chat deleted", "user", user, "chat", chatID)
	return nil
}

// forgetChatMemory removes the hook memory of the user's chat (the chat
// namespace) and returns how many keys it held.
func (p *Pipeline) forgetChatMemory(ctx context.Context, user, chatID string) (int, error) {
	owner := jsapi.ChatOwner(user, chatID)
	keys, err := p.cfg.Memory.Keys(ctx, jsapi.NamespaceChat, owner)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := p.cfg.Memory.Del(ctx, jsapi.NamespaceChat, owner, k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}
