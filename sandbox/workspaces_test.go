package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	if list, _ := ws.ListDir(context.Background(), ""); len(list) != 0 {
		t.Errorf("workspace not empty: %+v", list)
	}
	must(t, ws.WriteFile(context.Background(), "f", []byte("x"), 0))
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
	if b, _ := ws.ReadFile(context.Background(), "f", 0); string(b) != "x" {
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
