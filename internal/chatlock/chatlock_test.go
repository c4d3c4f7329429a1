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
		time.Sleep(10 * time.Millisecond) // arrival order
		wg.Go(func() {
			un, err := l.Lock(ctx, "u", "c", 5, time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			got <- i
			un()
			un() // idempotent
		})
	}
	time.Sleep(30 * time.Millisecond)
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
