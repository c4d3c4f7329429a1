package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/pipeline"
)

type fakeApprover struct {
	mu      sync.Mutex
	answers map[string]approval.Answer
	done    chan struct{}
}

func (f *fakeApprover) Approve(_ context.Context, user, chatID, id string, operator bool, a approval.Answer) error {
	f.mu.Lock()
	f.answers[user+"/"+chatID+"/"+id] = a
	f.mu.Unlock()
	f.done <- struct{}{}
	return nil
}

// TestRunAsker: with a terminal run asks (y, a for always, anything else
// a denial), showing a file edit's diff; without one it denies at once.
func TestRunAsker(t *testing.T) {
	t.Parallel()
	f := &fakeApprover{answers: map[string]approval.Answer{}, done: make(chan struct{}, 4)}
	ev := func(id string, props map[string]any) chat.Event {
		props["approval_id"] = id
		return chat.Event{Event: chat.Start, ID: "approval-" + id, Type: pipeline.TypeApprovalRequested, Props: props}
	}
	var out bytes.Buffer
	a := newRunAsker(f, "cli", "c1", strings.NewReader("y\n"), &out, nil)
	a.event(ev("a1", map[string]any{"tool": "Bash", "input": map[string]any{"command": "ls"}}))
	<-f.done
	if got := f.answers["cli/c1/a1"]; got.Decision != approval.Deny || got.Reason != noTerminalReason {
		t.Errorf("without a terminal: %+v", got)
	}

	var mu sync.Mutex
	a = &runAsker{p: f, user: "cli", chat: "c1", in: bufio.NewReader(strings.NewReader("a\nn\n")), out: &lockedWriter{w: &out, mu: &mu}}
	a.event(ev("a2", map[string]any{"tool": "Edit", "rule": "Edit(src/**)", "diff": "--- src/x\n+++ src/x\n-old\n+new\n"}))
	<-f.done
	a.event(ev("a3", map[string]any{"tool": "Bash", "rule": "Bash", "input": map[string]any{"command": "rm x"}}))
	<-f.done
	if got := f.answers["cli/c1/a2"]; got.Decision != approval.Allow || !got.Remember {
		t.Errorf("always: %+v", got)
	}
	if got := f.answers["cli/c1/a3"]; got.Decision != approval.Deny {
		t.Errorf("no: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if s := out.String(); !strings.Contains(s, "  +new\n") || !strings.Contains(s, `"command": "rm x"`) || !strings.Contains(s, "[a]lways") {
		t.Errorf("terminal:\n%s", s)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRunApprovalWithoutTerminal runs the agentbox binary with its input
// a pipe: the sandboxed agent's Bash call the policy asks about is denied
// at once (not after the policy's five minutes), with the reason the
// model reads, and never runs; a call no rule names runs.
func TestRunApprovalWithoutTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Docker(t)
	bin := testenv.Agentbox(t)
	image := testenv.Image(t)
	app := t.TempDir()
	t.Cleanup(func() { e2etest.UnmountUnder(t, app) })
	files := map[string]string{
		"app.jsonc":             `{"data_root": "./data", "sandbox": {"runtime": "docker"}}`,
		"connectors/s.conn.yao": `{"label": "S", "type": "scripted", "options": {"script": "s.yaml", "model": "claude-sonnet-4-5"}}`,
		"connectors/s.yaml": `turns:
  - when: {after_tool_result: Bash}
    text: Answered.
  - when: {contains: touch}
    tool_calls:
      - name: Bash
        input: {command: touch /workspace/marker-3120 && echo touched-3120}
  - when: {contains: say}
    tool_calls:
      - name: Bash
        input: {command: echo said-3120}
`,
		"assistants/coder/package.yao": `{"name": "Coder", "connector": "s", "sandbox": {"command": "claude", "image": "` + image + `", "arguments": {"max_turns": 5}},
			"approval": {"ask": ["Bash(touch:*)"], "timeout": "5m"}}`,
	}
	for name, body := range files {
		e2etest.Write(t, filepath.Join(app, name), body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := func(prompt string) []chat.Event {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "run", "--app", app, "--chat", "c1", "--json", "coder", prompt)
		cmd.Stdin = strings.NewReader("y\n") // a pipe, not a terminal: never read
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("agentbox run %q: %v\nstdout:\n%s\nstderr:\n%s", prompt, err, out.String(), errb.String())
		}
		var events []chat.Event
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var e chat.Event
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			events = append(events, e)
		}
		return events
	}
	result := func(events []chat.Event) string {
		for _, e := range events {
			if e.Type == chat.TypeToolResult && e.Event == chat.Start {
				s, _ := e.Props["content"].(string)
				return s
			}
		}
		return ""
	}
	events := run("touch the marker")
	var asked, resolved map[string]any
	for _, e := range events {
		switch {
		case e.Type == pipeline.TypeApprovalRequested && e.Event == chat.Start:
			asked = e.Props
		case e.Type == pipeline.TypeApprovalResolved && e.Event == chat.Start:
			resolved = e.Props
		}
	}
	if asked == nil || asked["rule"] != "Bash(touch:*)" {
		t.Errorf("approval_requested %v", asked)
	}
	if resolved == nil || resolved["decision"] != "deny" || resolved["by"] != "user" {
		t.Errorf("approval_resolved %v", resolved)
	}
	if r := result(events); !strings.Contains(r, noTerminalReason) || strings.Contains(r, "touched-3120") {
		t.Errorf("the denied call's result %q", r)
	}
	if r := result(run("say it")); !strings.Contains(r, "said-3120") {
		t.Errorf("a call no rule names: result %q", r)
	}
}
