package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Entry is one checkpoint in a chat's log.
type Entry struct {
	// ID names the checkpoint.
	ID string `json:"id"`
	// Parent is the checkpoint the chat was at when this one was taken
	// ("": the chat's first).
	Parent string `json:"parent,omitempty"`
	// Turn is the number of user messages in the checkpoint's history:
	// the state after turn Turn (before it, when Failed).
	Turn int `json:"turn"`
	// Failed marks the state after a turn that failed (its history
	// holds the turn's message and error).
	Failed bool `json:"failed,omitempty"`
	// Before marks the state a turn started from, recorded when it was
	// not the chat's last checkpoint already (the chat's first turn,
	// files uploaded or changed in a terminal since its last turn): with
	// it a failed turn, or an edited message, goes back to exactly what
	// the turn found. Turn is then the turns before it.
	Before bool `json:"before,omitempty"`
	// Response is the Responses API response the turn answered ("": none).
	Response string `json:"response,omitempty"`
	// Time is when it was taken.
	Time time.Time `json:"time"`
	// Files and Bytes describe its workspace; Added is what its capture
	// stored.
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
	Added int64 `json:"added"`
}

// ChatLog is a chat's checkpoints, oldest first, and the one the chat is
// at (Head). Rewinding moves the head back; the checkpoints after it stay
// (another branch) until retention drops them.
type ChatLog struct {
	Head    string  `json:"head,omitempty"`
	Entries []Entry `json:"entries"`
	// Forked names the chats this one was forked from, its parent first:
	// a fork's workspace holds their CLI sessions, which its CLI goes on
	// from.
	Forked []string `json:"forked,omitempty"`
}

// FindResponse returns the entry of the turn that answered the Responses
// API response id, or nil.
func (l *ChatLog) FindResponse(id string) *Entry {
	for i := range l.Entries {
		if l.Entries[i].Response == id {
			return &l.Entries[i]
		}
	}
	return nil
}

// Find returns the entry of checkpoint id, or nil.
func (l *ChatLog) Find(id string) *Entry {
	for i := range l.Entries {
		if l.Entries[i].ID == id {
			return &l.Entries[i]
		}
	}
	return nil
}

// Current returns the checkpoints of the chat's current branch, oldest
// first: the head and its ancestors still in the log.
func (l *ChatLog) Current() []Entry {
	var out []Entry
	seen := map[string]bool{}
	for id := l.Head; id != "" && !seen[id]; {
		seen[id] = true
		e := l.Find(id)
		if e == nil {
			break
		}
		out = append(out, *e)
		id = e.Parent
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// AtTurn returns the checkpoint after turn n on the chat's current branch
// (the newest of that turn that did not fail), or nil.
func (l *ChatLog) AtTurn(n int) *Entry {
	cur := l.Current()
	for i := len(cur) - 1; i >= 0; i-- {
		if cur[i].Turn == n && !cur[i].Failed {
			return l.Find(cur[i].ID)
		}
	}
	return nil
}

const dirChats = "chats"

func (u *userStore) logPath(chat string) string { return u.path(dirChats, chat+".json") }

// Log returns the user's chat's checkpoint log (empty when it has none).
func (s *Store) Log(ctx context.Context, user, chat string) (*ChatLog, error) {
	if err := checkID("chat", chat); err != nil {
		return nil, err
	}
	u, err := s.user(user)
	if err != nil {
		return nil, err
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return u.readLog(chat)
}

func (u *userStore) readLog(chat string) (*ChatLog, error) {
	l := &ChatLog{Entries: []Entry{}}
	raw, err := os.ReadFile(u.logPath(chat))
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint log: %w", err)
	}
	if err := json.Unmarshal(raw, l); err != nil {
		return nil, fmt.Errorf("%w: checkpoint log of chat %s: %v", ErrCorrupt, chat, err)
	}
	return l, nil
}

func (u *userStore) writeLog(chat string, l *ChatLog) error {
	if err := os.Mkdir(u.path(dirChats), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("checkpoint log: %w", err)
	}
	raw, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("checkpoint log: %w", err)
	}
	f, err := u.tempFile("log-")
	if err != nil {
		return fmt.Errorf("checkpoint log: %w", err)
	}
	_, err = f.Write(raw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), u.logPath(chat))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("checkpoint log: %w", err)
	}
	return syncDir(u.path(dirChats))
}

