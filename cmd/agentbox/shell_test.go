package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestShell runs a shell in the example app's coder sandbox (the local
// runtime) with its input from a pipe: what it types runs in the chat's
// workspace, and the shell's exit status is the command's.
func TestShell(t *testing.T) {
	testenv.Bwrap(t)
	app := localApp(t, "")
	// The sandbox user must reach the workspace under the test's folder.
	for p := app; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	prev := shellStdin
	shellStdin = strings.NewReader("echo \"made-$((20+1))\" > note.txt; cat note.txt; pwd; exit 3\n")
	t.Cleanup(func() { shellStdin = prev })
	var stdout, stderr bytes.Buffer
	code := runShell(context.Background(), []string{"--app", app, "--chat", "c1", "--user", "alice", "--assistant", "coder"}, &stdout, &stderr)
	if code != 3 {
		t.Fatalf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "made-21") || !strings.Contains(out, "/workspace") {
		t.Errorf("stdout:\n%s", out)
	}
	// The workspace may be a disk image, unmounted when the shell ended.
	ctx := context.Background()
	wss, err := newWorkspaces(ctx, filepath.Join(app, "data"), -1, -1, "", 0, cliLogger(io.Discard, true))
	if err != nil {
		t.Fatal(err)
	}
	defer wss.Close(ctx)
	ws, release, err := wss.Acquire(ctx, "alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if b, err := ws.ReadFile(ctx, "note.txt", 0); err != nil || string(b) != "made-21\n" {
		t.Errorf("note.txt in the workspace: %q, %v", b, err)
	}
}

func TestShellUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "--chat is required"},
		{[]string{"--chat", "../x"}, 2, "--chat"},
		{[]string{"--chat", "c", "extra"}, 2, "unexpected argument"},
		{[]string{"--chat", "c", "--app", "/nonexistent-app"}, 1, "app folder /nonexistent-app does not exist"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runShell(context.Background(), tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("shell %q = %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
