package jsapi

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// seedAssistant is testdata/seed: the Create and Next examples of seed 001
// section 4.6, verbatim.
func seedAssistant(t testing.TB) *assistant.Assistant {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "seed"))
	if err != nil {
		t.Fatal(err)
	}
	// The seed's behaviour does not depend on the hook timeout; a generous
	// one keeps git and node runs on a loaded machine from failing it.
	return &assistant.Assistant{ID: "coder", Dir: dir, Hooks: "src/index.ts", HookTimeout: 2 * time.Minute}
}

// failingExec makes a sandbox where every command fails like a missing binary.
func failingExec(t *testing.T) *fakeSandbox {
	return newScriptedSandbox(t, sandboxtest.Config{Handler: sandboxtest.Reply{ExitCode: 127, Stderr: "sh: node: not found\n"}})
}

func TestSeedCreate(t *testing.T) {
	t.Parallel()
	h, err := Load(seedAssistant(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Exports(), []string{"Create", "Next"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Exports = %v, want %v", got, want)
	}
	msgs := []chat.Message{{Role: "system", Content: "You are a coder."}, {Role: "user", Content: "Write hello.go"}}

	t.Run("sandbox", func(t *testing.T) {
		t.Parallel()
		sb := newFakeSandbox(t)
		var rec chattest.Recorder
		var logs logBuffer
		hc := &Context{ChatID: "c1", AssistantID: "coder", UserID: "u1", Sandbox: sb, Emit: rec.Emit, Logger: logs.logger()}
		res, err := h.Create(context.Background(), hc, msgs, chat.Options{ModelOptions: chat.ModelOptions{Temperature: ptr(0.2)}})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if res == nil || !reflect.DeepEqual(res.Messages, msgs) || res.Options != nil {
			t.Fatalf("Create result = %+v, want the messages back", res)
		}
		env, err := os.ReadFile(filepath.Join(sb.dir, ".env"))
		if err != nil || string(env) != "DEBUG=true\nNODE_ENV=development" {
			t.Fatalf(".env = %q, %v", env, err)
		}
		want := []chat.Event{
			{Event: chat.Start, ID: "hook_1", Type: "loading", Text: "Preparing sandbox environment...", Props: map[string]any{"message": "Preparing sandbox environment..."}},
			{Event: chat.Replace, ID: "hook_1", Type: "text", Text: "Sandbox ready", Props: map[string]any{"content": "Sandbox ready"}},
			{Event: chat.End, ID: "hook_1", Type: "text"},
		}
		if got := rec.Events(); !reflect.DeepEqual(got, want) {
			t.Fatalf("events:\n got %+v\nwant %+v", got, want)
		}
		out := logs.String()
		node, _ := exec.Command("node", "--version").Output()
		for _, w := range []string{
			`level=INFO msg="Node.js version: ` + strings.TrimSpace(string(node)),
			`level=DEBUG msg="Workspace files: .env"`,
			"hook=Create", "source=js",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("log lacks %q:\n%s", w, out)
			}
		}
	})

	t.Run("no node", func(t *testing.T) {
		t.Parallel()
		var rec chattest.Recorder
		var logs logBuffer
		hc := &Context{UserID: "u1", Sandbox: failingExec(t), Emit: rec.Emit, Logger: logs.logger()}
		res, err := h.Create(context.Background(), hc, msgs, chat.Options{})
		var je *Error
		if !asError(err, &je) || je.Message != "Node.js is required" || je.Code != CodeHookError || res != nil {
			t.Fatalf("Create = %+v, %v; want the thrown Error", res, err)
		}
		if je.File != "src/index.ts" || je.Line != 28 {
			t.Errorf("error position = %s:%d:%d, want src/index.ts:28", je.File, je.Line, je.Column)
		}
		ev := rec.Events()
		if len(ev) != 2 || ev[0].Event != chat.Start || ev[1].Event != chat.End || ev[1].ID != ev[0].ID {
			t.Fatalf("events = %+v, want the loading message started and ended", ev)
		}
		if !strings.Contains(logs.String(), `level=ERROR msg="Node.js not available"`) {
			t.Errorf("log lacks the error line:\n%s", logs.String())
		}
	})

	t.Run("no sandbox", func(t *testing.T) {
		t.Parallel()
		var rec chattest.Recorder
		res, err := h.Create(context.Background(), &Context{UserID: "u1", Emit: rec.Emit}, msgs, chat.Options{})
		if err != nil || res == nil || !reflect.DeepEqual(res.Messages, msgs) {
			t.Fatalf("Create = %+v, %v", res, err)
		}
		if ev := rec.Events(); len(ev) != 0 {
			t.Fatalf("events = %+v, want none", ev)
		}
	})
}

func TestSeedNext(t *testing.T) {
	t.Parallel()
	h, err := Load(seedAssistant(t))
	if err != nil {
		t.Fatal(err)
	}
	git := func(t *testing.T, dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	t.Run("generated files", func(t *testing.T) {
		t.Parallel()
		sb := newFakeSandbox(t)
		git(t, sb.dir, "init", "-q")
		for p, c := range map[string]string{
			"output/result.json": `{"ok": true, "files": 2}`,
			"src/main.go":        "package main\n",
			"src/util.go":        "package main\n\nfunc util() {}\n",
			"tmp/scratch.txt":    "x",
		} {
			if err := sb.ws.WriteFile(context.Background(), p, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var logs logBuffer
		hc := &Context{UserID: "u1", ChatID: "c1", Sandbox: sb, Logger: logs.logger()}
		res, err := h.Next(context.Background(), hc, NextPayload{Completion: Completion{Content: "done"}, Messages: []chat.Message{{Role: "user", Content: "go"}}}, chat.Options{})
		if err != nil || res != nil {
			t.Fatalf("Next = %+v, %v; want null", res, err)
		}
		var got any
		if err := json.Unmarshal(hc.Scratch()["generated_result"], &got); err != nil || !reflect.DeepEqual(got, map[string]any{"ok": true, "files": 2.0}) {
			t.Fatalf("memory.context generated_result = %v (%v)", got, err)
		}
		if log := git(t, sb.dir, "log", "--format=%s"); strings.TrimSpace(log) != "auto-commit by sandbox" {
			t.Fatalf("git log = %q", log)
		}
		if _, err := os.Stat(filepath.Join(sb.dir, "tmp")); !os.IsNotExist(err) {
			t.Fatalf("tmp/ still exists: %v", err)
		}
		out := logs.String()
		for _, w := range []string{
			`msg="Generated output: {\"ok\": true, \"files\": 2}"`,
			`msg="Generated: main.go (13 bytes)"`,
			`msg="Generated: util.go (29 bytes)"`,
			`msg="Changes committed"`,
		} {
			if !strings.Contains(out, w) {
				t.Errorf("log lacks %q:\n%s", w, out)
			}
		}
	})

	t.Run("nothing to commit", func(t *testing.T) {
		t.Parallel()
		sb := newFakeSandbox(t)
		if err := sb.ws.MkdirAll(context.Background(), "src"); err != nil {
			t.Fatal(err)
		}
		var logs logBuffer
		hc := &Context{UserID: "u1", Sandbox: sb, Logger: logs.logger()}
		if res, err := h.Next(context.Background(), hc, NextPayload{}, chat.Options{}); err != nil || res != nil {
			t.Fatalf("Next = %+v, %v", res, err)
		}
		out := logs.String()
		if !strings.Contains(out, `msg="No result file generated"`) || !strings.Contains(out, "git commit skipped: command git add . exited with code") {
			t.Errorf("log:\n%s", out)
		}
	})

	t.Run("error", func(t *testing.T) {
		t.Parallel()
		var logs logBuffer
		hc := &Context{UserID: "u1", Sandbox: newFakeSandbox(t), Logger: logs.logger()}
		if res, err := h.Next(context.Background(), hc, NextPayload{Error: "model failed"}, chat.Options{}); err != nil || res != nil {
			t.Fatalf("Next = %+v, %v", res, err)
		}
		if logs.String() != "" {
			t.Errorf("Next with an error did work:\n%s", logs.String())
		}
	})
}
