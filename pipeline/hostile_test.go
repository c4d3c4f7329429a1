package pipeline

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// TestNextHookReadsAgentFIFO: in a real Docker sandbox the agent (the
// real Claude Code CLI, a scripted model) runs `mkfifo
// /workspace/notes.txt` with its Bash tool; the Next hook then reads
// notes.txt. The read is refused at once, so the turn ends promptly with a
// next_hook_failed notice naming the FIFO, the container is removed, and
// no goroutine of the turn outlives it. (The read used to block forever.)
func TestNextHookReadsAgentFIFO(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	image := testenv.Image(t)
	bin := testenv.Agentbox(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "mkfifo /workspace/notes.txt && echo planted", "description": "plant"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "I left you a note."},
	}})
	defer srv.Close()

	dir := t.TempDir()
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	a := &assistant.Assistant{
		ID: "fifo", Dir: filepath.Join(dir, "fifo"), Connector: "model",
		Sandbox: &assistant.Sandbox{Command: "claude", Image: image, Timeout: time.Minute, MemoryBytes: 1 << 30, CPUs: 1,
			Arguments: chat.Arguments{MaxTurns: 5, PermissionMode: "acceptEdits", AllowedTools: []string{"Bash"}}},
		HookTimeout: 3 * time.Second,
	}
	src := filepath.Join(a.Dir, "src", "index.js")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte(`function Next(ctx) { return {data: ctx.sandbox.ReadFile("notes.txt")}; }`), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Hooks = src
	app := &assistant.App{Root: dir, Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{"model": {ID: "model", Type: "anthropic", Options: assistant.ConnectorOptions{Host: srv.URL, Key: "k", Model: "claude-sonnet-4-5"}}},
		Assistants: map[string]*assistant.Assistant{"fifo": a},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{Instance: "pipeline-fifo-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close(context.Background()) }()
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	ws, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{
		App: Static{App: app}, Runtimes: map[string]sandbox.Runtime{"docker": rt}, DefaultRuntime: "docker",
		Workspaces: ws, Bridge: &BridgeConfig{Binary: bin, Dir: filepath.Join(os.TempDir(), "abp")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()

	var mu sync.Mutex
	var notices []string
	var results strings.Builder
	emit := func(e chat.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Event == chat.Start && e.Type == chat.TypeNotice {
			notices = append(notices, e.Text)
		}
		if e.Event == chat.Start && e.Type == chat.TypeToolResult {
			c, _ := e.Props["content"].(string)
			results.WriteString(c)
		}
	}
	start := time.Now()
	_, err = p.Chat(ctx, &Request{UserID: "mallory", ChatID: "fifo", AssistantID: "fifo",
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "plant a fifo"}}}, emit)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("turn: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(results.String(), "planted") {
		t.Fatalf("the agent did not plant the FIFO: %q", results.String())
	}
	if len(notices) != 1 || !strings.Contains(notices[0], `"notes.txt": is a named pipe (FIFO)`) {
		t.Errorf("notices %q, want the Next hook's failure naming the FIFO", notices)
	}
	if took > 90*time.Second {
		t.Errorf("the turn took %s", took)
	}
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.agentbox.instance=pipeline-fifo-test").Output()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("containers left: %q, %v", out, err)
	}
}
