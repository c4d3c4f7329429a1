// Package agentcli is what executors that run a coding-agent CLI in a
// sandbox share (the claude and cursor executors, and an embedder's own
// executor.Executor):
//   - a turn's scaffolding: serialized events and early failures (Turn);
//   - running the CLI with a stderr tail, a grace period after its result
//     and its end mapped to chat error codes (Start, Run.Wait,
//     Exit.Failure), secrets redacted (Secrets);
//   - reading its stream-json output line by line without a length limit
//     (LineReader, with a hook for readers that elide huge lines);
//   - the parts of a stream parser every CLI needs: event ids, notices,
//     the session event, line counts and the common outcome (Events,
//     LineStats, Outcome);
//   - the MCP servers, with secrets kept out of the configuration file
//     (ResolveMCP, MCPFormat);
//   - what keeps the run's configuration the assistant's: the CLI's home
//     emptied but for its sessions before every run (ResetHome), and git
//     that runs nothing of the workspace's configuration (GitEnv).
//
// What differs between CLIs (flags, the stream format, where files go,
// how sessions resume, how a failure is classified) stays in each
// executor's package. Package clitest holds the matching test helpers.
package agentcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

const (
	// StderrTail is how much of the CLI's stderr a run keeps for errors.
	StderrTail = 8 << 10
	// drainWait bounds how long a run waits for the output streams to end
	// after the process exited or was killed.
	drainWait = 5 * time.Second
	// stderrWait bounds the wait for the stderr copy once stdout ended.
	stderrWait = 200 * time.Millisecond
	// maxStopMargin bounds how long before the timeout a run stops the
	// background work of a CLI that has answered (see Spec.Timeout).
	maxStopMargin = 15 * time.Second
)

// Notice codes a run raises itself (see Exit.Notices).
const (
	// NoticeCLIHung: the CLI did not exit within the grace period after
	// its work ended, or printed nothing for the idle timeout after it had
	// answered, and was stopped; the answer stands.
	NoticeCLIHung = "cli_hung"
	// NoticeBackgroundStopped: background work the CLI started (commands,
	// subagents) was still running when the turn's timeout came near and
	// was stopped; the answer stands, that work may be incomplete.
	NoticeBackgroundStopped = "background_stopped"
)

// Spec describes one run of a CLI process in a sandbox.
type Spec struct {
	// CLI names the program in messages ("claude", "cursor-agent").
	CLI string
	// ErrorID is the event id of the error events the run emits; its
	// notices get ids ErrorID-notice-N.
	ErrorID string
	// Emit receives the run's error and notice events (Turn.Emit:
	// serialized).
	Emit chat.EmitFunc
	// Sandbox starts the process (required).
	Sandbox sandbox.Sandbox
	// Exec is the process: argv, environment (secrets go here only),
	// stdin (unless Input is set).
	Exec sandbox.ExecRequest
	// Input, when set, is written to the process's stdin. With HoldInput
	// stdin stays open after it until the CLI's work is done
	// (Monitor.Settled), the run stops it or its output ends: Claude Code
	// stops its background commands and subagents when its input ends.
	Input     []byte
	HoldInput bool
	// Timeout bounds the run (0: only ctx bounds it). When the CLI has
	// answered but its background work still runs as the timeout nears
	// (a tenth of it before, at most 15s), the run stops that work with
	// a NoticeBackgroundStopped notice instead of failing the turn.
	Timeout time.Duration
	// GracePeriod is how long the CLI may keep running after its work is
	// done (Monitor.Settled) before it is killed with a NoticeCLIHung
	// notice (0: at once).
	GracePeriod time.Duration
	// IdleTimeout is the watchdog: a CLI that prints nothing for this long
	// while it is not busy (Monitor.Busy: a tool or background task runs)
	// is stopped (0: no watchdog). Before its answer that fails the run
	// (timeout); after it, it is a NoticeCLIHung notice.
	IdleTimeout time.Duration
	// Secrets are redacted from the stderr tail.
	Secrets []string
	// Logger receives diagnostics. Nil: slog.Default.
	Logger *slog.Logger
	// FailureThreshold is the assistant's repeated_tool_failure threshold
	// (executor.FailureThreshold), which a Chat whose Monitor is the Run
	// applies (see ChatOptions.FailureThreshold).
	FailureThreshold int
}

// Monitor is what a stream parser tells the run about the CLI's state as
// it reads the output. A Run implements it; its methods are safe to call
// from the parser's goroutine, any number of times.
type Monitor interface {
	// Answered reports that the CLI printed a result: the turn has an
	// answer, whatever happens to work still running.
	Answered()
	// Busy reports whether the CLI is working without printing: a tool,
	// a subagent or a background task runs. The idle watchdog waits
	// while it is busy.
	Busy(busy bool)
	// Settled reports whether the CLI's work for the turn is done: it
	// answered and nothing it started still runs. The run then ends its
	// input and gives it the grace period to exit; new work (false)
	// stops the grace period.
	Settled(settled bool)
	// Stop stops the CLI at once: the parser found a failure that will
	// not heal (its error is the parser's Err).
	Stop()
}

