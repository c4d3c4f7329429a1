package agentcli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// TestResetHome: only what the keep patterns name survives, as regular
// files and folders; what the agent planted around it (settings, plugins,
// links out of the home, FIFOs, links inside kept folders) is gone.
func TestResetHome(t *testing.T) {
	wss, err := sandbox.NewWorkspaces(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "u", "c")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	root := ws.Dir()
	home := filepath.Join(root, "state", "home")
	files := []string{
		"config.toml", "AGENTS.md", ".gemini/settings.json", ".gemini/extensions/evil/gemini-extension.json",
		"sessions/2026/12/05/rollout-1.jsonl", "sessions/2026/12/05/deep/x.jsonl",
		".gemini/tmp/workspace/chats/session-1.json", ".gemini/tmp/workspace/evil.sh", ".gemini/projects.json",
		"projects/p/0b0f7c8e-3d0a-4c59-9f3e-6a1d2c7b8e41.jsonl", "projects/p/evil.jsonl",
		"projects/p/0b0f7c8e-3d0a-4c59-9f3e-6a1d2c7b8e41/sub/tool.txt", "state.sqlite",
	}
	for _, f := range files {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(root, "precious.txt")
	if err := os.WriteFile(outside, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{
		{outside, "link-out"},                           // a link out of the home
		{root, "sessions/2026/12/05/ws"},                // a link inside a kept folder
		{outside, ".gemini/tmp/workspace/chats/x.json"}, // a link where a kept file would be
		{root, ".gemini/tmp/other"},                     // a link where a kept folder would be
	} {
		if err := os.Symlink(l[0], filepath.Join(home, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(home, "sessions", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	uuid := "[0-9a-f]*-*"
	err = ResetHome(context.Background(), ws, "state/home",
		"sessions/**", ".gemini/tmp/*/chats/*.json", ".gemini/projects.json", "*.sqlite",
		"projects/*/"+uuid+".jsonl", "projects/*/"+uuid)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = filepath.Walk(home, func(p string, info os.FileInfo, err error) error {
		if err == nil && p != home {
			rel, _ := filepath.Rel(home, p)
			if !info.IsDir() {
				got = append(got, rel)
			}
		}
		return nil
	})
	want := []string{
		".gemini/projects.json", ".gemini/tmp/workspace/chats/session-1.json",
		"projects/p/0b0f7c8e-3d0a-4c59-9f3e-6a1d2c7b8e41.jsonl", "projects/p/0b0f7c8e-3d0a-4c59-9f3e-6a1d2c7b8e41/sub/tool.txt",
		"sessions/2026/12/05/deep/x.jsonl", "sessions/2026/12/05/rollout-1.jsonl", "state.sqlite",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("kept:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep me" {
		t.Errorf("a file outside the home: %q, %v", b, err)
	}

	// A home that is a link to another folder of the workspace is
	// replaced, the folder left alone.
	if err := os.MkdirAll(filepath.Join(root, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "src", "main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "linked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../src", filepath.Join(root, "linked", "home")); err != nil {
		t.Fatal(err)
	}
	if err := ResetHome(context.Background(), ws, "linked/home", "sessions/**"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "src", "main.go")); err != nil {
		t.Errorf("emptied the folder a linked home pointed to: %v", err)
	}
	if st, err := os.Lstat(filepath.Join(root, "linked", "home")); err != nil || !st.IsDir() {
		t.Errorf("the linked home: %v, %v", st, err)
	}

	// A missing home is made; a bad pattern is an error before anything
	// is removed.
	if err := ResetHome(context.Background(), ws, "other/home"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(root, "other", "home")); err != nil || !st.IsDir() {
		t.Errorf("the new home: %v", err)
	}
	for _, bad := range []string{"[", "a/../b", ""} {
		if err := ResetHome(context.Background(), ws, "state/home", bad); err == nil {
			t.Errorf("pattern %q: no error", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "state.sqlite")); err != nil {
		t.Errorf("a bad pattern removed files: %v", err)
	}
}

// TestForkResumesItsCopyOfTheSession: a fork's first run resumes the
// session its workspace's copy of the parent's state records (the nearest
// chat it was forked from that has one), and records it as the fork's own.
func TestForkResumesItsCopyOfTheSession(t *testing.T) {
	ctx := context.Background()
	wss, err := sandbox.NewWorkspaces(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(ctx, "u", "fork")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	x := &Executor{prof: Profile{Name: "codex", Sessions: true, State: func(id string) string { return StateDir("codex", id) }}}
	state := StateDir("codex", "coder")
	if err := ws.MkdirAll(ctx, state); err != nil {
		t.Fatal(err)
	}
	if err := WriteSession(ctx, ws, state, "coder", "parent", "sess-parent-1"); err != nil {
		t.Fatal(err)
	}
	p := &Prepared{Request: &executor.Request{Assistant: &assistant.Assistant{ID: "coder"}, ChatID: "fork", ForkedFrom: []string{"parent", "root"}}, State: state}
	if err := x.reset(ctx, ws, p); err != nil {
		t.Fatal(err)
	}
	if p.Resume != "sess-parent-1" {
		t.Errorf("the fork resumes %q, want its copy of the parent's session", p.Resume)
	}
	if got := ReadSession(ctx, ws, state, "coder", "fork"); got != "sess-parent-1" {
		t.Errorf("the fork's own session record: %q", got)
	}
	// A chat that is no fork starts a session of its own.
	p = &Prepared{Request: &executor.Request{Assistant: &assistant.Assistant{ID: "coder"}, ChatID: "other"}, State: state}
	if err := x.reset(ctx, ws, p); err != nil || p.Resume != "" {
		t.Errorf("a chat of its own resumes %q, %v", p.Resume, err)
	}
}
