package pipeline

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

// terminalEnv is a pipeline with the local (bubblewrap) runtime and two
// sandboxed assistants.
func terminalEnv(t *testing.T) *Pipeline {
	t.Helper()
	rt, err := local.New(local.Options{Bwrap: testenv.Bwrap(t)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	wss, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	box := func(id string) *assistant.Assistant {
		return &assistant.Assistant{ID: id, Connector: "c", Sandbox: &assistant.Sandbox{Command: "claude"}}
	}
	app := &assistant.App{Root: dir, Config: &assistant.AppConfig{}, Assistants: map[string]*assistant.Assistant{
		"coder": box("coder"), "other": box("other"), "qa": {ID: "qa", Connector: "c"},
	}}
	p, err := New(Config{App: Static{App: app}, Runtimes: map[string]sandbox.Runtime{"local": rt}, DefaultRuntime: "local", Workspaces: wss})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func TestTerminal(t *testing.T) {
	p := terminalEnv(t)
	ctx := context.Background()
	// Two sandboxed assistants and a chat nobody has used: say which.
	var ce *chat.Error
	if _, err := p.OpenTerminal(ctx, TerminalRequest{UserID: "u", ChatID: "c"}); !errors.As(err, &ce) || !strings.Contains(ce.Message, "name the one") {
		t.Fatalf("no assistant: %v", err)
	}
	if _, err := p.OpenTerminal(ctx, TerminalRequest{UserID: "u", ChatID: "c", AssistantID: "qa"}); err == nil || !strings.Contains(err.Error(), "without a sandbox") {
		t.Fatalf("unsandboxed assistant: %v", err)
	}
	if _, err := p.OpenTerminal(ctx, TerminalRequest{UserID: "u", ChatID: "../c", AssistantID: "coder"}); err == nil {
		t.Fatal("bad chat id: no error")
	}
	term, err := p.OpenTerminal(ctx, TerminalRequest{UserID: "u", ChatID: "c", AssistantID: "coder", Rows: 20, Cols: 70})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	var out testenv.SyncBuffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, term); close(copied) }()
	if _, err := io.WriteString(term, "echo hi > made-here; stty size; echo \"ok-$((40+2))\"; exit 7\n"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	code, err := term.Wait(wctx)
	if code != 7 || err != nil {
		t.Fatalf("wait = %d, %v; output:\n%s", code, err, out.String())
	}
	<-copied
	if s := out.String(); !strings.Contains(s, "ok-42") || !strings.Contains(s, "20 70") {
		t.Errorf("output:\n%q", s)
	}
	ws, release, err := p.Workspace(ctx, "u", "c")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ws.ReadFile(ctx, "made-here", 0)
	release()
	if err != nil || string(b) != "hi\n" {
		t.Errorf("file written in the terminal: %q, %v", b, err)
	}
	if err := term.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case <-term.Done():
	default:
		t.Error("Done not closed after Close")
	}

	// Deleting the chat closes its terminals.
	term2, err := p.OpenTerminal(ctx, TerminalRequest{UserID: "u", ChatID: "c", AssistantID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if term2.AssistantID != "other" || term2.Runtime != "local" {
		t.Errorf("terminal of %q on %q", term2.AssistantID, term2.Runtime)
	}
	if err := p.DeleteChat(ctx, "u", "c"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the chat's terminal is still open after the chat was deleted")
	}
}
