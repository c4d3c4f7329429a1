package jsapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
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

// recorder collects emitted events.
type recorder struct {
	mu     sync.Mutex
	events []chat.Event
}

func (r *recorder) emit(e chat.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []chat.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Event(nil), r.events...)
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

// fakeSandbox is a sandbox.Sandbox over a temp-dir workspace that runs
// commands on the host with os/exec (unit tests only; the Docker test uses
// the real runtime).
type fakeSandbox struct {
	ws  *sandbox.Workspace
	dir string
}

var _ sandbox.Sandbox = (*fakeSandbox)(nil)

func newFakeSandbox(t testing.TB) *fakeSandbox {
	t.Helper()
	dir := t.TempDir()
	ws, err := sandbox.OpenWorkspace(dir, -1, -1)
	t.Cleanup(func() { _ = ws.Close() })
	if err != nil {
		t.Fatal(err)
	}
	return &fakeSandbox{ws: ws, dir: dir}
}

func (f *fakeSandbox) ID() string                    { return "fake" }
func (f *fakeSandbox) Workspace() *sandbox.Workspace { return f.ws }
func (f *fakeSandbox) Remove(context.Context) error  { return nil }

func (f *fakeSandbox) Start(context.Context, sandbox.ExecRequest) (sandbox.Process, error) {
	return nil, errors.New("fake sandbox: Start is not supported")
}

func (f *fakeSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	rel, err := sandbox.Rel(req.Dir)
	if err != nil {
		return nil, err
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	argv := req.Argv
	if req.Shell {
		argv = []string{"/bin/sh", "-c", argv[0]}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(f.dir, rel)
	cmd.Env = append(os.Environ(), "HOME="+f.dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = req.Stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	res := &sandbox.ExecResult{Stdout: stdout.String(), Stderr: stderr.String(), Cwd: sandbox.Workdir, Duration: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil && req.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, sandbox.ErrExecTimeout
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		res.ExitCode = 127
		res.Stderr = err.Error()
	}
	return res, nil
}

func asError(err error, target **Error) bool { return errors.As(err, target) }

type (
	chatMessage = chat.Message
	toolCall    = executor.ToolCall
)
