package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/chatlock"
)

// retryAfter is what a refused turn is told to wait before trying again:
// how long a turn takes is not known in advance.
const retryAfter = 10 * time.Second

// ChatLocks serialises the turns of a chat: one turn runs, the others wait
// in line, in the order they came, so no two turns ever interleave one
// transcript or share a workspace. NewChatLocks is the in-process
// implementation; a store shared by several servers implements it across
// them (StoreChatLocks: PostgreSQL advisory locks).
type ChatLocks interface {
	// Lock waits until no other turn holds the chat (user, chat), for at
	// most wait, and returns the function that releases it (safe to call
	// more than once). It fails with an error wrapping ErrChatQueueFull
	// when queue turns already wait for the chat, ErrChatWait when the
	// wait passed, and ctx's error when ctx ended first.
	Lock(ctx context.Context, user, chat string, queue int, wait time.Duration) (unlock func(), err error)
}

// Errors of ChatLocks.Lock (the same values as the store's).
var (
	ErrChatQueueFull = chatlock.ErrQueueFull
	ErrChatWait      = chatlock.ErrWait
)

// NewChatLocks returns the in-process ChatLocks: waiting turns queue in
// arrival order.
func NewChatLocks() ChatLocks { return chatlock.New() }

// userSlots counts each user's turns (running or waiting for their chat)
// and terminals, or their terminals alone.
type userSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes one of user's limit slots, or reports false when all are
// taken.
func (u *userSlots) acquire(user string, limit int) (release func(), ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n == nil {
		u.n = map[string]int{}
	}
	if u.n[user] >= limit {
		return nil, false
	}
	u.n[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.n[user]--; u.n[user] <= 0 {
				delete(u.n, user)
			}
		})
	}, true
}

// slotPool bounds the live sandboxes of a pipeline, or its uploads.
// Waiters are served in arrival order. A reload that changes the limit
// starts a new pool; slots of the old one drain as their holders end.
type slotPool struct {
	mu    sync.Mutex
	limit int
	sem   *semaphore.Weighted
}

// tryAcquire takes a slot when one is free now.
func (s *slotPool) tryAcquire(limit int) (func(), bool) {
	s.mu.Lock()
	if s.sem == nil || s.limit != limit {
		s.sem, s.limit = semaphore.NewWeighted(int64(limit)), limit
	}
	sem := s.sem
	s.mu.Unlock()
	if !sem.TryAcquire(1) {
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { sem.Release(1) }) }, true
}

func (s *slotPool) acquire(ctx context.Context, limit int, wait time.Duration) (func(), error) {
	s.mu.Lock()
	if s.sem == nil || s.limit != limit {
		s.sem, s.limit = semaphore.NewWeighted(int64(limit)), limit
	}
	sem := s.sem
	s.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := sem.Acquire(wctx, 1); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, context.DeadlineExceeded
	}
	var once sync.Once
	return func() { once.Do(func() { sem.Release(1) }) }, nil
}

// terminalSlots takes one of user's terminals (limits.terminals_per_user)
// and one of the user's slots, which turns and terminals share
// (limits.turns_per_user), so that no user holds more of the server's
// sandboxes than that. release gives both back.
func (p *Pipeline) terminalSlots(user string, lim assistant.Limits) (release func(), err error) {
	releaseTerm, ok := p.termSlots.acquire(user, lim.TerminalsPerUser)
	if !ok {
		p.metrics.rejected("terminals_per_user")
		return nil, &chat.Error{Code: chat.ErrTooManyTurns, RetryAfter: retryAfter,
			Message: fmt.Sprintf("user %s already has %d terminals open, the most this server allows at once (limits.terminals_per_user): close one first", user, lim.TerminalsPerUser)}
	}
	releaseUser, ok := p.users.acquire(user, lim.TurnsPerUser)
	if !ok {
		releaseTerm()
		p.metrics.rejected("turns_per_user")
		return nil, &chat.Error{Code: chat.ErrTooManyTurns, RetryAfter: retryAfter,
			Message: fmt.Sprintf("user %s already has %d turns and terminals running or waiting, the most this server allows at once (limits.turns_per_user); retry when a turn ends, or close a terminal", user, lim.TurnsPerUser)}
	}
	return func() { releaseUser(); releaseTerm() }, nil
}

// sandboxSlot waits for one of the server's sandbox slots. While it
// waits in line, a progress message says so.
func (t *turn) sandboxSlot(ctx context.Context, lim assistant.Limits) (func(), error) {
	start := time.Now()
	defer t.phase(phaseSandboxWait, start)
	var prog *progress
	release, err := t.p.sandboxSlot(ctx, lim, func() {
		prog = t.startProgress("Waiting for a free sandbox…", map[string]any{"step": "queue", "sandboxes": lim.Sandboxes})
	})
	if prog != nil {
		prog.end()
	}
	return release, err
}

// sandboxSlot waits for one of the server's sandbox slots (a turn's or a
// terminal's; each observes its wait). queued, when set, is called before
// a wait in line (no slot free now).
func (p *Pipeline) sandboxSlot(ctx context.Context, lim assistant.Limits, queued func()) (func(), error) {
	release, ok := p.slots.tryAcquire(lim.Sandboxes)
	var err error
	if !ok {
		if queued != nil {
			queued()
		}
		p.metrics.waiting.Inc()
		p.waits.Add(1)
		release, err = p.slots.acquire(ctx, lim.Sandboxes, lim.SandboxWait)
		p.waits.Add(-1)
		p.metrics.waiting.Dec()
	}
	if err == nil {
		// A turn that ends gives the pool a chance to refill.
		release = func(release func()) func() { return func() { release(); p.pool.poke() } }(release)
	}
	switch {
	case err == nil:
		return release, nil
	case ctx.Err() != nil:
		return nil, chat.AsError(ctx.Err())
	}
	p.metrics.rejected("sandboxes")
	return nil, &chat.Error{Code: chat.ErrServerBusy, RetryAfter: retryAfter, Err: err,
		Message: fmt.Sprintf("the server runs as many sandboxes as it allows (%d, limits.sandboxes) and none became free within %s; retry later", lim.Sandboxes, lim.SandboxWait)}
}
