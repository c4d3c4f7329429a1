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
	"sync/atomic"
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

	mu      sync.Mutex
	removed bool
	procs   map[*process]struct{}
	terms   map[*terminal]struct{}
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID identifies the sandbox ("local-", the instance, a random suffix).
func (s *Sandbox) ID() string { return s.id }

// Workspace returns the mounted workspace.
func (s *Sandbox) Workspace() *sandbox.Workspace { return s.ws }

// Exec runs req to completion. A non-zero exit is not an error; a timeout
// returns the output so far and an error wrapping sandbox.ErrExecTimeout
// after killing everything the command started.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	start := time.Now()
	cmd, err := sandbox.ResolveExec(ctx, s.ws, nil, req)
	if err != nil {
		return nil, err
	}
	p, err := s.start(ctx, cmd, req)
	if err != nil {
		return nil, err
	}
	return sandbox.Collect(ctx, p, req.MaxOutput, cmd, start)
}

// Start runs req and streams its output as it is produced (stdout holds up
// to 1 MiB unread before the command is held back; stderr keeps its newest
// 1 MiB and never holds it back). When ctx ends, the command is killed.
func (s *Sandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	cmd, err := sandbox.ResolveExec(ctx, s.ws, nil, req)
	if err != nil {
		return nil, err
	}
	return s.start(ctx, cmd, req)
}

func (s *Sandbox) start(ctx context.Context, cmd sandbox.Command, req sandbox.ExecRequest) (*process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	env, err := sandbox.MergeEnv(s.env, req.Env)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	args := make([]string, 0, len(s.args)+4+len(cmd.Argv))
	args = append(args, s.args...)
	args = append(args, "--chdir", cmd.Dir, "--")
	args = append(args, cmd.Argv...)
	c := exec.Command(s.rt.bwrap, args...)
	c.Env = env
	c.Stdin = req.Stdin
	p := &process{
		sb:      s,
		cmd:     c,
		stdout:  sandbox.NewStream(1<<20, true),
		stderr:  sandbox.NewStream(1<<20, false),
		done:    make(chan struct{}),
		timeout: req.Timeout,
	}
	c.Stdout, c.Stderr = p.stdout, p.stderr
	// Its own process group, so a kill reaches bwrap and its helpers; the
	// pid namespace takes everything inside down with bwrap.
	c.SysProcAttr = &syscall.SysProcAttr{Credential: s.rt.cred, Setpgid: true}
	// Bounds how long Wait waits for stdin copying and for output pipes
	// still held open after the command ended.
	c.WaitDelay = 2 * time.Second

	s.mu.Lock()
	if s.removed {
		s.mu.Unlock()
		return nil, fmt.Errorf("exec in %s: %w", s.id, sandbox.ErrRemoved)
	}
	if err := c.Start(); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("exec: bwrap: %w: %w", sandbox.ErrEngineUnavailable, err)
	}
	s.procs[p] = struct{}{}
	s.mu.Unlock()

	go p.wait()
	if req.Timeout > 0 {
		p.timer = time.AfterFunc(req.Timeout, func() {
			p.timedOut.Store(true)
			_ = p.Kill()
		})
	}
	p.stopCtx = context.AfterFunc(ctx, func() { _ = p.Kill() })
	return p, nil
}

// Remove kills every command still running and waits (bounded by ctx and
// a few seconds) for them to end. Idempotent; the workspace is kept.
func (s *Sandbox) Remove(ctx context.Context) error {
	s.mu.Lock()
	s.removed = true
	procs := make([]*process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
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
	for _, p := range procs {
		_ = p.Kill()
		select {
		case <-p.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("remove %s: pid %d did not end: %w", s.id, p.cmd.Process.Pid, ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// process is one bwrap invocation.
type process struct {
	sb      *Sandbox
	cmd     *exec.Cmd
	stdout  *sandbox.Stream
	stderr  *sandbox.Stream
	done    chan struct{}
	code    int
	waitErr error

	timeout  time.Duration
	timer    *time.Timer
	timedOut atomic.Bool
	killed   atomic.Bool
	stopCtx  func() bool
}

var _ sandbox.Process = (*process)(nil)

func (p *process) wait() {
	err := p.cmd.Wait()
	p.code = p.cmd.ProcessState.ExitCode()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.code = 128 + int(ws.Signal())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		p.waitErr = err
	}
	p.stdout.Close()
	p.stderr.Close()
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.stopCtx != nil {
		p.stopCtx()
	}
	p.sb.mu.Lock()
	delete(p.sb.procs, p)
	p.sb.mu.Unlock()
	close(p.done)
}

func (p *process) Stdout() io.Reader { return p.stdout }
func (p *process) Stderr() io.Reader { return p.stderr }

// Wait waits for the command to end and returns its exit code (128+n when
// killed by signal n).
func (p *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.Kill()
		<-p.done
		return -1, ctx.Err()
	}
	if p.timedOut.Load() {
		return -1, sandbox.TimeoutError(p.timeout)
	}
	if p.waitErr != nil {
		return -1, fmt.Errorf("exec: %w", p.waitErr)
	}
	return p.code, nil
}

// Kill kills the command's pid namespace through its init, then bwrap's
// process group. Idempotent.
//
// The init (bwrap's child, pid 1 inside) runs in a session of its own
// (--new-session), so the group kill does not reach it, and its
// --die-with-parent signal was seen not to arrive now and then under load,
// leaving the command running: it is killed first, by pid, which takes
// every process in the namespace down with it.
func (p *process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if !p.killed.CompareAndSwap(false, true) {
		return nil
	}
	pid := p.cmd.Process.Pid
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
