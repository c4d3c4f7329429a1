package claude

import (
	"os"
	"testing"

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
