package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Sandbox is a set of bwrap invocations sharing one workspace. It is safe
// for concurrent use.
type Sandbox struct {
	rt   *Runtime
	id   string
	ws   *sandbox.Workspace
	args []string
	env  map[string]string

	procs sandbox.Procs

	mu      sync.Mutex
	removed bool
	terms   map[*terminal]struct{}
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID identifies the sandbox ("local-", the instance, a random suffix).
func (s *Sandbox) ID() string { return s.id }

// Workspace returns the mounted workspace.
func (s *Sandbox) Workspace() *sandbox.Workspace { return s.ws }

// Exec runs req to completion as sandbox.Sandbox says, in a bwrap of its
// own; a timeout kills its pid namespace, everything the command started.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	return sandbox.ExecWith(ctx, s.ws, s.env, req, s.start)
}

// Start runs req in a bwrap of its own and streams its output (see
// sandbox.Procs.Start).
func (s *Sandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	return sandbox.StartWith(ctx, s.ws, s.env, req, s.start)
}

func (s *Sandbox) start(ctx context.Context, cmd sandbox.Command, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	args := make([]string, 0, len(s.args)+4+len(cmd.Argv))
	args = append(args, s.args...)
	args = append(args, "--chdir", cmd.Dir, "--")
	args = append(args, cmd.Argv...)
	return s.procs.Start(ctx, req.Timeout, func(stdout, stderr io.Writer) (sandbox.Execution, error) {
		c := exec.Command(s.rt.bwrap, args...)
		c.Env = cmd.Env
		c.Stdin = req.Stdin
		c.Stdout, c.Stderr = stdout, stderr
		// Its own process group, so a kill reaches bwrap and its helpers;
		// the pid namespace takes everything inside down with bwrap.
		c.SysProcAttr = &syscall.SysProcAttr{Credential: s.rt.cred, Setpgid: true}
		// Bounds how long Wait waits for stdin copying and for output
		// pipes still held open after the command ended.
		c.WaitDelay = 2 * time.Second
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.removed {
			return nil, fmt.Errorf("exec in %s: %w", s.id, sandbox.ErrRemoved)
		}
		if err := c.Start(); err != nil {
			return nil, fmt.Errorf("exec: bwrap: %w: %w", sandbox.ErrEngineUnavailable, err)
		}
		return &execution{cmd: c}, nil
	})
}

// Remove kills every command still running and waits (bounded by ctx and
// a few seconds) for them to end. Idempotent; the workspace is kept.
func (s *Sandbox) Remove(ctx context.Context) error {
	s.mu.Lock()
	s.removed = true
	terms := make([]*terminal, 0, len(s.terms))
	for t := range s.terms {
		terms = append(terms, t)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var errs []error
	for _, t := range terms {
		if err := t.Close(); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", s.id, err))
		}
	}
	errs = append(errs, s.procs.KillAll(ctx, s.id))
	return errors.Join(errs...)
}

// execution is one bwrap invocation; its output comes over pipes.
type execution struct {
	cmd *exec.Cmd
}

var _ sandbox.Execution = (*execution)(nil)

// Stream waits for bwrap to exit and its output to end; the exit code is
// 128+n when it was killed by signal n.
func (e *execution) Stream() (int, error) {
	err := e.cmd.Wait()
	code := e.cmd.ProcessState.ExitCode()
	if ws, ok := e.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return code, err
	}
	return code, nil
}

// Exit reports a failure of Wait itself.
func (e *execution) Exit(_ context.Context, code int, err error, _ bool) (int, error) {
	if err != nil {
		return -1, fmt.Errorf("exec: %w", err)
	}
	return code, nil
}

// Kill kills the command's pid namespace through its init, then bwrap's
// process group.
//
// The init (bwrap's child, pid 1 inside) runs in a session of its own
// (--new-session), so the group kill does not reach it, and its
// --die-with-parent signal was seen not to arrive now and then under load,
// leaving the command running: it is killed first, by pid, which takes
// every process in the namespace down with it.
func (e *execution) Kill() error {
	pid := e.cmd.Process.Pid
	var errs []error
	for _, child := range childrenOf(pid) {
		if err := syscall.Kill(child, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", child, err))
		}
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
	}
	return errors.Join(errs...)
}

// Cut does nothing: the pipes are bwrap's, and Wait stops waiting for
// them soon after it exits (WaitDelay).
func (e *execution) Cut() {}

// childrenOf lists the processes whose parent is pid: from the kernel's
// list (/proc/PID/task/PID/children) when it has one, else by reading
// every process's parent.
func childrenOf(pid int) []int {
	var out []int
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which may hold spaces: state, ppid.
		i := bytes.LastIndexByte(b, ')')
		if f := strings.Fields(string(b[i+1:])); i >= 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}
