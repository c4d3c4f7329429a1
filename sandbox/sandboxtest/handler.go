package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Handler plays the commands run in a fake Sandbox.
type Handler interface {
	// Run plays cmd: it writes the command's output to cmd.Stdout and
	// cmd.Stderr and returns its exit code, or an error that Wait (and
	// Exec) return instead, as a runtime that lost the process would. ctx
	// ends when the command is killed (Kill, its timeout, the caller's
	// context, Remove): a handler that blocks must return then, and what
	// it returns is overridden by the kill's outcome.
	Run(ctx context.Context, cmd *Cmd) (exitCode int, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, cmd *Cmd) (int, error)

// Run calls f.
func (f HandlerFunc) Run(ctx context.Context, cmd *Cmd) (int, error) { return f(ctx, cmd) }

// Cmd is one command as a Handler sees it, checked and resolved as a
// runtime would (sandbox.ResolveExec).
type Cmd struct {
	// Req is the request as given.
	Req sandbox.ExecRequest
	// Argv is the program and its arguments; a shell script is wrapped in
	// sandbox.Shell -c.
	Argv []string
	// Dir is the working directory as the sandbox sees it (under
	// sandbox.Workdir), RelDir the same relative to the workspace ("."
	// for its root). It exists.
	Dir, RelDir string
	// Env is the sandbox's environment merged with the request's, as
	// sorted KEY=value pairs.
	Env []string
	// Workspace is the sandbox's workspace.
	Workspace *sandbox.Workspace
	// Stdin is the request's stdin (nil: none).
	Stdin io.Reader
	// Stdout and Stderr receive the command's output.
	Stdout, Stderr io.Writer
}

// HostDir returns the host folder of the working directory.
func (c *Cmd) HostDir() string { return filepath.Join(c.Workspace.Dir(), c.RelDir) }

// Reply is a scripted command: it writes Stderr, then Stdout, then, with
// Hang, runs until it is killed; it exits with ExitCode, or fails with Err.
type Reply struct {
	Stdout, Stderr string
	ExitCode       int
	// Err fails the command: Wait and Exec return it instead of an exit
	// code (a lost sandbox, sandbox.ErrExecTimeout from the runtime).
	Err error
	// Hang keeps the command running until it is killed.
	Hang bool
}

// Run plays r.
func (r Reply) Run(ctx context.Context, cmd *Cmd) (int, error) {
	_, _ = io.WriteString(cmd.Stderr, r.Stderr)
	_, _ = io.WriteString(cmd.Stdout, r.Stdout)
	if r.Hang {
		<-ctx.Done()
		return -1, nil
	}
	return r.ExitCode, r.Err
}

// Echo answers every command with its argv as requested, joined by spaces,
// and a newline on stdout, and exits 0.
var Echo Handler = HandlerFunc(func(_ context.Context, cmd *Cmd) (int, error) {
	_, err := io.WriteString(cmd.Stdout, strings.Join(cmd.Req.Argv, " ")+"\n")
	return 0, err
})

// Host runs each command on the host with os/exec, in the working
// directory's host folder: for unit tests that need real programs (git,
// node, a coding-agent CLI) and their effect on the workspace without a
// runtime. It is not a sandbox: nothing is confined or isolated. Paths
// under sandbox.Workdir in argv and in environment values are rewritten
// to the workspace folder, since the program sees the host's file system.
// A program that cannot start exits with 127 and says why on stderr, as a
// shell would. A killed command's whole process group is killed.
type Host struct {
	// Env is the environment every command starts from, before the
	// sandbox's and the request's (nil: an empty one).
	Env []string
	// Tee, when set, receives a copy of every command's stdout.
	Tee io.Writer
}

// Run runs cmd on the host.
func (h *Host) Run(ctx context.Context, cmd *Cmd) (int, error) {
	dir := cmd.Workspace.Dir()
	mapPath := func(s string) string { return strings.ReplaceAll(s, sandbox.Workdir, dir) }
	argv := make([]string, len(cmd.Argv))
	for i, a := range cmd.Argv {
		argv[i] = mapPath(a)
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = cmd.HostDir()
	for _, kv := range append(append([]string(nil), h.Env...), cmd.Env...) {
		c.Env = append(c.Env, mapPath(kv))
	}
	c.Stdin = cmd.Stdin
	c.Stdout, c.Stderr = cmd.Stdout, cmd.Stderr
	if h.Tee != nil {
		c.Stdout = io.MultiWriter(cmd.Stdout, h.Tee)
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Bounds the wait for output pipes a background process still holds.
	c.WaitDelay = 2 * time.Second
	if err := c.Start(); err != nil {
		_, _ = fmt.Fprintf(cmd.Stderr, "%s: %v\n", cmd.Argv[0], err)
		return 127, nil
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
	defer stop()
	err := c.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	case errors.Is(err, exec.ErrWaitDelay):
		return c.ProcessState.ExitCode(), nil
	}
	return -1, err
}
