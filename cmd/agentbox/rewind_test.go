package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// rewindScript: Claude Code writes a.txt (turn "create"), then wrecks the
// workspace (turn "wreck"); later turns answer in text.
const rewindScript = `turns:
  - when: {contains: create}
    tool_calls:
      - name: Write
        input: {file_path: /workspace/a.txt, content: one}
  - when: {after_tool_result: Write}
    text: Created.
  - when: {contains: wreck}
    tool_calls:
      - name: Bash
        input: {command: rm a.txt && printf junk > junk.txt, description: wreck}
  - when: {after_tool_result: Bash}
    text: Wrecked.
  - when: {contains: again}
    text: Resumed.
  - when: {contains: fork}
    text: Forked.
`

// TestRunRewindAndFork runs the agentbox binary: a sandboxed turn in
// Docker writes a file, the next deletes it; run --rewind 1 brings it
// back (and the turn that comes with it resumes the session), run --fork 1
// starts a new chat from there.
func TestRunRewindAndFork(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Docker(t)
	bin := testenv.Agentbox(t)
	image := testenv.Image(t)
	app := t.TempDir()
	files := map[string]string{
		"app.jsonc":                    `{"data_root": "./data", "sandbox": {"runtime": "docker"}, "cleanup": {"checkpoints": 5}}`,
		"connectors/s.conn.yao":        `{"label": "S", "type": "scripted", "options": {"script": "s.yaml", "model": "claude-sonnet-4-5"}}`,
		"connectors/s.yaml":            rewindScript,
		"assistants/coder/package.yao": `{"name": "Coder", "connector": "s", "sandbox": {"command": "claude", "image": "` + image + `", "arguments": {"permission_mode": "bypassPermissions", "max_turns": 5}}}`,
		"assistants/coder/prompts.yml": "- role: system\n  content: You write code.\n",
	}
	for name, body := range files {
		p := filepath.Join(app, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	run := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, append([]string{"run", "--app", app}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("agentbox run %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	// A file of a chat's workspace, read as a person would between turns
	// (run gives the workspace image back when it exits).
	file := func(chatID, name string) string {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "workspaces", "mount", "--app", app, "--chat", chatID, "--", "cat", name)
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			return "<none>"
		}
		return out.String()
	}

	if out, _ := run("--chat", "c1", "coder", "create a.txt"); !strings.Contains(out, "Created.") {
		t.Fatalf("turn 1: %s", out)
	}
	if out, _ := run("--chat", "c1", "coder", "wreck it"); !strings.Contains(out, "Wrecked.") {
		t.Fatalf("turn 2: %s", out)
	}
	if got := file("c1", "a.txt"); got != "<none>" {
		t.Fatalf("after turn 2, a.txt = %q", got)
	}
	out, errOut := run("--chat", "c1", "--rewind", "1", "coder", "again")
	if !strings.Contains(errOut, "chat c1 rewound to turn 1") || !strings.Contains(out, "Resumed.") {
		t.Fatalf("rewind: stdout %s\nstderr %s", out, errOut)
	}
	if a, junk := file("c1", "a.txt"), file("c1", "junk.txt"); a != "one" || junk != "<none>" {
		t.Errorf("after the rewind: a.txt %q, junk.txt %q", a, junk)
	}

	// Fork without a prompt: the new chat's id on stdout.
	out, _ = run("--chat", "c1", "--fork", "1", "coder")
	fork := strings.TrimSpace(out)
	if fork == "" || fork == "c1" || file(fork, "a.txt") != "one" {
		t.Fatalf("fork %q: a.txt %q", fork, file(fork, "a.txt"))
	}
	if out, _ := run("--chat", fork, "coder", "fork turn"); !strings.Contains(out, "Forked.") {
		t.Fatalf("turn in the fork: %s", out)
	}

	// Bad use says what was wrong.
	var errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "run", "--app", app, "--chat", "c1", "--rewind", "9", "coder")
	cmd.Stderr = &errb
	if err := cmd.Run(); err == nil || !strings.Contains(errb.String(), "has no checkpoint of turn 9") {
		t.Errorf("rewind to a turn that never was: %v %s", err, errb.String())
	}
}