// Run is a started CLI process. Wait is called once, from the goroutine
// that started it; the Monitor methods from any.
type Run struct {
	spec    Spec
	ctx     context.Context // the caller's
	runCtx  context.Context // ctx bounded by the timeout
	cancel  context.CancelFunc
	proc    sandbox.Process
	started time.Time

	// The CLI's stdin, without Spec.Input nil: an OS pipe, so that a
	// runtime running the CLI with os/exec hands it over as it is
	// instead of copying it (exec.Cmd.Wait would wait for that copy, and
	// so for the input to end, before it reports the exit).
	input, inputR *os.File
	inputOnce     sync.Once

	lastOutput atomic.Int64 // unix nanoseconds of the last stdout bytes
	answered   atomic.Bool
	mu         sync.Mutex
	busy       bool
	settled    bool
	changed    chan struct{} // settled changed (buffered 1)
	stopOnce   sync.Once
	stop       chan struct{}
}

var _ Monitor = (*Run)(nil)

// Start starts the process. A process that cannot start is a *chat.Error
// (canceled, timeout, or sandbox) with no event emitted: the caller
// reports it like its other early failures.
func Start(ctx context.Context, spec Spec) (*Run, *chat.Error) {
	if spec.Logger == nil {
		spec.Logger = slog.Default()
	}
	r := &Run{spec: spec, ctx: ctx, runCtx: ctx, cancel: func() {},
		changed: make(chan struct{}, 1), stop: make(chan struct{})}
	if spec.Timeout > 0 {
		r.runCtx, r.cancel = context.WithTimeout(ctx, spec.Timeout)
	}
	exec := spec.Exec
	if spec.Input != nil {
		var err error
		if r.inputR, r.input, err = os.Pipe(); err != nil {
			r.cancel()
			return nil, &chat.Error{Code: chat.ErrSandbox, Message: "start " + spec.CLI + ": " + err.Error(), Err: err}
		}
		exec.Stdin = r.inputR
	}
	r.started = time.Now()
	r.lastOutput.Store(r.started.UnixNano())
	proc, err := spec.Sandbox.Start(r.runCtx, exec)
	if err != nil {
		defer r.cancel()
		r.closeInput()
		if r.inputR != nil {
			r.inputR.Close()
		}
		if code, msg, ok := r.stopped(); ok {
			return nil, &chat.Error{Code: code, Message: msg, Err: err}
		}
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "start " + spec.CLI + ": " + err.Error(), Err: err}
	}
	r.proc = proc
	if r.input != nil {
		go func() {
			// Fails only when the CLI is gone (the run then closes the
			// pipe's read end): nothing to do.
			if _, err := r.input.Write(spec.Input); err == nil && !spec.HoldInput {
				r.closeInput()
			}
		}()
	}
	return r, nil
}

// closeInput ends the CLI's stdin (once).
func (r *Run) closeInput() {
	if r.input != nil {
		r.inputOnce.Do(func() { _ = r.input.Close() })
	}
}

// ResultSeen is Answered and Settled(true): for a CLI whose result ends
// its work.
func (r *Run) ResultSeen() {
	r.Answered()
	r.Settled(true)
}

// Answered implements Monitor.
func (r *Run) Answered() { r.answered.Store(true) }

// Busy implements Monitor.
func (r *Run) Busy(busy bool) {
	r.mu.Lock()
	r.busy = busy
	r.mu.Unlock()
}

// Settled implements Monitor.
func (r *Run) Settled(settled bool) {
	r.mu.Lock()
	changed := r.settled != settled
	r.settled = settled
	r.mu.Unlock()
	if changed {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
}

// Stop implements Monitor.
// FailureThreshold is Spec.FailureThreshold (0: unset).
func (r *Run) FailureThreshold() int { return r.spec.FailureThreshold }

func (r *Run) Stop() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *Run) state() (busy, settled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.busy, r.settled
}

// activity is the CLI's stdout, noting when bytes arrive.
type activity struct {
	r io.Reader
	t *atomic.Int64
}

func (a activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.t.Store(time.Now().UnixNano())
	}
	return n, err
}

