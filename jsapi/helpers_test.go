package jsapi

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeAssistant lays out an assistant folder with files (path -> content)
// and returns it with Hooks pointing at src/index.ts (or the first src/index.*).
func writeAssistant(t testing.TB, files map[string]string) *assistant.Assistant {
	t.Helper()
	dir := t.TempDir()
	entry := ""
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p, "src/index.") {
			entry = p
		}
	}
	return &assistant.Assistant{ID: "coder", Dir: dir, Hooks: entry}
}

// load compiles hook source given as src/index.ts.
func load(t testing.TB, src string) *Hooks {
	t.Helper()
	h, err := Load(writeAssistant(t, map[string]string{"src/index.ts": src}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return h
}

// logBuffer is a slog text logger into a buffer, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fakeSandbox is the shared fake sandbox over a temp-dir workspace (unit
// tests only; the Docker test uses the real runtime), with its workspace
// and host folder at hand.
type fakeSandbox struct {
	*sandboxtest.Sandbox
	ws  *sandbox.Workspace
	dir string
}

// newFakeSandbox runs commands on the host, in the workspace, with HOME
// there and a git identity.
func newFakeSandbox(t testing.TB) *fakeSandbox {
	t.Helper()
	env := append(os.Environ(), "HOME="+sandbox.Workdir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	return newScriptedSandbox(t, sandboxtest.Config{Handler: &sandboxtest.Host{Env: env}})
}

// newScriptedSandbox runs commands as cfg says.
func newScriptedSandbox(t testing.TB, cfg sandboxtest.Config) *fakeSandbox {
	t.Helper()
	sb := sandboxtest.New(t, cfg)
	return &fakeSandbox{Sandbox: sb, ws: sb.Workspace(), dir: sb.Workspace().Dir()}
}

func asError(err error, target **Error) bool { return errors.As(err, target) }

type (
	chatMessage = chat.Message
	toolCall    = executor.ToolCall
)
