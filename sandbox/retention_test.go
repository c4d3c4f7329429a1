package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRetention(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	ctx := context.Background()
	if _, err := NewRetention(w, "not a schedule", 0, nil); err == nil || !strings.Contains(err.Error(), "not a schedule") {
		t.Errorf("bad schedule: %v", err)
	}
	if _, err := NewRetention(w, "", -time.Hour, nil); err == nil {
		t.Error("negative retention: no error")
	}
	makeStale(t, w, "u", "stale", 8*24*time.Hour, 1)
	makeStale(t, w, "u", "busy", 8*24*time.Hour, 1)
	_, release, err := w.Acquire(ctx, "u", "busy")
	must(t, err)
	defer release()
	must(t, w.SetLastUse("u", "busy", time.Now().Add(-8*24*time.Hour))) // a long request
	r, err := NewRetention(w, "", 0, slog.New(slog.DiscardHandler))
	must(t, err)
	r.Start()
	if next := r.Next(); next.Hour() != 3 || next.Minute() != 0 {
		t.Errorf("next run %v, want 03:00", next)
	}
	rep, err := r.RunNow(ctx)
	must(t, err)
	if names(rep.Removed) != "u/stale" || names(rep.InUse) != "u/busy" {
		t.Errorf("removed %q, in use %q", names(rep.Removed), names(rep.InUse))
	}
	must(t, r.Close(ctx))
	if _, err := r.RunNow(ctx); err == nil {
		t.Error("RunNow after Close: no error")
	}
}

func TestRetentionScheduled(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	makeStale(t, w, "u", "stale", time.Hour, 1)
	r, err := NewRetention(w, "@every 1s", time.Minute, nil)
	must(t, err)
	r.Start()
	defer r.Close(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(w.Root(), "u", "stale")); errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the scheduled prune did not run")
}

// blockingPruner counts prunes and holds each until release is closed or
// its ctx ends.
type blockingPruner struct {
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	calls   int
	olderBy time.Duration
}

func (b *blockingPruner) Prune(ctx context.Context, opts PruneOptions) (*PruneReport, error) {
	b.mu.Lock()
	b.calls++
	b.olderBy = opts.OlderThan
	b.mu.Unlock()
	b.started <- struct{}{}
	select {
	case <-b.release:
		return &PruneReport{Removed: []PrunedWorkspace{}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *blockingPruner) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// TestRetentionNeverOverlaps: a scheduled prune while one runs is skipped;
// RunNow waits for the running one; Close cancels a prune that outlives its
// ctx.
func TestRetentionNeverOverlaps(t *testing.T) {
	t.Parallel()
	p := &blockingPruner{started: make(chan struct{}, 4), release: make(chan struct{})}
	r, err := newRetention(p, "", 0, nil)
	must(t, err)
	first := make(chan error, 1)
	go func() { _, err := r.RunNow(context.Background()); first <- err }()
	<-p.started
	r.scheduled() // skipped: the first still runs
	if n := p.count(); n != 1 {
		t.Fatalf("%d prunes started, want 1", n)
	}
	if p.olderBy != DefaultRetention {
		t.Errorf("retention %s, want the default %s", p.olderBy, DefaultRetention)
	}
	second := make(chan error, 1)
	go func() { _, err := r.RunNow(context.Background()); second <- err }()
	select {
	case <-p.started:
		t.Fatal("RunNow started a prune while one runs")
	case <-time.After(50 * time.Millisecond):
	}
	close(p.release)
	must(t, <-first)
	<-p.started
	must(t, <-second)

	// A prune still running when Close's ctx ends is cancelled.
	p2 := &blockingPruner{started: make(chan struct{}, 1), release: make(chan struct{})}
	r2, err := newRetention(p2, "", time.Hour, nil)
	must(t, err)
	stuck := make(chan error, 1)
	go func() { _, err := r2.RunNow(context.Background()); stuck <- err }()
	<-p2.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r2.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want its ctx's deadline", err)
	}
	if err := <-stuck; !errors.Is(err, context.Canceled) {
		t.Errorf("the running prune ended with %v, want context.Canceled", err)
	}
	must(t, r.Close(context.Background()))
}
