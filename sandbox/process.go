package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// StartFunc starts a command that ResolveExec checked in a runtime's
// sandbox (req gives its stdin and timeout) and returns its Process,
// normally through Procs.Start.
type StartFunc func(ctx context.Context, cmd Command, req ExecRequest) (Process, error)

// ExecWith is Sandbox.Exec for a runtime: it checks req for a sandbox with
// workspace ws and environment env (ResolveExec), starts the command with
// start and reads it to its end (Collect).
func ExecWith(ctx context.Context, ws *Workspace, env map[string]string, req ExecRequest, start StartFunc) (*ExecResult, error) {
	begin := time.Now()
	cmd, err := ResolveExec(ctx, ws, env, req)
	if err != nil {
		return nil, err
	}
	p, err := start(ctx, cmd, req)
	if err != nil {
		return nil, err
	}
	return Collect(ctx, p, req.MaxOutput, cmd, begin)
}

// StartWith is Sandbox.Start for a runtime: it checks req as ExecWith
// does and starts the command with start.
func StartWith(ctx context.Context, ws *Workspace, env map[string]string, req ExecRequest, start StartFunc) (Process, error) {
	cmd, err := ResolveExec(ctx, ws, env, req)
	if err != nil {
		return nil, err
	}
	return start(ctx, cmd, req)
}

// Execution is a command a runtime started in one of its sandboxes, as its
// engine sees it: how the output reaches the host, how the command is
// killed and how its exit is read. A runtime fills it with only what is
// its own; Proc wraps it in the Process every runtime returns and owns
// what they share: the output streams, the timeout, the end of the
// caller's context, a kill done once that falls back to cutting the
// output, and Wait.
type Execution interface {
	// Stream carries the command's output into the writers it was started
	// with until the output ends (the command exited, or Cut was called),
	// frees the connection, and returns the exit code when the transport
	// reports one, or the transport's failure (not the command's exit).
	// Proc calls it once, in a goroutine of its own.
	Stream() (code int, err error)
	// Kill kills the command's whole process tree. Proc calls it at most
	// once, while the output still flows. An error wrapping ErrRemoved
	// says that the sandbox is gone, which ends the command: Proc then
	// cuts the output and the kill succeeds.
	Kill() error
	// Cut ends the output without waiting for the command (it closes the
	// connection), so that Stream returns. Proc calls it at most once,
	// concurrently with Stream.
	Cut()
	// Exit turns how Stream ended into Wait's result, once the output
	// ended by itself or was cut (cut) and neither the timeout nor the
	// caller's context ended the command.
	Exit(ctx context.Context, code int, err error, cut bool) (int, error)
}

// procOutput bounds the unread output of a Proc's streams (Procs.Start).
const procOutput = 1 << 20

// cutAfter is how long a killed command's output may go on before it is
// cut: a process that left the command's group still holds it.
const cutAfter = 2 * time.Second

// Proc is the Process of an Execution (see Procs.Start): Wait returns
// ErrExecTimeout once the request's timeout kills the command, and the
// caller's context ending kills it too; Kill is idempotent. It is safe
// for concurrent use.
type Proc struct {
	e      Execution
	stdout *Stream
	stderr *Stream
	done   chan struct{}
	code   int
	err    error

	timeout  time.Duration
	timer    *time.Timer
	timedOut atomic.Bool
	stopCtx  func() bool

	killOnce sync.Once
	killErr  error
	cutOnce  sync.Once
	wasCut   atomic.Bool
}

var _ Process = (*Proc)(nil)

// Stdout streams the command's standard output.
func (p *Proc) Stdout() io.Reader { return p.stdout }

// Stderr streams the command's standard error.
func (p *Proc) Stderr() io.Reader { return p.stderr }

// Done is closed once the command's output has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the output to end and returns the command's exit code:
// ErrExecTimeout after the request's timeout, ctx's error when ctx ends
// first (the command is then killed).
func (p *Proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.abort()
		return -1, ctx.Err()
	}
	if p.timedOut.Load() {
		return -1, TimeoutError(p.timeout)
	}
	return p.e.Exit(ctx, p.code, p.err, p.wasCut.Load())
}

// Kill kills the command's process tree; should that fail, it cuts the
// output at least. Idempotent; a no-op once the output ended.
func (p *Proc) Kill() error {
	p.killOnce.Do(func() {
		if p.ended() {
			return
		}
		err := p.e.Kill()
		if err == nil {
			return
		}
		p.Cut()
		if !errors.Is(err, ErrRemoved) && !p.ended() {
			p.killErr = err
		}
	})
	return p.killErr
}

// Cut ends the output without waiting for the command: for a sandbox's
// Remove, whose removal ends the command itself. Idempotent.
func (p *Proc) Cut() {
	p.cutOnce.Do(func() {
		p.wasCut.Store(true)
		p.e.Cut()
	})
}

func (p *Proc) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// abort kills the command and, should its output not end soon after,
// cuts it; it returns once the output ended.
func (p *Proc) abort() {
	_ = p.Kill()
	select {
	case <-p.done:
	case <-time.After(cutAfter):
		p.Cut()
		<-p.done
	}
}

// Procs is the set of a sandbox's running processes, which its Remove
// ends. The zero value is an empty set; it is safe for concurrent use.
type Procs struct {
	mu sync.Mutex
	m  map[*Proc]struct{}
}

// Start starts a command through start, which is given the writers its
// output goes to, and returns its Process. The process is in the set
// until its output ends. The timeout (0: none) and the end of ctx kill
// it. Stdout holds up to 1 MiB unread before the command is held back;
// stderr never holds it back (beyond 1 MiB unread, its oldest bytes are
// dropped: see Stream).
func (s *Procs) Start(ctx context.Context, timeout time.Duration, start func(stdout, stderr io.Writer) (Execution, error)) (*Proc, error) {
	p := &Proc{
		stdout:  NewStream(procOutput, true),
		stderr:  NewStream(procOutput, false),
		done:    make(chan struct{}),
		timeout: timeout,
	}
	e, err := start(p.stdout, p.stderr)
	if err != nil {
		return nil, err
	}
	p.e = e
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*Proc]struct{}{}
	}
	s.m[p] = struct{}{}
	s.mu.Unlock()
	if timeout > 0 {
		p.timer = time.AfterFunc(timeout, func() {
			p.timedOut.Store(true)
			p.abort()
		})
	}
	p.stopCtx = context.AfterFunc(ctx, p.abort)
	go s.run(p)
	return p, nil
}

// run carries p's output to its end, then frees what p holds.
func (s *Procs) run(p *Proc) {
	p.code, p.err = p.e.Stream()
	p.stdout.Close()
	p.stderr.Close()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.stopCtx()
	s.mu.Lock()
	delete(s.m, p)
	s.mu.Unlock()
	close(p.done)
}

// All returns the processes running now.
func (s *Procs) All() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Proc, 0, len(s.m))
	for p := range s.m {
		out = append(out, p)
	}
	return out
}

// KillAll kills every running process and waits until their output ended,
// or ctx ends (an error naming id and how many are left).
func (s *Procs) KillAll(ctx context.Context, id string) error {
	procs := s.All()
	for _, p := range procs {
		_ = p.Kill()
	}
	left := 0
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("remove %s: %d commands did not end: %w", id, left, ctx.Err())
	}
	return nil
}
