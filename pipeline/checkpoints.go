package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/checkpoint"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// Checkpoints: after each stored turn of a chat (one that failed too), the
// pipeline records the chat's state, its workspace files (the CLI's
// session with them: it is in the workspace's .agentbox folder), its hook
// memory (the chat namespace) and its history, as a checkpoint of
// Config.Checkpoints. Rewind brings a chat back to one of its
// checkpoints; Fork starts a new chat from one. app.jsonc's
// cleanup.checkpoints bounds how many each chat keeps.

// CheckpointInfo is one checkpoint of a chat.
type CheckpointInfo struct {
	checkpoint.Entry
	// Current: the checkpoint is on the chat's current branch (the chat
	// was rewound past those that are not); Head: the chat is at it.
	Current bool `json:"current"`
	Head    bool `json:"head,omitempty"`
}

// Target names a checkpoint of a chat: the state after turn Turn on the
// chat's current branch (turns counted from 1, in the order of the chat's
// user messages), the checkpoint ID (of any branch), or the one of the
// turn that answered the Responses API response Response.
type Target struct {
	Turn     int    `json:"turn,omitempty"`
	ID       string `json:"checkpoint,omitempty"`
	Response string `json:"-"`
}

// Rewound is what Rewind did.
type Rewound struct {
	ChatID     string `json:"chat_id"`
	Checkpoint string `json:"checkpoint"`
	Turn       int    `json:"turn"`
	// Messages is the chat's history length now.
	Messages int `json:"messages"`
	// Written and Removed count the workspace entries the rewind wrote
	// and removed.
	Written int64 `json:"written"`
	Removed int64 `json:"removed"`
}

// keepCheckpoints is how many checkpoints a chat keeps (0: none are
// taken).
func (p *Pipeline) keepCheckpoints() int {
	if p.cfg.Checkpoints == nil {
		return 0
	}
	return p.App().Config.Cleanup.Checkpoints
}

// checkpoint records the chat's state after the turn was stored. A
// failure to record it is logged and noticed: the turn stands.
func (t *turn) checkpoint(ctx context.Context, failed bool) {
	p := t.p
	keep := p.keepCheckpoints()
	if keep == 0 || t.req.Ephemeral || t.trial != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	user, chatID := t.req.UserID, t.req.ChatID
	if t.kept != nil && t.kept.cli != nil && p.cfg.Workspaces != nil {
		// A kept CLI writes its session transcript after its answer, as
		// it goes: the checkpoint waits for the writes to settle, or a
		// rewind to this turn would resume a session without its end.
		if dir, err := p.cfg.Workspaces.Path(user, chatID); err == nil {
			settle(ctx, filepath.Join(dir, agentcli.StateRoot), transcriptQuiet, transcriptSettle)
		}
	}
	e := checkpoint.Entry{Failed: failed, Response: t.req.ResponseID}
	if err := p.capture(ctx, user, chatID, t.asst.Sandbox != nil, &e, keep); err != nil {
		t.checkpointFailed(err)
		return
	}
	p.log.Debug("checkpoint", "user", user, "chat", chatID, "checkpoint", e.ID, "turn", e.Turn, "files", e.Files, "added", e.Added)
}

// checkpointFailed logs and notices a checkpoint that was not taken.
func (t *turn) checkpointFailed(err error) {
	t.p.log.Error("checkpoint not taken", "user", t.req.UserID, "chat", t.req.ChatID, "error", err)
	chat.Notice(t.emit, t.nextID("notice"), "checkpoint_not_saved", "this turn cannot be rewound to: its checkpoint was not saved: "+err.Error())
}

