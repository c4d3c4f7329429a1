package skills

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// TestSyncOverPlantedFiles: FIFOs and symlinks the agent planted where
// the skills go (the destination folder, a parent of it, a skill folder,
// a SKILL.md) neither block Sync nor lead it out of the workspace: each
// is replaced by the real copy.
func TestSyncOverPlantedFiles(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeSkill(t, src, "review", "")
	list, probs := Discover(src)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	outside := t.TempDir()
	for name, plant := range map[string]func(ws string) error{
		"fifo at the destination": func(ws string) error {
			os.MkdirAll(filepath.Join(ws, ".claude"), 0o755)
			return syscall.Mkfifo(filepath.Join(ws, ".claude/skills"), 0o644)
		},
		"fifo at a parent": func(ws string) error {
			return syscall.Mkfifo(filepath.Join(ws, ".claude"), 0o644)
		},
		"fifo at SKILL.md": func(ws string) error {
			os.MkdirAll(filepath.Join(ws, ".claude/skills/review"), 0o755)
			return syscall.Mkfifo(filepath.Join(ws, ".claude/skills/review/SKILL.md"), 0o644)
		},
		"symlink out at the destination": func(ws string) error {
			os.MkdirAll(filepath.Join(ws, ".claude"), 0o755)
			return os.Symlink(outside, filepath.Join(ws, ".claude/skills"))
		},
		"symlink out at a parent": func(ws string) error {
			return os.Symlink(outside, filepath.Join(ws, ".claude"))
		},
		"symlink to a fifo at a skill": func(ws string) error {
			os.MkdirAll(filepath.Join(ws, ".claude/skills"), 0o755)
			if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
				return err
			}
			return os.Symlink("../../pipe", filepath.Join(ws, ".claude/skills/review"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := plant(dir); err != nil {
				t.Fatal(err)
			}
			ws, err := sandbox.OpenWorkspace(dir, -1, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			if err := Sync(ctx, ws, ".claude/skills", list); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
			b, err := ws.ReadFile(ctx, ".claude/skills/review/SKILL.md", 0)
			if err != nil || len(b) == 0 {
				t.Errorf("SKILL.md after Sync: %q, %v", b, err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("Sync wrote outside: %v", ents)
			}
		})
	}
}

// TestSyncEndsWithCtx: an ended ctx stops Sync before it writes.
func TestSyncEndsWithCtx(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	writeSkill(t, src, "review", "")
	list, _ := Discover(src)
	ws, err := sandbox.OpenWorkspace(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sync(ctx, ws, ".claude/skills", list); err == nil {
		t.Fatal("Sync with an ended ctx: no error")
	}
}
