// Package sandboxtest tests sandbox runtimes and the code that uses them.
//
// Sandbox and Runtime are fakes for unit tests of other packages: a narrow,
// honest stand-in for a real runtime. A fake sandbox has a real workspace
// folder (so file operations behave as they do on a runtime), checks every
// request the way runtimes do (sandbox.ResolveExec), records the commands
// it was asked to run, and leaves what a command does to a Handler: a
// scripted Reply, Echo, or Host, which runs the command on the host.
// Timeouts, kills, cancellation and output caps follow the sandbox
// contracts. Integration tests use the real runtimes instead.
//
// Run is the conformance suite every sandbox.Runtime passes, the way
// testing/fstest.TestFS checks file systems: a new runtime is done when
// Run passes against it on its real engine.
package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Config says how a fake Sandbox behaves.
type Config struct {
	// ID is what ID returns (default "fake").
	ID string
	// Workspace is the sandbox's workspace. Nil makes a sandbox without
	// one, whose commands all fail (as sandbox.ResolveExec does).
	Workspace *sandbox.Workspace
	// Env is the sandbox's environment (a Spec's Env); a request's Env is
	// merged over it.
	Env map[string]string
	// Handler runs the commands. Nil: a sandbox that cannot run anything;
	// every command fails to start with ErrNoHandler.
	Handler Handler
	// StartErr, when set, fails every Exec and Start after the request is
	// checked and before anything runs, the way an engine that refuses to
	// create the process does.
	StartErr error
	// MaxOutput is the cap Exec applies to each of stdout and stderr when
	// the request sets none (0: sandbox.DefaultMaxOutput); a small one lets
	// a test see truncated output.
	MaxOutput int
}

// ErrNoHandler is the error of a command run in a fake Sandbox that has
// no Handler.
var ErrNoHandler = errors.New("sandboxtest: this fake sandbox runs no commands (no Handler)")

// Sandbox is a fake sandbox.Sandbox (see the package comment). It is safe
// for concurrent use.
type Sandbox struct {
	cfg Config

	mu      sync.Mutex
	removed bool
	calls   []Call
	procs   map[*process]struct{}
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// Call is one command a fake Sandbox was asked to run, valid or not.
type Call struct {
	// Req is the request as given.
	Req sandbox.ExecRequest
	// Start reports a Start; false is an Exec.
	Start bool
}

// NewSandbox returns a fake sandbox as cfg says.
func NewSandbox(cfg Config) *Sandbox {
	if cfg.ID == "" {
		cfg.ID = "fake"
	}
	return &Sandbox{cfg: cfg, procs: map[*process]struct{}{}}
}

// New returns a fake sandbox as cfg says, over a fresh workspace in a
// temporary folder (TempWorkspace) unless cfg names one.
func New(t testing.TB, cfg Config) *Sandbox {
	t.Helper()
	if cfg.Workspace == nil {
		cfg.Workspace = TempWorkspace(t)
	}
	return NewSandbox(cfg)
}

// TempWorkspace opens a workspace in a new temporary folder, closed and
// removed when the test ends. Its files keep the test process's owner.
func TempWorkspace(t testing.TB) *sandbox.Workspace {
	t.Helper()
	ws, err := sandbox.OpenWorkspace(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatalf("sandboxtest: %v", err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// ID returns Config.ID.
func (s *Sandbox) ID() string { return s.cfg.ID }

// Workspace returns Config.Workspace.
func (s *Sandbox) Workspace() *sandbox.Workspace { return s.cfg.Workspace }

// Calls returns the commands asked for so far, in order.
func (s *Sandbox) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Removed reports whether Remove was called.
func (s *Sandbox) Removed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed
}

// Exec runs req through the Handler to completion, capturing its output
// the way runtimes do (sandbox.Collect).
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	start := time.Now()
	p, cmd, err := s.start(ctx, req, false)
	if err != nil {
		return nil, err
	}
	max := req.MaxOutput
	if max == 0 {
		max = s.cfg.MaxOutput
	}
	return sandbox.Collect(ctx, p, max, cmd, start)
}

// Start runs req through the Handler and streams its output.
func (s *Sandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, _, err := s.start(ctx, req, true)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Sandbox) start(ctx context.Context, req sandbox.ExecRequest, streamed bool) (*process, sandbox.Command, error) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Req: req, Start: streamed})
	s.mu.Unlock()
	cmd, err := sandbox.ResolveExec(ctx, s.cfg.Workspace, s.cfg.Env, req)
	if err != nil {
		return nil, cmd, err
	}
	if err := ctx.Err(); err != nil {
		return nil, cmd, err
	}
	switch {
	case s.cfg.StartErr != nil:
		return nil, cmd, s.cfg.StartErr
	case s.cfg.Handler == nil:
		return nil, cmd, ErrNoHandler
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil, cmd, fmt.Errorf("exec in %s: %w", s.cfg.ID, sandbox.ErrRemoved)
	}
	p := &process{
		sb:      s,
		stdout:  sandbox.NewStream(1<<20, true),
		stderr:  sandbox.NewStream(1<<20, false),
		done:    make(chan struct{}),
		timeout: req.Timeout,
	}
	s.procs[p] = struct{}{}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	p.stopCtx = context.AfterFunc(ctx, func() { _ = p.Kill() })
	if req.Timeout > 0 {
		p.timer = time.AfterFunc(req.Timeout, func() {
			p.timedOut.Store(true)
			_ = p.Kill()
		})
	}
	c := &Cmd{
		Req: req, Argv: cmd.Argv, Dir: cmd.Dir, RelDir: cmd.RelDir, Env: cmd.Env,
		Workspace: s.cfg.Workspace, Stdin: req.Stdin, Stdout: p.stdout, Stderr: p.stderr,
	}
	go p.run(hctx, s.cfg.Handler, c)
	return p, cmd, nil
}