// startFrom runs when the turn holds its chat, before it reads the
// history: an edit (Request.Edit) first brings the chat back to the state
// before the turn it edits; then the state the turn starts from is
// recorded (a Before checkpoint) unless it is the chat's last checkpoint
// already, so that whatever the turn does, and however it ends, the state
// it found can be restored.
func (t *turn) startFrom(ctx context.Context) error {
	p, user, chatID := t.p, t.req.UserID, t.req.ChatID
	keep := p.keepCheckpoints()
	if t.req.Edit < 0 || (t.req.Edit > 0 && (t.req.Continue || t.req.Ephemeral || len(split(t.req.Messages).history) > 0)) {
		return badRequest("edit %d: an edit names a turn from 1 and sends only its new message (no history, not ephemeral)", t.req.Edit)
	}
	if t.req.Edit > 0 {
		if err := p.errNoCheckpoints(); err != nil {
			return err
		}
		if err := p.idle(user, chatID); err != nil {
			return err
		}
		l, err := p.cfg.Checkpoints.Log(ctx, user, chatID)
		if err != nil {
			return &chat.Error{Code: chat.ErrInternal, Message: "checkpoints unavailable", Err: err}
		}
		e := l.BeforeTurn(t.req.Edit)
		if e == nil {
			return &chat.Error{Code: chat.ErrInvalidRequest, Err: sandbox.ErrNotFound,
				Message: fmt.Sprintf("chat %q has no checkpoint of the state before turn %d (no such turn on its current branch, or its checkpoints were taken before this server kept them, or dropped by cleanup.checkpoints): GET /api/chats/%s/checkpoints lists them", chatID, t.req.Edit, chatID)}
		}
		if _, err := p.rewindTo(ctx, user, chatID, t.asst.ID, e); err != nil {
			return err
		}
	}
	if keep == 0 || t.req.Ephemeral || t.trial != nil || t.nested {
		return nil
	}
	withFiles := t.asst.Sandbox != nil && p.cfg.Workspaces != nil && p.cfg.Workspaces.Exists(user, chatID)
	if withFiles {
		// Mounted while it is read: the sandbox acquires it again.
		_, release, err := p.acquireWorkspace(ctx, user, chatID, 0)
		if err != nil {
			return err
		}
		defer release()
	}
	e := checkpoint.Entry{Before: true}
	if err := p.capture(ctx, user, chatID, withFiles, &e, keep); err != nil {
		if ctx.Err() != nil {
			return chat.AsError(context.Cause(ctx))
		}
		t.checkpointFailed(err)
	}
	return nil
}

// capture records the chat's state (its workspace when withFiles) as e,
// the head of its log, keeping keep checkpoints; those dropped are
// collected in the background. It fills e's id, turn, time and sizes.
func (p *Pipeline) capture(ctx context.Context, user, chatID string, withFiles bool, e *checkpoint.Entry, keep int) error {
	start := time.Now()
	src := checkpoint.Source{}
	if withFiles && p.cfg.Workspaces != nil && p.cfg.Workspaces.Exists(user, chatID) {
		dir, err := p.cfg.Workspaces.Path(user, chatID)
		if err != nil {
			return err
		}
		src.Dir = dir
	}
	mem, err := p.chatMemory(ctx, user, chatID)
	if err != nil {
		return fmt.Errorf("chat memory: %w", err)
	}
	src.Memory = mem
	h, err := p.cfg.History.History(ctx, user, chatID)
	if err != nil {
		return fmt.Errorf("chat history: %w", err)
	}
	if src.History, err = json.Marshal(h); err != nil {
		return err
	}
	cp, done, err := p.cfg.Checkpoints.Capture(ctx, user, chatID, src)
	if err != nil {
		return err
	}
	defer done()
	e.ID, e.Turn, e.Time, e.Files, e.Bytes, e.Added = cp.ID, userTurns(h), start, cp.Files, cp.Bytes, cp.Added
	_, dropped, err := p.cfg.Checkpoints.Record(ctx, user, chatID, *e, keep)
	if err != nil {
		return err
	}
	p.metrics.checkpointTaken(time.Since(start), cp.Added)
	if dropped > 0 {
		p.collectCheckpoints(user)
	}
	return nil
}

// collectCheckpoints frees, in the background, what the user's dropped
// checkpoints alone held.
func (p *Pipeline) collectCheckpoints(user string) {
	p.measuring.Add(1)
	go func() {
		defer p.measuring.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		col, err := p.cfg.Checkpoints.CollectLogs(ctx, user)
		if err != nil {
			p.log.Error("checkpoints not collected", "user", user, "error", err)
			return
		}
		p.log.Debug("checkpoints collected", "user", user, "objects", col.Objects, "bytes", col.Bytes)
	}()
}

// userTurns counts the user messages of h: its turns.
func userTurns(h []chat.Message) int {
	n := 0
	for _, m := range h {
		if m.Role == chat.RoleUser {
			n++
		}
	}
	return n
}

