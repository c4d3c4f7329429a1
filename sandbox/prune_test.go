package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// makeStale creates workspaces whose last use lies age in the past.
func makeStale(t testing.TB, w *Workspaces, user, chat string, age time.Duration, files int) {
	t.Helper()
	ws, release, err := w.Acquire(context.Background(), user, chat)
	must(t, err)
	for i := range files {
		must(t, ws.WriteFile(context.Background(), fmt.Sprintf("d/f%d", i), []byte("0123456789"), 0))
	}
	release()
	must(t, w.SetLastUse(user, chat, time.Now().Add(-age)))
}

func TestPrune(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	ctx := context.Background()
	day := 24 * time.Hour
	makeStale(t, w, "alice", "old", 10*day, 3)
	makeStale(t, w, "alice", "recent", day, 1)
	makeStale(t, w, "bob", "old", 8*day, 0)
	makeStale(t, w, "carol", "busy", 30*day, 1)
	// A workspace without a marker (made by hand) falls back to its mtime.
	must(t, os.MkdirAll(filepath.Join(w.Root(), "dave", "manual"), 0o755))
	old := time.Now().Add(-20 * day)
	must(t, os.Chtimes(filepath.Join(w.Root(), "dave", "manual"), old, old))

	_, releaseBusy, err := w.Acquire(ctx, "carol", "busy")
	must(t, err)
	defer releaseBusy()
	must(t, w.SetLastUse("carol", "busy", time.Now().Add(-30*day))) // still in use

	dry, err := w.Prune(ctx, PruneOptions{OlderThan: 7 * day, DryRun: true})
	must(t, err)
	if got := names(dry.Removed); got != "alice/old bob/old dave/manual" {
		t.Errorf("dry run would remove %q", got)
	}
	if _, err := os.Stat(filepath.Join(w.Root(), "alice", "old")); err != nil {
		t.Fatal("dry run removed something")
	}
	rep, err := w.Prune(ctx, PruneOptions{OlderThan: 7 * day})
	must(t, err)
	if got := names(rep.Removed); got != "alice/old bob/old dave/manual" {
		t.Errorf("removed %q", got)
	}
	if got := names(rep.InUse); got != "carol/busy" {
		t.Errorf("in use %q", got)
	}
	if rep.Kept != 1 || rep.FreedBytes != 30 {
		t.Errorf("kept %d freed %d, want 1 and 30", rep.Kept, rep.FreedBytes)
	}
	for _, p := range []string{"alice/old", "alice/.old.lastuse", "bob"} {
		if _, err := os.Stat(filepath.Join(w.Root(), p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
	for _, p := range []string{"alice/recent", "carol/busy"} {
		if _, err := os.Stat(filepath.Join(w.Root(), p)); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	// Now (the reference time) moves the cutoff.
	rep, err = w.Prune(ctx, PruneOptions{OlderThan: 7 * day, Now: time.Now().Add(7 * day)})
	must(t, err)
	if got := names(rep.Removed); got != "alice/recent" {
		t.Errorf("with a later now: removed %q", got)
	}
	if _, err := w.Prune(ctx, PruneOptions{}); err == nil {
		t.Error("zero retention: no error")
	}
}

// TestPruneSparesWorkspaceInUseElsewhere: another Workspaces on the same
// root (another process, such as the CLI next to a server) holds it.
func TestPruneSparesWorkspaceInUseElsewhere(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	other, err := NewWorkspaces(filepath.Dir(w.Root()), -1, -1)
	must(t, err)
	makeStale(t, w, "u", "c", 30*24*time.Hour, 1)
	_, release, err := other.Acquire(context.Background(), "u", "c")
	must(t, err)
	must(t, w.SetLastUse("u", "c", time.Now().Add(-30*24*time.Hour)))
	rep, err := w.Prune(context.Background(), PruneOptions{OlderThan: time.Hour})
	must(t, err)
	if len(rep.Removed) != 0 || names(rep.InUse) != "u/c" {
		t.Fatalf("removed %q, in use %q", names(rep.Removed), names(rep.InUse))
	}
	release()
	must(t, w.SetLastUse("u", "c", time.Now().Add(-30*24*time.Hour)))
	rep, err = w.Prune(context.Background(), PruneOptions{OlderThan: time.Hour})
	must(t, err)
	if names(rep.Removed) != "u/c" {
		t.Fatalf("after release: removed %q", names(rep.Removed))
	}
}

// TestPruneRacesAcquire: acquisitions during a prune always get a usable
// workspace, and one acquired is never removed under its holder.
func TestPruneRacesAcquire(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	ctx := context.Background()
	const n = 40
	for i := range n {
		makeStale(t, w, "u", fmt.Sprintf("c%d", i), 30*24*time.Hour, 1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, release, err := w.Acquire(ctx, "u", fmt.Sprintf("c%d", i))
			if err != nil {
				errs <- err
				return
			}
			defer release()
			// While held, the folder must stay usable.
			for j := range 5 {
				if err := ws.WriteFile(context.Background(), fmt.Sprintf("held%d", j), []byte("x"), 0); err != nil {
					errs <- fmt.Errorf("c%d: %w", i, err)
					return
				}
				time.Sleep(time.Millisecond)
			}
			if _, err := os.Stat(filepath.Join(ws.Dir(), "held4")); err != nil {
				errs <- fmt.Errorf("c%d removed while held: %w", i, err)
			}
		}()
	}
	_, err := w.Prune(ctx, PruneOptions{OlderThan: time.Hour})
	wg.Wait()
	close(errs)
	must(t, err)
	for err := range errs {
		t.Error(err)
	}
}

func names(ps []PrunedWorkspace) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.User+"/"+p.Chat)
	}
	return strings.Join(s, " ")
}

// fakeInUse is an in-use set given by the test: "user/chat" keys, and a
// hook called on every question.
type fakeInUse struct {
	held  map[string]bool
	onAsk func()
	mu    sync.Mutex
	asked int
}

func (f *fakeInUse) InUse(user, chat string) bool {
	f.mu.Lock()
	f.asked++
	f.mu.Unlock()
	if f.onAsk != nil {
		f.onAsk()
	}
	return f.held[user+"/"+chat]
}

// TestPrunerSparesInUseSet: the workspaces the in-use set names are spared
// and reported, with and without DryRun; the others go.
func TestPrunerSparesInUseSet(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	for _, c := range []string{"a", "busy", "b"} {
		makeStale(t, w, "u", c, 30*24*time.Hour, 1)
	}
	pr := &pruner{root: w.Root(), inUse: &fakeInUse{held: map[string]bool{"u/busy": true}}}
	for _, dry := range []bool{true, false} {
		rep, err := pr.prune(context.Background(), PruneOptions{OlderThan: time.Hour, DryRun: dry})
		must(t, err)
		if names(rep.Removed) != "u/a u/b" || names(rep.InUse) != "u/busy" || rep.DryRun != dry {
			t.Fatalf("dry run %v: removed %q, in use %q", dry, names(rep.Removed), names(rep.InUse))
		}
	}
	if _, err := os.Stat(filepath.Join(w.Root(), "u", "busy")); err != nil {
		t.Fatalf("the workspace in use was removed: %v", err)
	}
}

// TestPruneStopsWhenCanceled: ctx ending stops the prune between
// workspaces; the error says so, and what was done is reported.
func TestPruneStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	const n = 30
	for i := range n {
		makeStale(t, w, "u", fmt.Sprintf("c%d", i), 30*24*time.Hour, 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	set := &fakeInUse{onAsk: cancel} // cancels during the first removal
	rep, err := (&pruner{root: w.Root(), inUse: set}).prune(ctx, PruneOptions{OlderThan: time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(rep.Removed) == 0 || len(rep.Removed) > pruneWorkers {
		t.Errorf("removed %d workspaces after the cancel, want 1 to %d (those under way)", len(rep.Removed), pruneWorkers)
	}
	ents, err := os.ReadDir(filepath.Join(w.Root(), "u"))
	must(t, err)
	kept := 0
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			kept++
		}
	}
	if kept != n-len(rep.Removed) {
		t.Errorf("%d workspaces left, want %d (all but those reported removed)", kept, n-len(rep.Removed))
	}
}

// BenchmarkPrune10k prunes 10,000 stale workspaces (target: under 5 s).
func BenchmarkPrune10k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		w := newWorkspaces(b)
		past := time.Now().Add(-30 * 24 * time.Hour)
		for u := range 100 {
			user := fmt.Sprintf("user%d", u)
			for c := range 100 {
				dir := filepath.Join(w.Root(), user, fmt.Sprintf("chat%d", c))
				must(b, os.MkdirAll(filepath.Join(dir, ".claude"), 0o755))
				must(b, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644))
				must(b, os.WriteFile(filepath.Join(dir, ".claude", "session.jsonl"), []byte("{}\n"), 0o644))
				m := w.marker(user, fmt.Sprintf("chat%d", c))
				must(b, os.WriteFile(m, nil, 0o644))
				must(b, os.Chtimes(m, past, past))
			}
		}
		syscall.Sync() // the set-up's writeback is not the prune's cost
		b.StartTimer()
		start := time.Now()
		rep, err := w.Prune(context.Background(), PruneOptions{OlderThan: 7 * 24 * time.Hour})
		d := time.Since(start)
		must(b, err)
		if len(rep.Removed) != 10000 {
			b.Fatalf("removed %d", len(rep.Removed))
		}
		b.ReportMetric(d.Seconds(), "s/prune-10k")
	}
}
