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
	procs   sandbox.Procs
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
	return &Sandbox{cfg: cfg}
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
// the way runtimes do (sandbox.ExecWith).
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	s.record(req, false)
	if req.MaxOutput == 0 {
		req.MaxOutput = s.cfg.MaxOutput
	}
	return sandbox.ExecWith(ctx, s.cfg.Workspace, s.cfg.Env, req, s.start)
}

// Start runs req through the Handler and streams its output.
func (s *Sandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	s.record(req, true)
	return sandbox.StartWith(ctx, s.cfg.Workspace, s.cfg.Env, req, s.start)
}

func (s *Sandbox) record(req sandbox.ExecRequest, streamed bool) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Req: req, Start: streamed})
	s.mu.Unlock()
}

func (s *Sandbox) start(ctx context.Context, cmd sandbox.Command, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case s.cfg.StartErr != nil:
		return nil, s.cfg.StartErr
	case s.cfg.Handler == nil:
		return nil, ErrNoHandler
	}
	return s.procs.Start(ctx, req.Timeout, func(stdout, stderr io.Writer) (sandbox.Execution, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.removed {
			return nil, fmt.Errorf("exec in %s: %w", s.cfg.ID, sandbox.ErrRemoved)
		}
		hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		return &execution{h: s.cfg.Handler, ctx: hctx, cancel: cancel, cmd: &Cmd{
			Req: req, Argv: cmd.Argv, Dir: cmd.Dir, RelDir: cmd.RelDir, Env: cmd.Env,
			Workspace: s.cfg.Workspace, Stdin: req.Stdin, Stdout: stdout, Stderr: stderr,
		}}, nil
	})
}

// Remove kills the commands still running and waits (bounded by ctx and
// a few seconds) for their handlers to return. Idempotent; the workspace
// is kept.
func (s *Sandbox) Remove(ctx context.Context) error {
	s.mu.Lock()
	s.removed = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return s.procs.KillAll(ctx, s.cfg.ID)
}

// execution is one command started in a fake Sandbox: its Handler runs
// with a context that Kill ends.
type execution struct {
	h      Handler
	cmd    *Cmd
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	finished bool // the handler returned
	killed   bool // killed before that
}

var _ sandbox.Execution = (*execution)(nil)

// Stream runs the handler.
func (e *execution) Stream() (int, error) {
	code, err := e.h.Run(e.ctx, e.cmd)
	e.mu.Lock()
	e.finished = true
	e.mu.Unlock()
	e.cancel()
	return code, err
}

// Exit is the handler's result; a killed command exits with 137 (128 +
// SIGKILL), as on the real runtimes.
func (e *execution) Exit(_ context.Context, code int, err error, _ bool) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.killed {
		return 137, nil
	}
	return code, err
}

// Kill ends the handler's context.
func (e *execution) Kill() error {
	e.mu.Lock()
	if !e.finished {
		e.killed = true
	}
	e.mu.Unlock()
	e.cancel()
	return nil
}

// Cut ends the handler's context too: a fake has no connection to cut.
func (e *execution) Cut() { e.cancel() }