// chatMemory returns the hook memory of the user's chat (its chat
// namespace).
func (p *Pipeline) chatMemory(ctx context.Context, user, chatID string) (map[string]json.RawMessage, error) {
	owner := jsapi.ChatOwner(user, chatID)
	keys, err := p.cfg.Memory.Keys(ctx, jsapi.NamespaceChat, owner)
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		v, ok, err := p.cfg.Memory.Get(ctx, jsapi.NamespaceChat, owner, k)
		if err != nil {
			return nil, err
		}
		if ok {
			out[k] = v
		}
	}
	return out, nil
}

// setChatMemory makes the chat's hook memory mem.
func (p *Pipeline) setChatMemory(ctx context.Context, user, chatID string, mem map[string]json.RawMessage) error {
	owner := jsapi.ChatOwner(user, chatID)
	keys, err := p.cfg.Memory.Keys(ctx, jsapi.NamespaceChat, owner)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, ok := mem[k]; !ok {
			if err := p.cfg.Memory.Del(ctx, jsapi.NamespaceChat, owner, k); err != nil {
				return err
			}
		}
	}
	for k, v := range mem {
		if err := p.cfg.Memory.Set(ctx, jsapi.NamespaceChat, owner, k, v); err != nil {
			return err
		}
	}
	return nil
}

// errNoCheckpoints refuses rewinds and forks on a server that keeps no
// checkpoints.
func (p *Pipeline) errNoCheckpoints() error {
	if p.keepCheckpoints() == 0 {
		return chat.Errorf(chat.ErrInvalidRequest, "this server keeps no checkpoints (app.jsonc cleanup.checkpoints is 0, or it has no data root)")
	}
	return nil
}

// Checkpoints lists the user's chat's checkpoints, oldest first.
func (p *Pipeline) Checkpoints(ctx context.Context, user, chatID string) ([]CheckpointInfo, error) {
	l, err := p.listedLog(ctx, user, chatID)
	if err != nil {
		return nil, err
	}
	cur := map[string]bool{}
	for _, e := range l.Current() {
		cur[e.ID] = true
	}
	out := make([]CheckpointInfo, 0, len(l.Entries))
	for _, e := range l.Entries {
		out = append(out, CheckpointInfo{Entry: e, Current: cur[e.ID], Head: e.ID == l.Head})
	}
	return out, nil
}