// Remove kills the commands still running and waits (bounded by ctx and
// a few seconds) for their handlers to return. Idempotent; the workspace
// is kept.
func (s *Sandbox) Remove(ctx context.Context) error {
	s.mu.Lock()
	s.removed = true
	procs := make([]*process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var errs []error
	for _, p := range procs {
		_ = p.Kill()
		select {
		case <-p.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("remove %s: a handler did not return after its context ended: %w", s.cfg.ID, ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// process is one command started in a fake Sandbox.
type process struct {
	sb      *Sandbox
	stdout  *sandbox.Stream
	stderr  *sandbox.Stream
	done    chan struct{}
	code    int
	err     error
	cancel  context.CancelFunc
	stopCtx func() bool

	timeout  time.Duration
	timer    *time.Timer
	timedOut atomic.Bool

	mu       sync.Mutex
	finished bool // the handler returned
	killed   bool // killed before that
}

var _ sandbox.Process = (*process)(nil)

func (p *process) run(ctx context.Context, h Handler, c *Cmd) {
	code, err := h.Run(ctx, c)
	p.mu.Lock()
	p.finished = true
	p.mu.Unlock()
	p.code, p.err = code, err
	p.stdout.Close()
	p.stderr.Close()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.stopCtx()
	p.cancel()
	p.sb.mu.Lock()
	delete(p.sb.procs, p)
	p.sb.mu.Unlock()
	close(p.done)
}

func (p *process) Stdout() io.Reader { return p.stdout }
func (p *process) Stderr() io.Reader { return p.stderr }

// Wait waits for the handler to return. A killed command exits with 137
// (128 + SIGKILL), as on the real runtimes.
func (p *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.Kill()
		<-p.done
		return -1, ctx.Err()
	}
	switch {
	case p.timedOut.Load():
		return -1, sandbox.TimeoutError(p.timeout)
	case p.killed:
		return 137, nil
	}
	return p.code, p.err
}

// Kill ends the handler's context. Idempotent; a no-op once the command
// ended.
func (p *process) Kill() error {
	p.mu.Lock()
	if !p.finished {
		p.killed = true
	}
	p.mu.Unlock()
	p.cancel()
	return nil
}
