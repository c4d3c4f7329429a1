package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/store"
)

// testChatLock: a held chat refuses a second turn when its queue is full
// and makes a waiting one wait until the wait passes; other chats and
// users are independent; unlock is idempotent and frees the chat.
func testChatLock(t *testing.T, o Opener) {
	s := o.Open(t)
	unlock, err := s.LockChat(bg, "u", "c", 0, time.Second)
	must(t, err)
	if _, err := s.LockChat(bg, "u", "c", 0, time.Second); !errors.Is(err, store.ErrChatQueueFull) {
		t.Fatalf("queue 0, chat held: %v, want ErrChatQueueFull", err)
	}
	t0 := time.Now()
	if _, err := s.LockChat(bg, "u", "c", 1, 300*time.Millisecond); !errors.Is(err, store.ErrChatWait) {
		t.Fatalf("chat held past the wait: %v, want ErrChatWait", err)
	}
	if d := time.Since(t0); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("a 300ms wait took %s", d)
	}
	if _, err := s.LockChat(bg, "u", "c", 1, 0); !errors.Is(err, store.ErrChatWait) {
		t.Errorf("no wait, chat held: %v, want ErrChatWait", err)
	}
	for _, other := range [][2]string{{"u", "d"}, {"v", "c"}, {"u", "C"}} {
		u, err := s.LockChat(bg, other[0], other[1], 0, time.Second)
		if err != nil {
			t.Fatalf("%s/%s blocked by u/c: %v", other[0], other[1], err)
		}
		u()
	}
	// queue waiters fit behind the holder; one more is refused.
	const queue = 3
	var wg sync.WaitGroup
	results := make(chan error, queue)
	for range queue {
		wg.Go(func() {
			u, err := s.LockChat(bg, "u", "c", queue, 10*time.Second)
			if err == nil {
				u()
			}
			results <- err
		})
	}
	waitQueued(t, s, "u", "c", queue)
	if _, err := s.LockChat(bg, "u", "c", queue, time.Second); !errors.Is(err, store.ErrChatQueueFull) {
		t.Errorf("a holder and %d waiters, queue %d: %v, want ErrChatQueueFull", queue, queue, err)
	}
	unlock()
	unlock() // idempotent
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Errorf("queued turn: %v", err)
		}
	}
	// All released: the chat is free, with its whole queue.
	u, err := s.LockChat(bg, "u", "c", 0, 0)
	must(t, err)
	u()
}

// waitQueued waits until a turn holds the chat and n more wait for it.
func waitQueued(t *testing.T, s *store.Store, user, chat string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.ChatTurns(bg, user, chat)
		must(t, err)
		if got == n+1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d turns hold or wait for %s/%s, want %d", got, user, chat, n+1)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testChatLockOrder: waiting turns get the chat in the order they came.
func testChatLockOrder(t *testing.T, o Opener) {
	s := o.Open(t)
	lockOrder(t, s, s)
}

func lockOrder(t *testing.T, holder, waiters *store.Store) {
	unlock, err := holder.LockChat(bg, "u", "order", 0, time.Second)
	must(t, err)
	const n = 5
	var wg sync.WaitGroup
	got := make(chan int, n)
	for i := range n {
		wg.Go(func() {
			un, err := waiters.LockChat(bg, "u", "order", n, 20*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			got <- i
			time.Sleep(5 * time.Millisecond)
			un()
		})
		waitQueued(t, holder, "u", "order", i+1) // arrival order
	}
	unlock()
	wg.Wait()
	close(got)
	var order []int
	for i := range got {
		order = append(order, i)
	}
	if fmt.Sprint(order) != "[0 1 2 3 4]" {
		t.Errorf("turns got the chat in order %v, want arrival order", order)
	}
}

// testChatLockCancel: a waiting turn whose context ends leaves the line
// at once, giving its place back.
func testChatLockCancel(t *testing.T, o Opener) {
	s := o.Open(t)
	unlock, err := s.LockChat(bg, "u", "c", 0, time.Second)
	must(t, err)
	defer unlock()
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() {
		_, err := s.LockChat(ctx, "u", "c", 1, time.Minute)
		errc <- err
	}()
	waitQueued(t, s, "u", "c", 1)
	t0 := time.Now()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled wait: %v, want context.Canceled", err)
		}
		if d := time.Since(t0); d > 3*time.Second {
			t.Errorf("a canceled wait took %s to end", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a canceled wait did not end")
	}
	// Its place in the line is free again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.LockChat(bg, "u", "c", 1, 50*time.Millisecond)
		if errors.Is(err, store.ErrChatWait) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the canceled turn still holds its place: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A deadline ends a wait the same way.
	dctx, dcancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer dcancel()
	if _, err := s.LockChat(dctx, "u", "c", 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait past the context's deadline: %v, want context.DeadlineExceeded", err)
	}
}

// testChatLockExclusive: many turns on one chat, from goroutines (and
// stores, when locks are shared), never overlap.
func testChatLockExclusive(t *testing.T, o Opener) {
	s := o.Open(t)
	stores := []*store.Store{s}
	if s.SharedLocks() {
		stores = append(stores, o.Reopen(t, s))
	}
	var inside, total atomic.Int32
	var wg sync.WaitGroup
	for w := range 8 {
		st := stores[w%len(stores)]
		wg.Go(func() {
			for range 8 {
				unlock, err := st.LockChat(bg, "u", "x", 16, 30*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two turns hold the chat at once")
				}
				time.Sleep(time.Millisecond)
				total.Add(1)
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	if total.Load() != 64 {
		t.Errorf("%d turns ran, want 64", total.Load())
	}
}

// testChatLockAcrossStores: with shared locks, a chat held through one
// store is held for the other (a second server): its queue, wait and order
// hold across them.
func testChatLockAcrossStores(t *testing.T, o Opener) {
	s := o.Open(t)
	if !s.SharedLocks() {
		t.Skipf("%s: chat locks hold within one process", s.Driver())
	}
	s2 := o.Reopen(t, s)
	unlock, err := s.LockChat(bg, "u", "c", 0, time.Second)
	must(t, err)
	if _, err := s2.LockChat(bg, "u", "c", 0, time.Second); !errors.Is(err, store.ErrChatQueueFull) {
		t.Errorf("held by the other store, queue 0: %v, want ErrChatQueueFull", err)
	}
	if _, err := s2.LockChat(bg, "u", "c", 1, 200*time.Millisecond); !errors.Is(err, store.ErrChatWait) {
		t.Errorf("held by the other store: %v, want ErrChatWait", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := s2.LockChat(bg, "u", "c", 1, 20*time.Second)
		if err == nil {
			u()
		}
		got <- err
	}()
	waitQueued(t, s, "u", "c", 1)
	if _, err := s.LockChat(bg, "u", "c", 1, time.Second); !errors.Is(err, store.ErrChatQueueFull) {
		t.Errorf("a waiter on the other store fills queue 1: %v, want ErrChatQueueFull", err)
	}
	unlock()
	if err := <-got; err != nil {
		t.Errorf("the other store's waiter: %v", err)
	}
	lockOrder(t, s, s2)
}
