package chatlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestLocal: a full queue refuses, other chats are independent, waiters
// are served in arrival order, unlock is idempotent, nothing is kept.
func TestLocal(t *testing.T) {
	t.Parallel()
	l := New()
	ctx := context.Background()
	unlock, err := l.Lock(ctx, "u", "c", 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(ctx, "u", "c", 0, time.Second); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("queue 0: %v", err)
	}
	// Other chats and users are independent.
	u2, err := l.Lock(ctx, "u", "d", 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	u2()
	var wg sync.WaitGroup
	got := make(chan int, 3)
	for i := range 3 {
		wg.Go(func() {
			un, err := l.Lock(ctx, "u", "c", 5, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			got <- i
			un()
			un() // idempotent
		})
		// Arrival order: the next waiter comes once this one is counted
		// (the holder and i+1 waiters).
		awaitTurns(t, l, i+2)
	}
	unlock()
	wg.Wait()
	close(got)
	var order []int
	for i := range got {
		order = append(order, i)
	}
	if fmt.Sprint(order) != "[0 1 2]" {
		t.Errorf("order = %v", order)
	}
	if n := l.Len(); n != 0 {
		t.Errorf("%d locks kept after use", n)
	}
}

func TestLocalWaitAndCancel(t *testing.T) {
	t.Parallel()
	l := New()
	unlock, err := l.Lock(context.Background(), "u", "c", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := l.Lock(context.Background(), "u", "c", 1, 50*time.Millisecond); !errors.Is(err, ErrWait) {
		t.Errorf("wait: %v, want ErrWait", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := l.Lock(ctx, "u", "c", 1, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v, want context.Canceled", err)
	}
	if n := l.Len(); n != 1 {
		t.Errorf("%d chats kept, want the held one", n)
	}
}

// awaitTurns waits until n turns hold or wait for the chat (u, c), or
// fails the test after a minute.
func awaitTurns(t *testing.T, l *Local, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); l.Turns("u", "c") < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d turns on the chat after a minute, want %d", l.Turns("u", "c"), n)
		}
	}
}

// TestLocalWaitsEndingAsHanded: waits and cancels that end as the chat is
// handed to them pass it on: the chat is never left held by nobody, and
// nothing is kept.
func TestLocalWaitsEndingAsHanded(t *testing.T) {
	t.Parallel()
	l := New()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%2 == 0 {
				time.AfterFunc(time.Duration(i%7)*100*time.Microsecond, cancel)
			}
			un, err := l.Lock(ctx, "u", "c", 1000, time.Duration(i%5)*100*time.Microsecond+time.Microsecond)
			if err == nil {
				un()
			}
		})
	}
	wg.Wait()
	if n := l.Len(); n != 0 {
		t.Fatalf("%d locks kept after use", n)
	}
	un, err := l.Lock(context.Background(), "u", "c", 0, 0)
	if err != nil {
		t.Fatalf("the chat is not free after every turn ended: %v", err)
	}
	un()
}
