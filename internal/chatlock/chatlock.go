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
	"slices"
	"sync"
	"time"
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

// lock is one chat's: its holder and its line of waiters, all guarded by
// Local.mu, so that the order turns are counted in is the order they are
// served in.
type lock struct {
	held    bool
	waiters []chan struct{} // closed when the chat is handed to the waiter
	refs    int             // the holder and the waiters
}

// New returns an empty Local.
func New() *Local { return &Local{m: map[key]*lock{}} }

// Lock waits until no other turn holds the chat (user, chat), for at most
// wait (wait <= 0: only a free chat is taken), and returns the function
// that releases it (safe to call more than once). Waiters are served in
// the order they called Lock. It fails with ErrQueueFull when queue turns
// already wait for the chat, ErrWait when the wait passed, and ctx's error
// when ctx ended first.
func (c *Local) Lock(ctx context.Context, user, chat string, queue int, wait time.Duration) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := key{user, chat}
	c.mu.Lock()
	l := c.m[k]
	if l == nil {
		l = &lock{}
		c.m[k] = l
	}
	switch {
	case !l.held:
		l.held = true
		l.refs++
		c.mu.Unlock()
		return c.unlocker(k, l), nil
	case l.refs > queue: // one holds it and queue wait already
		c.mu.Unlock()
		return nil, ErrQueueFull
	case wait <= 0:
		c.mu.Unlock()
		return nil, ErrWait
	}
	handed := make(chan struct{})
	l.waiters = append(l.waiters, handed)
	l.refs++
	c.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case <-handed:
		return c.unlocker(k, l), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = ErrWait
	}
	c.mu.Lock()
	if i := slices.Index(l.waiters, handed); i >= 0 {
		l.waiters = slices.Delete(l.waiters, i, i+1)
		c.dropLocked(k, l)
		c.mu.Unlock()
		return nil, err
	}
	c.mu.Unlock()
	// The chat was handed over as the wait ended: pass it on.
	c.unlocker(k, l)()
	return nil, err
}

// unlocker returns the function that releases l: it hands the chat to the
// first waiter, or frees it. Calling it again does nothing.
func (c *Local) unlocker(k key, l *lock) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(l.waiters) > 0 {
				close(l.waiters[0])
				l.waiters = l.waiters[1:]
			} else {
				l.held = false
			}
			c.dropLocked(k, l)
		})
	}
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

// dropLocked counts a turn of l out, and forgets l after its last; c.mu
// is held.
func (c *Local) dropLocked(k key, l *lock) {
	if l.refs--; l.refs == 0 {
		delete(c.m, k)
	}
}
