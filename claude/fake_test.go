package claude

import (
	"context"
	"os"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// hostSandbox is a unit-test stand-in for sandbox.Sandbox: the shared
// fake, whose commands run on the host in a temporary workspace
// (sandboxtest.Host rewrites /workspace paths in argv and env to the host
// folder). The integration tests use the real Docker runtime instead.
type hostSandbox struct {
	*sandboxtest.Sandbox
	// host runs the commands; its Tee, when set, receives a copy of
	// stdout (transcript recording).
	host *sandboxtest.Host
	ws   *sandbox.Workspace
}

func newHostSandbox(t *testing.T) *hostSandbox {
	t.Helper()
	ws := sandboxtest.TempWorkspace(t)
	host := &sandboxtest.Host{Env: []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + t.TempDir(),
		// What a parent Claude Code session would leave behind.
		"CLAUDECODE=1",
		"CLAUDE_CODE_ENTRYPOINT=cli",
	}}
	return &hostSandbox{Sandbox: sandboxtest.New(t, sandboxtest.Config{ID: "host", Workspace: ws, Handler: host}), host: host, ws: ws}
}

// writeHostFile is a small helper for tests that seed workspaces.
func writeHostFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readyWorkspace runs a turn of assistant a (user u, chat c) with system
// prompt system in a sandbox of ws that runs nothing: the turn fails
// once the workspace is ready for the CLI (the driver emptied its config
// dir but for the transcripts, prepare did the rest).
func readyWorkspace(t *testing.T, ctx context.Context, ws *sandbox.Workspace, a *assistant.Assistant, system string) {
	t.Helper()
	req := &executor.Request{Assistant: a, UserID: "u", ChatID: "c", System: system,
		Input:   []chat.Message{{Role: chat.RoleUser, Content: "hi"}},
		Sandbox: sandboxtest.NewSandbox(sandboxtest.Config{ID: "ws-only", Workspace: ws}), Emit: func(chat.Event) {}}
	if _, err := New(Options{}).Run(ctx, req); err == nil {
		t.Fatal("the turn ran in a sandbox that runs nothing")
	}
}