// listedLog is the user's chat's checkpoint log for a listing: an empty
// one is the chat's only when the chat exists (else its not-found error).
func (p *Pipeline) listedLog(ctx context.Context, user, chatID string) (*checkpoint.ChatLog, error) {
	if err := validateIDs(user, chatID); err != nil {
		return nil, err
	}
	if err := p.errNoCheckpoints(); err != nil {
		return nil, err
	}
	l, err := p.cfg.Checkpoints.Log(ctx, user, chatID)
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrInternal, Message: "checkpoints unavailable", Err: err}
	}
	if len(l.Entries) == 0 {
		if _, err := p.GetChat(ctx, user, chatID); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// find resolves to in the chat's log.
func (p *Pipeline) find(ctx context.Context, user, chatID string, to Target) (*checkpoint.ChatLog, *checkpoint.Entry, error) {
	if to.Response != "" {
		l, err := p.cfg.Checkpoints.Log(ctx, user, chatID)
		if err != nil {
			return nil, nil, &chat.Error{Code: chat.ErrInternal, Message: "checkpoints unavailable", Err: err}
		}
		if e := l.FindResponse(to.Response); e != nil {
			return l, e, nil
		}
		return nil, nil, &chat.Error{Code: chat.ErrInvalidRequest, Err: sandbox.ErrNotFound,
			Message: fmt.Sprintf("chat %q has no checkpoint of response %s (taken before checkpoints were kept, or dropped by cleanup.checkpoints)", chatID, to.Response)}
	}
	if (to.Turn == 0) == (to.ID == "") {
		return nil, nil, chat.Errorf(chat.ErrInvalidRequest, "name a turn (\"turn\": N, from 1) or a checkpoint (\"checkpoint\": ID from GET /api/chats/%s/checkpoints), one of them", chatID)
	}
	if to.Turn < 0 {
		return nil, nil, chat.Errorf(chat.ErrInvalidRequest, "turn %d: turns are counted from 1", to.Turn)
	}
	l, err := p.cfg.Checkpoints.Log(ctx, user, chatID)
	if err != nil {
		return nil, nil, &chat.Error{Code: chat.ErrInternal, Message: "checkpoints unavailable", Err: err}
	}
	var e *checkpoint.Entry
	if to.ID != "" {
		if _, err := checkpoint.ParseHash(to.ID); err != nil {
			return nil, nil, chat.Errorf(chat.ErrInvalidRequest, "%v", err)
		}
		e = l.Find(to.ID)
	} else {
		e = l.AtTurn(to.Turn)
	}
	if e == nil {
		what := fmt.Sprintf("turn %d", to.Turn)
		if to.ID != "" {
			what = "checkpoint " + to.ID
		}
		return nil, nil, &chat.Error{Code: chat.ErrInvalidRequest, Err: sandbox.ErrNotFound,
			Message: fmt.Sprintf("chat %q has no checkpoint of %s (never taken, or dropped by cleanup.checkpoints): GET /api/chats/%s/checkpoints lists them", chatID, what, chatID)}
	}
	return l, e, nil
}

// rewindWait bounds how long a rewind or fork waits for the chat's turn
// to end (one that answered and is removing its sandbox, most often).
const rewindWait = 15 * time.Second

// lockIdle holds the user's chat for a rewind: its running turn must end
// within branchWait (else chat_busy), then it must be idle (idle).
func (p *Pipeline) lockIdle(ctx context.Context, user, chatID string) (func(), error) {
	unlock, err := p.lockChat(ctx, user, chatID, "rewind")
	if err != nil {
		return nil, err
	}
	if err := p.idle(user, chatID); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// lockChat holds the user's chat for a rewind or fork (what): its running
// turn must end within branchWait, else chat_busy.
func (p *Pipeline) lockChat(ctx context.Context, user, chatID, what string) (func(), error) {
	unlock, err := p.chatLocks.Lock(ctx, user, chatID, 1, p.branchWait)
	if errors.Is(err, ErrChatQueueFull) || errors.Is(err, ErrChatWait) {
		return nil, &chat.Error{Code: chat.ErrChatBusy, RetryAfter: retryAfter, Err: err,
			Message: fmt.Sprintf("chat %q has a turn running that did not end within %s: %s it once the turn ended (or cancel it: POST /api/chats/%s/cancel)", chatID, p.branchWait, what, chatID)}
	}
	if err != nil {
		return nil, chat.AsError(err)
	}
	return unlock, nil
}

// idle readies the chat, whose lock the caller holds, for a change of its
// state: no terminal may be open in it (chat_busy), and its kept sandbox
// is stopped (its CLI holds the session being replaced).
func (p *Pipeline) idle(user, chatID string) error {
	if p.hasTerminals(user, chatID) {
		return &chat.Error{Code: chat.ErrChatBusy, Message: fmt.Sprintf("chat %q has a terminal open: close it before a rewind or an edit", chatID)}
	}
	if c := p.kept.take(user, chatID); c != nil {
		p.kept.drop(c)
	}
	return nil
}

// Rewind brings the user's chat back to the checkpoint to names: its
// workspace files (with the CLI's session), its hook memory and its
// history. The checkpoints after it stay, on another branch, until
// retention drops them: a rewind to one of them goes forward again. A
// running turn is waited for (rewindWait), then refused (chat_busy).
func (p *Pipeline) Rewind(ctx context.Context, user, chatID string, to Target) (*Rewound, error) {
	if err := validateIDs(user, chatID); err != nil {
		return nil, err
	}
	if err := p.errNoCheckpoints(); err != nil {
		return nil, err
	}
	unlock, err := p.lockIdle(ctx, user, chatID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	_, e, err := p.find(ctx, user, chatID, to)
	if err != nil {
		return nil, err
	}
	info, _, err := p.chatInfo(ctx, user, chatID)
	if err != nil {
		return nil, err
	}
	return p.rewindTo(ctx, user, chatID, info.AssistantID, e)
}

// rewindTo brings the chat, which the caller holds idle, to checkpoint e
// of its log and makes e its head.
func (p *Pipeline) rewindTo(ctx context.Context, user, chatID, assistantID string, e *checkpoint.Entry) (*Rewound, error) {
	out, err := p.restore(ctx, user, chatID, assistantID, e.ID)
	if err != nil {
		return nil, err
	}
	if err := p.cfg.Checkpoints.SetHead(ctx, user, chatID, e.ID); err != nil {
		return nil, &chat.Error{Code: chat.ErrInternal, Message: "checkpoint head not saved", Err: err}
	}
	out.ChatID, out.Checkpoint, out.Turn = chatID, e.ID, e.Turn
	p.log.Info("chat rewound", "user", user, "chat", chatID, "checkpoint", e.ID, "turn", e.Turn, "written", out.Written, "removed", out.Removed)
	return out, nil
}

// chatInfo returns what the store keeps of the chat (its assistant).
func (p *Pipeline) chatInfo(ctx context.Context, user, chatID string) (ChatInfo, bool, error) {
	cs, ok := p.chatStore()
	if !ok {
		return ChatInfo{}, false, nil
	}
	info, found, err := cs.Chat(ctx, user, chatID)
	if err != nil {
		return ChatInfo{}, false, &chat.Error{Code: chat.ErrInternal, Message: "chat unavailable", Err: err}
	}
	return ChatInfo{ChatInfo: info}, found, nil
}

// restore makes the chat (user, chatID) hold checkpoint id: files (when
// the checkpoint has some, into the chat's workspace, made when missing
// within the user's limits), memory and history.
func (p *Pipeline) restore(ctx context.Context, user, chatID, assistantID, id string) (*Rewound, error) {
	st, err := p.cfg.Checkpoints.State(ctx, user, id)
	if err != nil {
		return nil, checkpointError(err)
	}
	var h []chat.Message
	if len(st.History) > 0 {
		if err := json.Unmarshal(st.History, &h); err != nil {
			return nil, &chat.Error{Code: chat.ErrInternal, Message: "checkpoint history unreadable", Err: err}
		}
	}
	out := &Rewound{Messages: len(h)}
	// A checkpoint without files of a sandboxed chat is a state before
	// its workspace was made (its first turn's Before): restored, the
	// workspace is emptied.
	a := p.App().Assistants[assistantID]
	empty := a != nil && a.Sandbox != nil && p.cfg.Workspaces != nil && p.cfg.Workspaces.Exists(user, chatID)
	if (st.Workspace || empty) && p.cfg.Workspaces != nil {
		ws, release, err := p.acquireWorkspace(ctx, user, chatID, 0)
		if err != nil {
			return nil, err
		}
		r, err := p.cfg.Checkpoints.Restore(ctx, user, chatID, id, ws.Dir())
		release()
		if err != nil {
			return nil, checkpointError(err)
		}
		out.Written, out.Removed = r.Written, r.Removed
	}
	if err := p.setChatMemory(ctx, user, chatID, st.Memory); err != nil {
		return nil, &chat.Error{Code: chat.ErrInternal, Message: "chat memory not restored", Err: err}
	}
	if err := p.cfg.History.ReplaceHistory(ctx, user, chatID, assistantID, h); err != nil {
		return nil, historyError(ctx, err)
	}
	return out, nil
}

// checkpointError is a failed read or restore of a checkpoint.
func checkpointError(err error) error {
	var ce *chat.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, checkpoint.ErrNotFound):
		return &chat.Error{Code: chat.ErrInvalidRequest, Err: sandbox.ErrNotFound, Message: "the checkpoint's files are gone (removed by cleanup.checkpoints)"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return chat.AsError(err)
	case errors.Is(err, os.ErrNotExist):
		return &chat.Error{Code: chat.ErrSandbox, Message: "workspace unavailable: " + err.Error(), Err: err}
	}
	return &chat.Error{Code: chat.ErrInternal, Message: "checkpoint not restored: " + err.Error(), Err: err}
}

// Fork starts a new chat of the user from the checkpoint to names of the
// chat chatID: its own workspace (a copy of the checkpoint's files, the
// CLI's session with them), hook memory and history, and the checkpoints
// that led to it. The new chat's CLI goes on from a fork of the parent's
// session (agentcli.Prepared.Forked). A running turn of the parent is
// waited for (rewindWait), then the fork is refused (chat_busy); the
// parent is not touched. It returns the new chat's id.
func (p *Pipeline) Fork(ctx context.Context, user, chatID string, to Target) (string, error) {
	if err := validateIDs(user, chatID); err != nil {
		return "", err
	}
	if err := p.errNoCheckpoints(); err != nil {
		return "", err
	}
	unlock, err := p.lockChat(ctx, user, chatID, "fork")
	if err != nil {
		return "", err
	}
	defer unlock()
	l, e, err := p.find(ctx, user, chatID, to)
	if err != nil {
		return "", err
	}
	info, _, err := p.chatInfo(ctx, user, chatID)
	if err != nil {
		return "", err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	newID := "chat-" + hex.EncodeToString(b[:])
	// The new chat's checkpoints: e and its ancestors.
	line := (&checkpoint.ChatLog{Head: e.ID, Entries: l.Entries}).Current()
	if _, err := p.restore(ctx, user, newID, info.AssistantID, e.ID); err != nil {
		if p.cfg.Workspaces != nil && p.cfg.Workspaces.Exists(user, newID) {
			if rerr := p.cfg.Workspaces.Remove(context.WithoutCancel(ctx), user, newID); rerr != nil {
				p.log.Error("half-made fork's workspace not removed", "user", user, "chat", newID, "error", rerr)
			}
		}
		return "", err
	}
	if err := p.cfg.Checkpoints.StartLog(ctx, user, newID, line, append([]string{chatID}, l.Forked...)); err != nil {
		return "", &chat.Error{Code: chat.ErrInternal, Message: "the fork's checkpoints not saved", Err: err}
	}
	p.log.Info("chat forked", "user", user, "chat", chatID, "fork", newID, "checkpoint", e.ID, "turn", e.Turn)
	return newID, nil
}

// forkedFrom returns the chats the user's chat was forked from, its parent
// first (none when it is no fork, or its checkpoint log cannot be read).
func (p *Pipeline) forkedFrom(ctx context.Context, user, chatID string) []string {
	if p.cfg.Checkpoints == nil {
		return nil
	}
	l, err := p.cfg.Checkpoints.Log(ctx, user, chatID)
	if err != nil {
		p.log.Warn("checkpoint log unreadable: the fork's CLI starts a session of its own", "user", user, "chat", chatID, "error", err)
		return nil
	}
	return l.Forked
}

// Branches returns the versions of each turn of the chat's current
// branch: the turns sent again from the same state (an edited message, a
// turn after a rewind), each with the newest state of its branch.
func (p *Pipeline) Branches(ctx context.Context, user, chatID string) ([]checkpoint.TurnVersions, error) {
	l, err := p.listedLog(ctx, user, chatID)
	if err != nil {
		return nil, err
	}
	out := l.Branches()
	if out == nil {
		out = []checkpoint.TurnVersions{}
	}
	return out, nil
}

// Switch makes version (from 1) of turn the chat's current one: the
// chat is rewound to the newest state of that version's branch (Rewind,
// with its waits and refusals).
func (p *Pipeline) Switch(ctx context.Context, user, chatID string, turn, version int) (*Rewound, error) {
	if turn < 1 || version < 1 {
		return nil, chat.Errorf(chat.ErrInvalidRequest, "name a turn and one of its versions, both counted from 1 (GET /api/chats/%s/branches lists them)", chatID)
	}
	bs, err := p.Branches(ctx, user, chatID)
	if err != nil {
		return nil, err
	}
	for _, tv := range bs {
		if tv.Turn != turn {
			continue
		}
		if version > len(tv.Versions) {
			return nil, chat.Errorf(chat.ErrInvalidRequest, "turn %d of chat %q has %d versions, not %d", turn, chatID, len(tv.Versions), version)
		}
		return p.Rewind(ctx, user, chatID, Target{ID: tv.Versions[version-1].Tip})
	}
	return nil, &chat.Error{Code: chat.ErrInvalidRequest, Err: sandbox.ErrNotFound,
		Message: fmt.Sprintf("chat %q has no turn %d with checkpoints on its current branch (GET /api/chats/%s/branches lists them)", chatID, turn, chatID)}
}

// How long a kept CLI's state folder must stay unchanged before its
// turn's checkpoint is taken, and the longest the checkpoint waits.
const (
	transcriptQuiet  = 500 * time.Millisecond
	transcriptSettle = 5 * time.Second
)

// settle waits until nothing under dir has changed (in size or
// modification time) for quiet, at most max.
func settle(ctx context.Context, dir string, quiet, max time.Duration) {
	deadline := time.Now().Add(max)
	last, since := stateOf(dir), time.Now()
	tick := time.NewTicker(quiet / 5)
	defer tick.Stop()
	for time.Since(since) < quiet && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if now := stateOf(dir); now != last {
			last, since = now, time.Now()
		}
	}
}

// stateOf sums the sizes and the latest modification time of the files
// under dir ("" when it cannot be read).
func stateOf(dir string) string {
	var size int64
	var latest time.Time
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			size += info.Size()
			if info.ModTime().After(latest) {
				latest = info.ModTime()
			}
		}
		return nil
	})
	if err != nil {
		return ""
	}
	return fmt.Sprint(size, latest.UnixNano())
}
