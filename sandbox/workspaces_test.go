package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func fileUID(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

func TestValidateID(t *testing.T) {
	t.Parallel()
	good := []string{"u", "user-1", "A_b-9", "alice@example.com", "chat.v2", "x@", strings.Repeat("a", 128)}
	bad := map[string]string{
		"":                       "empty",
		".":                      "starts with",
		"..":                     "starts with",
		".hidden":                "starts with",
		"@x":                     "starts with",
		"a/b":                    "character",
		"a\\b":                   "character",
		"a b":                    "character",
		"a\x00":                  "character",
		"é":                      "character",
		"a:b":                    "character",
		strings.Repeat("a", 129): "limit is 128",
	}
	for _, id := range good {
		if err := ValidateID("user", id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	for id, want := range bad {
		err := ValidateID("chat", id)
		if !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chat id") {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidID saying %q", id, err, want)
		}
	}
}

func newWorkspaces(t testing.TB) *Workspaces {
	t.Helper()
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	w, err := NewWorkspaces(t.TempDir(), uid, gid)
	must(t, err)
	return w
}

func TestAcquire(t *testing.T) {
	t.Parallel()
	w := newWorkspaces(t)
	ctx := context.Background()
	ws, release, err := w.Acquire(ctx, "alice", "chat1")
	must(t, err)
	want := filepath.Join(w.Root(), "alice", "chat1")
	if ws.Dir() != want {
		t.Errorf("dir = %s, want %s", ws.Dir(), want)
	}
	if p, _ := w.Path("alice", "chat1"); p != want {
		t.Errorf("Path = %s", p)
	}
	if !w.InUse("alice", "chat1") {
		t.Error("not in use after Acquire")
	}
	if os.Geteuid() == 0 {
		st, _ := os.Stat(want)
		if fileUID(st) != 1000 {
			t.Errorf("workspace owned by %d", fileUID(st))
		}
	}
	// The marker is outside the workspace.
	if _, err := os.Stat(filepath.Join(w.Root(), "alice", ".chat1.lastuse")); err != nil {
		t.Errorf("marker: %v", err)
	}
	if list, _ := ws.ListDir(""); len(list) != 0 {
		t.Errorf("workspace not empty: %+v", list)
	}
	must(t, ws.WriteFile("f", []byte("x"), 0))
	release()
	release() // idempotent
	if w.InUse("alice", "chat1") {
		t.Error("in use after release")
	}
	// Persisted: a new Workspaces (a restart) sees the last use.
	w2, err := NewWorkspaces(filepath.Dir(w.Root()), -1, -1)
	must(t, err)
	lu, err := w2.LastUse("alice", "chat1")
	if err != nil || time.Since(lu) > time.Minute {
		t.Errorf("last use = %v, %v", lu, err)
	}
	ws, release, err = w2.Acquire(ctx, "alice", "chat1")
	must(t, err)
	defer release()
	if b, _ := ws.ReadFile("f"); string(b) != "x" {
		t.Error("content lost across acquisitions")
	}
	for _, ids := range [][2]string{{"..", "c"}, {"u", "../c"}, {"u", ""}, {"u/v", "c"}} {
		if _, _, err := w.Acquire(ctx, ids[0], ids[1]); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Acquire(%q, %q) = %v", ids[0], ids[1], err)
		}
		if _, err := w.Path(ids[0], ids[1]); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Path(%q, %q) = %v", ids[0], ids[1], err)
		}
	}
	if _, err := w.LastUse("nobody", "none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LastUse of a missing workspace: %v", err)
	}
}

// makeStale creates workspaces whose last use lies age in the past.
func makeStale(t testing.TB, w *Workspaces, user, chat string, age time.Duration, files int) {
	t.Helper()
	ws, release, err := w.Acquire(context.Background(), user, chat)
	must(t, err)
	for i := range files {
		must(t, ws.WriteFile(fmt.Sprintf("d/f%d", i), []byte("0123456789"), 0))
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
				if err := ws.WriteFile(fmt.Sprintf("held%d", j), []byte("x"), 0); err != nil {
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