// updateLog changes the chat's log with fn under the user's shared lock
// (Collect reads the logs under the exclusive one).
func (s *Store) updateLog(ctx context.Context, user, chat string, fn func(*ChatLog) error) (*ChatLog, error) {
	if err := checkID("chat", chat); err != nil {
		return nil, err
	}
	u, err := s.user(user)
	if err != nil {
		return nil, err
	}
	unlock, err := u.lock(ctx, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	s.logMu.Lock()
	defer s.logMu.Unlock()
	l, err := u.readLog(chat)
	if err != nil {
		return nil, err
	}
	if err := fn(l); err != nil {
		return nil, err
	}
	return l, u.writeLog(chat, l)
}

// Record adds e to the chat's log as its head (its parent is the previous
// head, unless set), then drops the oldest entries beyond keep (0: no
// bound; never the head). A state the log holds already (the same id) is
// not added again: it becomes the head, where it is in the log; a Before
// state that is the head changes nothing. It returns the log and how many
// entries it dropped: Collect frees what only they held.
func (s *Store) Record(ctx context.Context, user, chat string, e Entry, keep int) (*ChatLog, int, error) {
	if _, err := ParseHash(e.ID); err != nil {
		return nil, 0, err
	}
	dropped := 0
	l, err := s.updateLog(ctx, user, chat, func(l *ChatLog) error {
		if l.Find(e.ID) != nil {
			l.Head = e.ID
			return nil
		}
		if e.Parent == "" {
			e.Parent = l.Head
		}
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		l.Entries = append(l.Entries, e)
		l.Head = e.ID
		dropped = l.trim(keep)
		return nil
	})
	return l, dropped, err
}

// trim drops the oldest entries beyond keep, never the head.
func (l *ChatLog) trim(keep int) int {
	if keep <= 0 || len(l.Entries) <= keep {
		return 0
	}
	n := len(l.Entries) - keep
	out := l.Entries[:0]
	dropped := 0
	for _, e := range l.Entries {
		if dropped < n && e.ID != l.Head {
			dropped++
			continue
		}
		out = append(out, e)
	}
	l.Entries = out
	return dropped
}

// SetHead makes checkpoint id, which must be in the chat's log, its head.
func (s *Store) SetHead(ctx context.Context, user, chat, id string) error {
	_, err := s.updateLog(ctx, user, chat, func(l *ChatLog) error {
		if l.Find(id) == nil {
			return fmt.Errorf("%w: checkpoint %s of chat %s", ErrNotFound, id, chat)
		}
		l.Head = id
		return nil
	})
	return err
}

// StartLog gives the chat (a new fork) the log entries, head last, and
// the chats it was forked from, its parent first.
func (s *Store) StartLog(ctx context.Context, user, chat string, entries []Entry, forked []string) error {
	if len(entries) == 0 {
		return fmt.Errorf("%w: a log of no checkpoints", ErrInvalid)
	}
	_, err := s.updateLog(ctx, user, chat, func(l *ChatLog) error {
		l.Entries = append([]Entry(nil), entries...)
		l.Head = entries[len(entries)-1].ID
		l.Forked = append([]string(nil), forked...)
		return nil
	})
	return err
}

// logRoots lists every checkpoint of the user's chats' logs (Collect's
// roots).
func (u *userStore) logRoots() ([]string, error) {
	ents, err := os.ReadDir(u.path(dirChats))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint logs: %w", err)
	}
	var out []string
	for _, e := range ents {
		chat, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || checkID("chat", chat) != nil {
			continue
		}
		l, err := u.readLog(chat)
		if err != nil {
			// Kept whole: an unreadable log must not free its objects.
			return nil, err
		}
		for _, e := range l.Entries {
			out = append(out, e.ID)
		}
	}
	return out, nil
}

// CollectLogs is Collect with the checkpoints of the user's chats' logs as
// its roots.
func (s *Store) CollectLogs(ctx context.Context, user string) (*Collected, error) {
	u, err := s.user(user)
	if err != nil {
		return nil, err
	}
	return s.Collect(ctx, user, func(context.Context) ([]string, error) {
		s.logMu.Lock()
		defer s.logMu.Unlock()
		return u.logRoots()
	})
}

// removeLog removes the chat's log.
func (u *userStore) removeLog(chat string) error {
	if err := os.Remove(u.logPath(chat)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint log: %w", err)
	}
	return nil
}
