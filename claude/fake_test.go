package claude

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// hostSandbox is a unit-test stand-in for sandbox.Sandbox: it runs commands
// on the host with os/exec in a temporary workspace, rewriting the
// sandbox's /workspace paths in argv and env to the host folder. The
// integration tests use the real Docker runtime instead.
type hostSandbox struct {
	ws   *sandbox.Workspace
	home string
	// baseEnv is the environment every command inherits (like a
	// container's image env).
	baseEnv []string
	// tee, when set, receives a copy of stdout (transcript recording).
	tee io.Writer

	mu    sync.Mutex
	procs []*hostProc
}

var _ sandbox.Sandbox = (*hostSandbox)(nil)

func newHostSandbox(t *testing.T) *hostSandbox {
	t.Helper()
	ws, err := sandbox.OpenWorkspace(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	home := t.TempDir()
	return &hostSandbox{ws: ws, home: home, baseEnv: []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		// What a parent Claude Code session would leave behind.
		"CLAUDECODE=1",
		"CLAUDE_CODE_ENTRYPOINT=cli",
	}}
}

func (h *hostSandbox) ID() string                    { return "host" }
func (h *hostSandbox) Workspace() *sandbox.Workspace { return h.ws }
func (h *hostSandbox) Remove(context.Context) error  { return nil }

func (h *hostSandbox) mapPath(s string) string {
	return strings.ReplaceAll(s, sandbox.Workdir, h.ws.Dir())
}

func (h *hostSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	return nil, errors.New("hostSandbox: Exec not implemented")
}

func (h *hostSandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	argv := make([]string, len(req.Argv))
	for i, a := range req.Argv {
		argv[i] = h.mapPath(a)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = h.ws.Dir()
	cmd.Env = append([]string(nil), h.baseEnv...)
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+h.mapPath(v))
	}
	cmd.Stdin = req.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// io.Pipe rather than StdoutPipe: Wait then returns only after all
	// output was copied, and the readers see EOF after the last byte.
	or, ow := io.Pipe()
	er, ew := io.Pipe()
	cmd.Stdout, cmd.Stderr = ow, ew
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &hostProc{cmd: cmd, stdout: or, stderr: er, done: make(chan struct{})}
	if h.tee != nil {
		p.stdout = io.TeeReader(or, h.tee)
	}
	go func() {
		p.err = cmd.Wait()
		ow.Close()
		ew.Close()
		close(p.done)
	}()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p, nil
}

type hostProc struct {
	cmd    *exec.Cmd
	stdout io.Reader
	stderr io.Reader
	done   chan struct{}
	err    error
}

func (p *hostProc) Stdout() io.Reader { return p.stdout }
func (p *hostProc) Stderr() io.Reader { return p.stderr }

func (p *hostProc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.Kill()
		<-p.done
		return -1, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, p.err
}

func (p *hostProc) Kill() error {
	if p.cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// writeHostFile is a small helper for tests that seed workspaces.
func writeHostFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
