package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLock: a shared lock is shared, an exclusive one waits for it and
// gives up with the context's error; once it is released, it is taken.
func TestLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	ctx := context.Background()
	a, b, c := open(), open(), open()
	if err := Lock(ctx, a, false, 0); err != nil {
		t.Fatal(err)
	}
	if err := Lock(ctx, b, false, 0); err != nil {
		t.Fatalf("a second shared lock: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := Lock(canceled, c, true, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("exclusive while shared: %v, want context.Canceled", err)
	}
	a.Close()
	b.Close()
	if err := Lock(ctx, c, true, 1); err != nil {
		t.Fatalf("exclusive once released: %v", err)
	}
}
