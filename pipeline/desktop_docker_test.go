package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/desktop/desktoptest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// screenshotHook saves the desktop's screen after the turn.
const screenshotHook = `
function Next(ctx, payload) {
  ctx.workspace.WriteFile("screen.png", ctx.computer.Screenshot());
  return null;
}
`

// TestDesktopInDocker: an assistant with sandbox.desktop gets the desktop
// image's sandbox with its desktop started before the agent runs, and the
// agent told of it; the agent (the real Claude Code CLI, its Bash tool
// call scripted) serves a page in the sandbox and opens it in the
// desktop's Chromium over CDP; the Next hook's ctx.computer.Screenshot()
// shows the page on the X display.
func TestDesktopInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	img := testenv.CLIImage(t, "desktop")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script := "(" + desktoptest.ServeScript("8000") + ") && agentbox-desktop open http://127.0.0.1:8000/"
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "show me"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": script}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "It is on the desktop."},
	}, nil)
	e.coder.Sandbox.Image = img
	e.coder.Sandbox.MemoryBytes = 2 << 30
	e.coder.Sandbox.Desktop = &assistant.Desktop{Resolution: "1024x768"}
	if err := os.WriteFile(e.coder.Hooks, []byte(screenshotHook), 0o644); err != nil {
		t.Fatal(err)
	}

	if got, _ := e.turn(t, ctx, "c1", "show me the page"); got != "It is on the desktop." {
		t.Fatalf("answer %q", got)
	}
	var told, opened bool
	for _, r := range e.srv.Requests() {
		told = told || bytes.Contains(r.Body, []byte("agentbox-desktop open URL"))
		opened = opened || bytes.Contains(r.Body, []byte("opened http://127.0.0.1:8000/"))
	}
	if !told {
		t.Error("the agent was not told of its desktop (desktop.AgentHint)")
	}
	if !opened {
		t.Error("the Bash tool's result does not say the page opened")
	}
	dir, err := e.ws.Path("alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "screen.png"))
	if err != nil {
		t.Fatalf("the Next hook's screenshot: %v", err)
	}
	shot := desktoptest.Decode(t, b)
	if b := shot.Bounds(); b.Dx() != 1024 || b.Dy() != 768 {
		t.Fatalf("screenshot of %v, want 1024x768", b)
	}
	// The hook's screenshot may come before Chromium painted the page it
	// loaded: the kept sandbox's screen shows it within a while.
	e.p.kept.mu.Lock()
	kc := e.p.kept.byKey[keptKey("alice", "c1")]
	e.p.kept.mu.Unlock()
	if kc == nil {
		t.Fatal("the chat's sandbox is not kept")
	}
	left, right := desktoptest.Halves(shot.Bounds())
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if desktoptest.Share(shot, left, desktoptest.Orange) >= 0.9 && desktoptest.Share(shot, right, desktoptest.Blue) >= 0.9 {
			break
		}
		png, err := desktop.Screenshot(ctx, kc.sb)
		if err != nil {
			t.Fatal(err)
		}
		shot = desktoptest.Decode(t, png)
	}
	desktoptest.ShowsPage(t, shot)
	if !strings.Contains(desktop.AgentHint, "127.0.0.1:9222") {
		t.Error("the hint does not name the CDP address")
	}
}
