package jsapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// dockerSandbox starts a real sandbox from the Claude image over a fresh
// workspace.
func dockerSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	img := testenv.Image(t)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	rt, err := docker.New(context.Background(), docker.Options{Instance: "jsapi-test-" + hex.EncodeToString(suffix), Image: img})
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "u1", "c1")
	if release != nil {
		t.Cleanup(release)
	}
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(context.Background(), sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws})
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func mustExec(t *testing.T, sb sandbox.Sandbox, argv ...string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: argv})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %v: %v %+v", argv, err, res)
	}
	return res.Stdout
}

// TestSeedDocker runs the seed's Create and Next hooks against a real
// Docker sandbox: node is found in the image, the files land in the
// workspace, and the changes are committed with git.
func TestSeedDocker(t *testing.T) {
	t.Parallel()
	sb := dockerSandbox(t)
	h, err := Load(seedAssistant(t))
	if err != nil {
		t.Fatal(err)
	}
	var rec chattest.Recorder
	var logs logBuffer
	hc := &Context{ChatID: "c1", AssistantID: "coder", UserID: "u1", Sandbox: sb, Emit: rec.Emit, Logger: logs.logger(), Memory: NewMemStore()}
	msgs := []chat.Message{{Role: "user", Content: "write a tool"}}

	res, err := h.Create(context.Background(), hc, msgs, chat.Options{})
	if err != nil {
		t.Fatalf("Create: %v\n%s", err, logs.String())
	}
	if res == nil || !reflect.DeepEqual(res.Messages, msgs) {
		t.Fatalf("Create = %+v", res)
	}
	if got := mustExec(t, sb, "cat", ".env"); got != "DEBUG=true\nNODE_ENV=development" {
		t.Fatalf(".env in the sandbox = %q", got)
	}
	node := strings.TrimSpace(mustExec(t, sb, "node", "--version"))
	if !strings.Contains(logs.String(), `msg="Node.js version: `+node) {
		t.Fatalf("log lacks the node version %s:\n%s", node, logs.String())
	}
	if ev := rec.Events(); len(ev) != 3 || ev[1].Event != chat.Replace || ev[1].Text != "Sandbox ready" || ev[2].Event != chat.End {
		t.Fatalf("events = %+v", ev)
	}

	// What an agent run would leave behind: a repository with new sources,
	// a result file and scratch files.
	mustExec(t, sb, "sh", "-c", `git init -q && git config user.email agent@example.com && git config user.name agent &&
		mkdir -p src output tmp && echo 'console.log(1)' > src/tool.js && echo '{"lines": 1}' > output/result.json && touch tmp/x`)
	next, err := h.Next(context.Background(), hc, NextPayload{Messages: msgs, Completion: Completion{Content: "done"}}, chat.Options{})
	if err != nil || next != nil {
		t.Fatalf("Next = %+v, %v\n%s", next, err, logs.String())
	}
	if got := mustExec(t, sb, "git", "log", "--format=%s"); strings.TrimSpace(got) != "auto-commit by sandbox" {
		t.Fatalf("git log = %q\n%s", got, logs.String())
	}
	if got := mustExec(t, sb, "ls", "-A"); got != ".env\n.git\noutput\nsrc\n" {
		t.Fatalf("workspace after Next (tmp/ should be gone):\n%s", got)
	}
	if got := mustExec(t, sb, "git", "show", "--name-only", "--format=", "HEAD"); !strings.Contains(got, "src/tool.js") {
		t.Fatalf("the commit lacks src/tool.js:\n%s", got)
	}
	var result map[string]any
	if err := json.Unmarshal(hc.Scratch()["generated_result"], &result); err != nil || result["lines"] != 1.0 {
		t.Fatalf("generated_result = %v, %v", result, err)
	}
	for _, w := range []string{`msg="Generated: tool.js (15 bytes)"`, `msg="Changes committed"`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, logs.String())
		}
	}
}

// TestDockerExecDeadline checks that a command a hook runs in a real
// sandbox is stopped at the hook's deadline, and errors keep their codes.
func TestDockerExecDeadline(t *testing.T) {
	t.Parallel()
	sb := dockerSandbox(t)
	a := writeAssistant(t, map[string]string{"src/index.ts": `
export function codes(ctx: Context) {
  const out: any = {};
  try { ctx.sandbox!.Exec(["sh", "-c", "echo no >&2; exit 4"]) } catch (e) { out.failed = [e.code, e.exit_code, e.stderr] }
  try { ctx.sandbox!.Exec(["sleep", "5"], {timeout: 100}) } catch (e) { out.timeout = e.code }
  try { ctx.sandbox!.ReadFile("../../etc/passwd") } catch (e) { out.outside = e.code }
  out.whoami = ctx.sandbox!.Exec(["id", "-u"]).trim();
  return out;
}
export function Create(ctx: Context) {
  ctx.sandbox!.Exec(["sleep", "300"]);
  return null;
}`})
	a.HookTimeout = 2 * time.Minute
	h, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	a.HookTimeout = 500 * time.Millisecond
	short, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Call(context.Background(), &Context{Sandbox: sb}, "codes", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"failed": []any{CodeExecFailed, 4.0, "no\n"}, "timeout": CodeExecTimeout, "outside": CodePathOutside, "whoami": "1000"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	start := time.Now()
	_, err = short.Create(context.Background(), &Context{Sandbox: sb}, nil, chat.Options{})
	var je *Error
	if !errors.As(err, &je) || je.Code != CodeHookTimeout {
		t.Fatalf("Create = %v", err)
	}
	// Far less than the 300 s the command wants (stopping a container
	// process can take seconds on a loaded engine).
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the hook deadline did not stop Exec: %v", took)
	}
	// The sleep was killed with the hook, not left running.
	if ps := mustExec(t, sb, "ps", "-eo", "args"); strings.Contains(ps, "sleep 300") {
		t.Fatalf("sleep still runs:\n%s", ps)
	}
}