// Wait feeds the process's stdout to parse (on a goroutine of its own)
// and its stderr to a StderrTail ring, and waits for it to exit. It ends
// the CLI's input once its work is done (Monitor.Settled) and kills it
// when it lingers a grace period after that (an MCP server that will not
// exit, a stuck hook: the answer is complete, and the CLI must not hold
// the request), when the watchdog finds it silent while not busy, when
// the parser asks (Monitor.Stop), and stops work it still runs after its
// answer as the timeout nears. It then waits, bounded, for the output to
// end. Every goroutine it starts has ended or is about to (its stream
// closed) when it returns.
func (r *Run) Wait(parse func(stdout io.Reader) error) *Exit {
	defer r.cancel()
	defer func() {
		r.closeInput()
		if r.inputR != nil {
			// Ends a write still blocked on a CLI that never read it.
			r.inputR.Close()
		}
	}()
	stopInput := context.AfterFunc(r.runCtx, r.closeInput)
	defer stopInput()
	proc := r.proc
	parseDone := make(chan error, 1)
	go func() {
		err := parse(activity{proc.Stdout(), &r.lastOutput})
		// The output ended: the CLI is exiting. A runtime may wait for
		// the stdin copy before it reports the exit.
		r.closeInput()
		parseDone <- err
	}()
	stderr := NewRing(StderrTail)
	stderrDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(stderr, proc.Stderr())
		close(stderrDone)
	}()
	type waitRes struct {
		code int
		err  error
	}
	waitDone := make(chan waitRes, 1)
	go func() {
		c, err := proc.Wait(r.runCtx)
		waitDone <- waitRes{c, err}
	}()

	x := &Exit{Started: r.started, spec: &r.spec}
	notice := func(code, msg string) {
		x.Notices = append(x.Notices, code)
		r.spec.Logger.Warn(msg, "notice", code)
		chat.Whole(r.spec.Emit, fmt.Sprintf("%s-notice-%d", r.spec.ErrorID, len(x.Notices)), chat.TypeNotice, msg,
			map[string]any{"code": code, "message": msg})
	}
	kill := func() {
		x.Killed = true
		r.closeInput()
		_ = proc.Kill()
	}
	var grace <-chan time.Time
	var graceTimer *time.Timer
	defer func() {
		if graceTimer != nil {
			graceTimer.Stop()
		}
	}()
	startGrace := func() {
		if graceTimer == nil {
			graceTimer = time.NewTimer(r.spec.GracePeriod)
			grace = graceTimer.C
		}
	}
	var idle <-chan time.Time
	if r.spec.IdleTimeout > 0 {
		t := time.NewTicker(min(r.spec.IdleTimeout/4, time.Second))
		defer t.Stop()
		idle = t.C
	}
	var margin <-chan time.Time
	if d, ok := r.runCtx.Deadline(); ok && r.spec.Timeout > 0 {
		t := time.NewTimer(time.Until(d) - min(r.spec.Timeout/10, maxStopMargin))
		defer t.Stop()
		margin = t.C
	}
	stop := (<-chan struct{})(r.stop)
	var wr waitRes
	for done := false; !done; {
		select {
		case wr = <-waitDone:
			done = true
		case <-r.changed:
			if _, settled := r.state(); settled {
				r.closeInput()
				startGrace()
			} else if graceTimer != nil && grace != nil {
				graceTimer.Stop()
				graceTimer, grace = nil, nil
			}
		case <-grace:
			grace = nil
			if !x.bgStopped {
				notice(NoticeCLIHung, fmt.Sprintf("%s did not exit within %s after its work was done and was stopped", r.spec.CLI, r.spec.GracePeriod))
			}
			kill()
		case <-idle:
			busy, settled := r.state()
			silent := time.Since(time.Unix(0, r.lastOutput.Load()))
			if busy || settled || silent < r.spec.IdleTimeout {
				continue
			}
			idle = nil
			x.Idle = true
			if r.answered.Load() {
				notice(NoticeCLIHung, fmt.Sprintf("%s printed nothing for %s after it answered and was stopped", r.spec.CLI, r.spec.IdleTimeout.Round(time.Second)))
			}
			kill()
		case <-margin:
			margin = nil
			if _, settled := r.state(); r.answered.Load() && !settled {
				notice(NoticeBackgroundStopped, fmt.Sprintf("background work of %s was still running as the turn's timeout (%s) neared and was stopped; what it was doing may be incomplete", r.spec.CLI, r.spec.Timeout))
				x.bgStopped = true
				r.closeInput()
				// The CLI may end its tasks itself once its input ends;
				// it is killed before the timeout in any case.
				if graceTimer == nil {
					graceTimer = time.NewTimer(min(r.spec.GracePeriod, min(r.spec.Timeout/10, maxStopMargin)/2))
					grace = graceTimer.C
				}
			}
		case <-stop:
			stop = nil
			kill()
		}
	}
	x.Code, x.Err = wr.code, wr.err
	// Wait for the parser to see the end of the output, bounded: a process
	// left behind by the CLI could hold the pipe open.
	select {
	case x.ParseErr = <-parseDone:
	case <-time.After(drainWait):
		_ = proc.Kill()
		x.ParseErr = errors.New("output did not end after the process exited")
	}
	select {
	case <-stderrDone:
	case <-time.After(stderrWait):
	}
	x.Stderr = Redact(stderr.String(), r.spec.Secrets)
	x.answered = r.answered.Load()
	x.stopCode, x.stopMsg, _ = r.stopped()
	return x
}

// stopped classifies a run stopped by its contexts: the caller's (the
// request canceled or past its deadline) or the run's timeout.
func (r *Run) stopped() (code, msg string, ok bool) {
	cli := r.spec.CLI
	switch {
	case r.ctx.Err() != nil:
		if errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
			return chat.ErrTimeout, "the request deadline passed; " + cli + " was stopped", true
		}
		return chat.ErrCanceled, "the request was canceled; " + cli + " was stopped", true
	case r.runCtx.Err() != nil:
		return chat.ErrTimeout, fmt.Sprintf("%s ran longer than the sandbox timeout (%s) and was stopped", cli, r.spec.Timeout), true
	}
	return "", "", false
}
