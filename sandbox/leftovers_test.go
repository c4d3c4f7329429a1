package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCleanRunFiles: run files and WriteFile's temporary files left in idle
// workspaces are removed; workspaces in use (here or by another process)
// keep theirs; the agent's files, look-alikes and special files are left
// alone, and nothing blocks on a FIFO.
func TestCleanRunFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, err := NewWorkspaces(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	const prompt = ".agentbox/claude/system-prompt.md"
	files := []string{prompt, ".agentbox/cursor/prompt.md"}
	mk := func(chat string, rels ...string) string {
		t.Helper()
		ws, release, err := w.Acquire(ctx, "alice", chat)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		for _, r := range rels {
			if err := ws.WriteFile(context.Background(), r, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return ws.Dir()
	}
	idle := mk("idle", prompt, "notes.txt", ".agentbox/claude/sessions.json")
	// A half-written temporary file of the host, at the top and beside the
	// prompt; a look-alike of the agent's (not 12 hex digits) stays.
	for _, f := range []string{".mcp.json.tmp-0123456789ab", ".agentbox/claude/.system-prompt.md.tmp-a1b2c3d4e5f6", ".x.tmp-zz"} {
		if err := os.WriteFile(filepath.Join(idle, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The agent made the cursor prompt's folder a FIFO: it is neither
	// listed nor opened.
	if err := syscall.Mkfifo(filepath.Join(idle, ".agentbox", "cursor"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A workspace without a marker (made by hand, or before markers).
	bare := filepath.Join(w.Root(), "bob", "bare")
	if err := os.MkdirAll(filepath.Join(bare, ".agentbox", "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bare, prompt), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// In use by this process, and by another one.
	mine := mk("mine", prompt)
	_, releaseMine, err := w.Acquire(ctx, "alice", "mine")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseMine()
	theirs := mk("theirs", prompt)
	// Another process's Acquire: a shared lock on the marker this
	// Workspaces does not know of (flock locks belong to open files, so a
	// second open file of this process conflicts like another process).
	theirLock, err := os.Open(markerPath(w.Root(), "alice", "theirs"))
	if err != nil {
		t.Fatal(err)
	}
	defer theirLock.Close()
	if err := syscall.Flock(int(theirLock.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var n int
	go func() {
		defer close(done)
		n, err = w.CleanRunFiles(ctx, files)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("CleanRunFiles blocked")
	}
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("removed %d files, want 4", n)
	}
	gone := []string{filepath.Join(idle, prompt), filepath.Join(idle, ".mcp.json.tmp-0123456789ab"),
		filepath.Join(idle, ".agentbox/claude/.system-prompt.md.tmp-a1b2c3d4e5f6"), filepath.Join(bare, prompt)}
	kept := []string{filepath.Join(idle, "notes.txt"), filepath.Join(idle, ".agentbox/claude/sessions.json"), filepath.Join(idle, ".x.tmp-zz"),
		filepath.Join(idle, ".agentbox", "cursor"), filepath.Join(mine, prompt), filepath.Join(theirs, prompt)}
	for _, p := range gone {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s not removed (%v)", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	// The marker made for the lock is gone again: it would have faked a
	// last use.
	if _, err := os.Stat(markerPath(w.Root(), "bob", "bare")); !os.IsNotExist(err) {
		t.Errorf("marker of the bare workspace left: %v", err)
	}
	if _, err := w.CleanRunFiles(ctx, []string{"../escape"}); err == nil {
		t.Error("a path outside the workspace was accepted")
	}
}
