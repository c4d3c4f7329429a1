package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// countHooks counts the Create hook's runs in the sandbox's workspace.
const countHooks = `
function Create(ctx, messages, options) {
  let n = 0;
  try { n = parseInt(ctx.sandbox.ReadFile("creates.txt")) || 0; } catch (e) {}
  ctx.sandbox.WriteFile("creates.txt", String(n + 1));
  return null;
}
`

// keptEnv is a pipeline with the real Claude Code CLI in Docker behind the
// bridge, for an assistant "coder" with sandbox.keep_alive.
type keptEnv struct {
	p     *Pipeline
	app   *assistant.App
	srv   *scripted.Server
	coder *assistant.Assistant
	ws    *sandbox.Workspaces
}

func newKeptEnv(t testing.TB, ctx context.Context, keepAlive time.Duration, turns []scripted.Turn, mod func(*Config)) *keptEnv {
	t.Helper()
	image := testenv.Image(t)
	bin := testenv.Agentbox(t)
	srv := scripted.NewServer(&scripted.Script{Turns: turns})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	coder := &assistant.Assistant{
		ID: "coder", Dir: filepath.Join(dir, "coder"), Connector: "real",
		Sandbox: &assistant.Sandbox{Command: "claude", Image: image, Timeout: 2 * time.Minute, MemoryBytes: 1 << 30, CPUs: 1,
			KeepAlive: keepAlive, Arguments: chat.Arguments{MaxTurns: 5, PermissionMode: "bypassPermissions"}},
		HookTimeout: 10 * time.Second,
	}
	src := filepath.Join(coder.Dir, "src", "index.js")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte(countHooks), 0o644); err != nil {
		t.Fatal(err)
	}
	coder.Hooks = src
	app := &assistant.App{Root: dir, Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{"real": {ID: "real", Type: "anthropic", Options: assistant.ConnectorOptions{Host: srv.URL, Key: "sk-ant-test", Model: "claude-sonnet-4-5"}}},
		Assistants: map[string]*assistant.Assistant{"coder": coder},
	}
	rt, err := docker.New(ctx, docker.Options{Instance: "pipeline-kept-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	ws, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		App: Static{App: app}, Runtimes: map[string]sandbox.Runtime{"docker": rt}, DefaultRuntime: "docker",
		Workspaces: ws, Bridge: &BridgeConfig{Binary: bin, Dir: filepath.Join(os.TempDir(), "abk")},
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Close(cctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if n := len(p.live); n != 0 {
			t.Errorf("%d sandboxes left after close", n)
		}
	})
	return &keptEnv{p: p, app: app, srv: srv, coder: coder, ws: ws}
}

// turn runs one turn and returns its answer and timings.
func (e *keptEnv) turn(t testing.TB, ctx context.Context, chatID, msg string) (string, *chat.Timings) {
	t.Helper()
	var rec chattest.Recorder
	resp, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: chatID, AssistantID: "coder", Messages: user(msg)}, rec.Emit)
	if err != nil {
		t.Fatalf("turn %q: %v (events %+v)", msg, err, rec.Events())
	}
	return resp.Content, rec.Last().Final.Timings
}

// TestKeptChatInDocker: with keep_alive a chat's follow-up turns run on
// the CLI the first turn started, in the same sandbox; the Create hook
// runs every turn; the CLI keeps the conversation; a CLI that is gone
// resumes the session from disk in a new sandbox, and a changed assistant
// restarts the chat.
func TestKeptChatInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{Contains: "second"}, Text: "Two."},
		{When: &scripted.Match{Contains: "third"}, Text: "Three."},
		{When: &scripted.Match{Contains: "fourth"}, Text: "Four."},
		{When: &scripted.Match{Contains: "fifth"}, Text: "Five."},
	}, nil)
	want := []struct{ msg, answer, sandbox string }{
		{"first", "One.", chat.SandboxCold},
		{"second", "Two.", chat.SandboxWarm},
		{"third", "Three.", chat.SandboxWarm},
	}
	for _, w := range want {
		got, tm := e.turn(t, ctx, "c1", w.msg)
		if got != w.answer || tm.Sandbox != w.sandbox {
			t.Fatalf("%s: answer %q on a %s sandbox, want %q on %s (timings %+v)", w.msg, got, tm.Sandbox, w.answer, w.sandbox, tm)
		}
		t.Logf("%s: %s, first text after %.0f ms, total %.0f ms", w.msg, tm.Sandbox, tm.FirstTextMS, tm.TotalMS)
	}
	// The CLI saw the whole conversation in one session.
	reqs := e.srv.TurnRequests()
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "One.") || !strings.Contains(last, "Two.") {
		t.Errorf("the third model request lacks the earlier answers: %.300s", last)
	}
	if kept, idle := e.p.kept.stats(); kept != 1 || idle != 1 || len(e.p.live) != 1 {
		t.Errorf("kept %d, idle %d, live sandboxes %d; want 1, 1, 1", kept, idle, len(e.p.live))
	}
	c := e.p.kept.take("alice", "c1")
	data, err := c.sb.Workspace().ReadFile(ctx, "creates.txt", 100)
	if err != nil || strings.TrimSpace(string(data)) != "3" {
		t.Errorf("Create hook runs = %q (%v), want 3", data, err)
	}
	// A CLI that died: the next turn starts a new sandbox and resumes.
	c.cli.Close()
	e.p.kept.put(c)
	got, tm := e.turn(t, ctx, "c1", "fourth")
	if got != "Four." || tm.Sandbox != chat.SandboxCold {
		t.Fatalf("after the CLI died: %q on %s", got, tm.Sandbox)
	}
	reqs = e.srv.TurnRequests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "Three.") {
		t.Errorf("the resumed session lacks the earlier turns: %.300s", last)
	}
	// A changed assistant (as a reload makes) restarts the chat.
	changed := *e.coder
	e.app.Assistants["coder"] = &changed
	if got, tm := e.turn(t, ctx, "c1", "fifth"); got != "Five." || tm.Sandbox != chat.SandboxCold {
		t.Fatalf("after a change: %q on %s", got, tm.Sandbox)
	}
}
