// Package chatlock is the in-process lock that serialises the turns of a
// chat: one turn holds the chat, the others wait in line in the order they
// came, with a bounded queue and a bounded wait. The pipeline uses it when
// no store shares locks across servers, and the SQLite store (one server)
// uses it as its chat lock; the PostgreSQL store implements the same
// semantics across servers with advisory locks, returning the same errors.
package chatlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Errors of Lock. Every implementation of a chat lock returns errors that
// wrap these, so callers match them with errors.Is whatever the store.
var (
	// ErrQueueFull: queue turns already wait for the chat.
	ErrQueueFull = errors.New("too many turns wait for this chat")
	// ErrWait: the wait passed before the chat was free.
	ErrWait = errors.New("waited too long for this chat")
)

// Local is the in-process chat lock. The zero value is not usable; use
// New. It is safe for concurrent use.
type Local struct {
	mu sync.Mutex
	m  map[key]*lock
}

type key struct{ user, chat string }

type lock struct {
	sem  *semaphore.Weighted // FIFO: waiters are served in arrival order
	refs int                 // the holder and the waiters
}

// New returns an empty Local.
func New() *Local { return &Local{m: map[key]*lock{}} }

// Lock waits until no other turn holds the chat (user, chat), for at most
// wait (wait <= 0: only a free chat is taken), and returns the function
// that releases it (safe to call more than once). It fails with
// ErrQueueFull when queue turns already wait for the chat, ErrWait when the
// wait passed, and ctx's error when ctx ended first.
func (c *Local) Lock(ctx context.Context, user, chat string, queue int, wait time.Duration) (func(), error) {
	k := key{user, chat}
	c.mu.Lock()
	l := c.m[k]
	if l == nil {
		l = &lock{sem: semaphore.NewWeighted(1)}
		c.m[k] = l
	}
	if l.refs > queue { // one holds it and queue wait already
		c.mu.Unlock()
		return nil, ErrQueueFull
	}
	l.refs++
	c.mu.Unlock()

	var err error
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case wait <= 0:
		if !l.sem.TryAcquire(1) {
			err = ErrWait
		}
	default:
		wctx, cancel := context.WithTimeoutCause(ctx, wait, ErrWait)
		err = l.sem.Acquire(wctx, 1)
		cancel()
	}
	if err != nil {
		c.drop(k, l)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrWait
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.sem.Release(1)
			c.drop(k, l)
		})
	}, nil
}

// Turns is the number of turns that hold the chat or wait for it.
func (c *Local) Turns(user, chat string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.m[key{user, chat}]; l != nil {
		return l.refs
	}
	return 0
}

// Len is the number of chats held or waited for.
func (c *Local) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *Local) drop(k key, l *lock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(c.m, k)
	}
}
