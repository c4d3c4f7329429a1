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
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// This file is the CLI's process: started in the sandbox (Start), its
// output read line by line and handed to the turn's parser, its turn
// waited for with the watchdogs (Wait), and, for a run kept between a
// chat's turns, the next turn's message taken (Next) and the process
// stopped at last (Close).

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
	// closeWait bounds how long Close waits for a kept CLI to exit once
	// its input ended before it kills it, and then for the kill.
	closeWait = 2 * time.Second
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

// ErrHung is Next's error for a kept CLI that printed nothing within the
// acknowledgement wait of the turn's message: it was closed, and the turn,
// which emitted nothing, goes to a new CLI.
var ErrHung = errors.New("the kept CLI did not acknowledge the message")

// Spec describes one run of a CLI process in a sandbox.
type Spec struct {
	// CLI names the program in messages ("claude", "cursor-agent").
	CLI string
	// ErrorID is the event id of the error events the run emits; its
	// notices get ids ErrorID-notice-N.
	ErrorID string
	// Emit receives the turn's error and notice events; it must be safe
	// for concurrent use (the parser emits from the goroutine that reads
	// the output).
	Emit chat.EmitFunc
	// Sandbox starts the process (required).
	Sandbox sandbox.Sandbox
	// Exec is the process: argv, environment (secrets go here only),
	// stdin (unless Input is set or the run is kept).
	Exec sandbox.ExecRequest
	// Input, when set, is written to the process's stdin. With HoldInput
	// stdin stays open after it until the CLI's work is done
	// (Monitor.Settled), the run stops it or its output ends: Claude Code
	// stops its background commands and subagents when its input ends.
	Input     []byte
	HoldInput bool
	// Keep runs a process that outlives the turn, for the chat's next
	// ones (Next): it starts on a context of its own, which the
	// request's end does not stop, its input stays open, and a turn ends
	// when the CLI's work for it is done (Monitor.Settled), the process
	// still running (Exit.Alive). Close stops it.
	Keep bool
	// Timeout bounds the turn (0: only ctx bounds it). When the CLI has
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
	// Lines configure how the output is read (see LineReader).
	Lines LineOptions
}

// Monitor is what a stream parser tells the run about the CLI's state as
// it reads the output of a turn. A Run implements it; its methods are
// safe to call from the parser's goroutine, any number of times.
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
	// input and gives it the grace period to exit (a kept run's turn
	// ends); new work (false) stops the grace period.
	Settled(settled bool)
	// Stop stops the CLI at once: the parser found a failure that will
	// not heal (its error is the parser's Err).
	Stop()
}

// Run is a started CLI process. Wait is called once per turn, from the
// goroutine that started it or began the turn (Next); the Monitor methods
// from any. A kept run's Alive and Close are safe for concurrent use.
type Run struct {
	spec    Spec // Emit and Timeout are the first turn's
	proc    sandbox.Process
	started time.Time
	// stop ends the context the process runs on: a kept run's own (a
	// fresh run's is its turn's).
	stop context.CancelFunc

	// The CLI's stdin, without Spec.Input nil (and not kept): an OS pipe,
	// so that a runtime running the CLI with os/exec hands it over as it
	// is instead of copying it (exec.Cmd.Wait would wait for that copy,
	// and so for the input to end, before it reports the exit).
	input, inputR *os.File
	inputOnce     sync.Once
	inputClosed   atomic.Bool // a kept CLI whose input ended takes no turn

	// The output: one goroutine reads it (from the first turn on) and
	// hands each line to the current turn's sink, with lines held.
	lines      sync.Mutex
	sink       func(Line)
	stray      int // lines no turn took (a kept CLI's between turns)
	readOnce   sync.Once
	eof        chan struct{} // closed when the output ended
	readErr    error         // set before eof is closed
	acks       chan struct{} // a token for each line (Next's liveness check)
	lastOutput atomic.Int64  // unix nanoseconds of the last stdout bytes

	stderr     *Ring
	stderrDone chan struct{}

	exited  chan struct{} // closed when the process exited
	code    int           // set before exited is closed
	waitErr error

	closeOnce sync.Once
	closed    atomic.Bool

	// canceler asks a kept CLI to stop a turn without ending (SetCanceler).
	canceler func() bool
	// wrote is closed once Spec.Input is written (or not to be): what is
	// sent (Send) follows it.
	wrote chan struct{}

	// The messages a protocol client sends (Send), written in order by
	// one goroutine until the run is released.
	sendOnce sync.Once
	outbox   chan []byte
	released chan struct{}
	relOnce  sync.Once

	turn atomic.Pointer[turnState]
}

// turnState is what a Run knows of the turn at hand.
type turnState struct {
	spec   Spec            // with the turn's Emit and Timeout
	ctx    context.Context // the caller's
	runCtx context.Context // ctx bounded by the timeout
	cancel context.CancelFunc
	began  time.Time
	fresh  bool // the turn started the process

	answered atomic.Bool
	mu       sync.Mutex
	busy     bool
	settled  bool
	changed  chan struct{} // settled changed (buffered 1)
	stopOnce sync.Once
	stop     chan struct{}

	// ended is set (Run.lines held) once the turn's end is decided: a
	// message sent into it (Run.say) is refused from then on. said are
	// the messages that were (Run.lines).
	ended bool
	said  []chat.Said
}

var _ Monitor = (*Run)(nil)

func newTurn(ctx context.Context, spec Spec, fresh bool) *turnState {
	t := &turnState{spec: spec, ctx: ctx, runCtx: ctx, cancel: func() {}, began: time.Now(), fresh: fresh,
		changed: make(chan struct{}, 1), stop: make(chan struct{})}
	if spec.Timeout > 0 {
		t.runCtx, t.cancel = context.WithTimeout(ctx, spec.Timeout)
	}
	return t
}

// Start starts the process for a turn. A process that cannot start is a
// *chat.Error (canceled, timeout, or sandbox) with no event emitted: the
// caller reports it like its other early failures.
func Start(ctx context.Context, spec Spec) (*Run, *chat.Error) {
	if spec.Logger == nil {
		spec.Logger = slog.Default()
	}
	t := newTurn(ctx, spec, true)
	r := &Run{spec: spec, stop: func() {}, eof: make(chan struct{}), acks: make(chan struct{}, 1), wrote: make(chan struct{}),
		stderr: NewRing(StderrTail), stderrDone: make(chan struct{}), exited: make(chan struct{}), released: make(chan struct{})}
	r.turn.Store(t)
	// A fresh run's process ends with its turn; a kept one's when it is
	// closed.
	pctx := t.runCtx
	if spec.Keep {
		pctx, r.stop = context.WithCancel(context.WithoutCancel(ctx))
	}
	exec := spec.Exec
	if spec.Input != nil || spec.Keep {
		var err error
		if r.inputR, r.input, err = os.Pipe(); err != nil {
			t.cancel()
			r.stop()
			return nil, &chat.Error{Code: chat.ErrSandbox, Message: "start " + spec.CLI + ": " + err.Error(), Err: err}
		}
		exec.Stdin = r.inputR
	}
	r.started = time.Now()
	r.lastOutput.Store(r.started.UnixNano())
	proc, err := spec.Sandbox.Start(pctx, exec)
	if err != nil {
		defer t.cancel()
		r.release()
		if code, msg, ok := t.stopped(); ok {
			return nil, &chat.Error{Code: code, Message: msg, Err: err}
		}
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "start " + spec.CLI + ": " + err.Error(), Err: err}
	}
	r.proc = proc
	go func() {
		r.code, r.waitErr = proc.Wait(pctx)
		close(r.exited)
	}()
	go func() {
		_, _ = io.Copy(r.stderr, proc.Stderr())
		close(r.stderrDone)
	}()
	if r.input != nil && spec.Input != nil {
		go func() {
			defer close(r.wrote)
			// Fails only when the CLI is gone (the run then closes the
			// pipe's read end): nothing to do.
			if _, err := r.input.Write(spec.Input); err == nil && !spec.HoldInput && !spec.Keep {
				r.closeInput()
			}
		}()
	} else {
		close(r.wrote)
	}
	return r, nil
}

// read hands the CLI's output lines to the current turn until it ends.
func (r *Run) read() {
	defer close(r.eof)
	lr := NewLineReaderOptions(activity{r.proc.Stdout(), &r.lastOutput}, r.spec.Lines)
	for {
		line, err := lr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.readErr = fmt.Errorf("read stream: %w", err)
			}
			// The output ended: the CLI is exiting. A runtime may wait
			// for the stdin copy before it reports the exit.
			r.closeInput()
			return
		}
		// Any line after a message is a kept CLI's sign of life.
		select {
		case r.acks <- struct{}{}:
		default:
		}
		r.lines.Lock()
		if r.sink != nil {
			r.sink(line)
		} else {
			r.stray++
		}
		r.lines.Unlock()
	}
}

// setSink makes line receive the output lines (nil: none), starting the
// reading at the first call; once it returns, the previous sink is not
// called any more.
func (r *Run) setSink(line func(Line)) {
	r.lines.Lock()
	r.sink = line
	r.lines.Unlock()
	if line != nil {
		r.readOnce.Do(func() { go r.read() })
	}
}

// closeInput ends the CLI's stdin (once).
func (r *Run) closeInput() {
	if r.input != nil {
		r.inputOnce.Do(func() {
			r.inputClosed.Store(true)
			_ = r.input.Close()
		})
	}
}

// release ends the input for good, a write blocked on a CLI that never
// read it included, and the process's own context.
func (r *Run) release() {
	r.relOnce.Do(func() { close(r.released) })
	r.closeInput()
	if r.inputR != nil {
		r.inputR.Close()
	}
	r.stop()
}

// Sender is what a parser of a CLI that speaks a request-response
// protocol on stdio (JSON-RPC: the Agent Client Protocol, the Codex app
// server) writes its requests and its answers to the CLI's requests
// with. A Run of a kept CLI (Spec.Keep) or one started with Input
// implements it; the parser finds it in its Monitor.
type Sender interface {
	// Send queues msg (one whole message, its newline included) for the
	// CLI's stdin; messages are written in the order they were sent, after
	// Spec.Input. It does not wait for the write; a CLI that is gone
	// drops it (its end is Wait's to report).
	Send(msg []byte) error
}

var _ Sender = (*Run)(nil)

// maxOutbox bounds the messages queued for a CLI that does not read its
// input.
const maxOutbox = 256

// Send implements Sender.
func (r *Run) Send(msg []byte) error {
	if r.input == nil {
		return errors.New(r.spec.CLI + " was started without an input to send to")
	}
	r.sendOnce.Do(func() {
		r.outbox = make(chan []byte, maxOutbox)
		go r.writeOutbox()
	})
	select {
	case r.outbox <- msg:
		return nil
	case <-r.released:
		return errors.New(r.spec.CLI + " has ended")
	default:
		return errors.New(r.spec.CLI + " does not read its input: " + fmt.Sprint(maxOutbox) + " messages wait")
	}
}

// writeOutbox writes the sent messages, after Spec.Input, until the run
// is released or the CLI stops reading.
func (r *Run) writeOutbox() {
	select {
	case <-r.wrote:
	case <-r.released:
		return
	}
	for {
		select {
		case msg := <-r.outbox:
			if _, err := r.input.Write(msg); err != nil {
				return
			}
		case <-r.released:
			return
		}
	}
}

// ResultSeen is Answered and Settled(true): for a CLI whose result ends
// its work.
func (r *Run) ResultSeen() {
	r.Answered()
	r.Settled(true)
}

// Answered implements Monitor.
func (r *Run) Answered() { r.turn.Load().answered.Store(true) }

// Busy implements Monitor.
func (r *Run) Busy(busy bool) {
	t := r.turn.Load()
	t.mu.Lock()
	t.busy = busy
	t.mu.Unlock()
}

// Settled implements Monitor.
func (r *Run) Settled(settled bool) {
	t := r.turn.Load()
	t.mu.Lock()
	changed := t.settled != settled
	t.settled = settled
	t.mu.Unlock()
	if changed {
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
}

// Stop implements Monitor.
func (r *Run) Stop() {
	t := r.turn.Load()
	t.stopOnce.Do(func() { close(t.stop) })
}

func (t *turnState) state() (busy, settled bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.busy, t.settled
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

// Alive reports whether a kept CLI still runs and can take a turn: a
// CLI being stopped (its input ended, its kill under way) cannot.
func (r *Run) Alive() bool {
	if r.closed.Load() || r.inputClosed.Load() {
		return false
	}
	select {
	case <-r.exited:
		return false
	case <-r.eof:
		return false
	default:
		return true
	}
}

// Canceler is a Parser of a CLI that can stop a turn's work and go on
// (a protocol's cancel request): a kept CLI whose turn is canceled or
// times out is asked to, and kept when the turn then settles within the
// grace period; otherwise, or when Cancel returns false, it is stopped.
type Canceler interface {
	// Cancel asks the CLI to stop the turn; false when it cannot be
	// asked.
	Cancel() bool
}

// SetCanceler makes Wait ask cancel (a Canceler's Cancel) to stop a kept
// CLI's turn whose contexts ended, instead of stopping the CLI. It is
// called before Wait.
func (r *Run) SetCanceler(cancel func() bool) { r.canceler = cancel }

// Close stops a kept CLI: it ends its input, gives it a moment to exit
// and kills it then. It is idempotent; no turn may be running.
func (r *Run) Close() {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		r.lines.Lock()
		stray := r.stray
		r.lines.Unlock()
		if stray > 0 {
			r.spec.Logger.Debug("kept "+r.spec.CLI+" printed lines between turns; dropped", "lines", stray)
		}
		r.closeInput()
		select {
		case <-r.exited:
		case <-time.After(closeWait):
			_ = r.proc.Kill()
			select {
			case <-r.exited:
			case <-time.After(closeWait):
			}
		}
		r.release()
	})
}

// Next begins a turn on a kept run: line receives its output, its events
// go to emit, timeout bounds it, and input, the turn's message, is
// written to the CLI's stdin. A CLI that prints nothing within ackWait
// of the message (0: not checked) is hung: Next closes it and returns
// ErrHung, with nothing of the turn emitted; so does one that does not
// take the message (it went away between turns). A message not taken as
// ctx ends is an error (a *chat.Error) and the run is closed. Wait follows.
func (r *Run) Next(ctx context.Context, emit chat.EmitFunc, timeout time.Duration, input []byte, line func(Line), ackWait time.Duration) error {
	spec := r.spec
	spec.Emit, spec.Timeout = emit, timeout
	t := newTurn(ctx, spec, false)
	select {
	case <-r.acks: // stale
	default:
	}
	r.lastOutput.Store(time.Now().UnixNano())
	r.lines.Lock()
	r.turn.Store(t)
	r.lines.Unlock()
	r.setSink(line)
	done := make(chan error, 1)
	go func() {
		_, err := r.input.Write(input)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		r.setSink(nil)
		t.cancel()
		r.Close()
		if ctx.Err() == nil {
			// The CLI went away between turns (nothing of the turn was
			// emitted): a new one takes it, as for a hung one.
			r.spec.Logger.Warn("kept "+r.spec.CLI+" did not take the message; stopped", "err", err)
			return fmt.Errorf("%w: %s did not take the message: %v", ErrHung, r.spec.CLI, err)
		}
		return &chat.Error{Code: chat.ErrSandbox, Message: r.spec.CLI + " did not take the message: " + err.Error(), Err: err}
	}
	if ackWait <= 0 || r.acked(ctx, ackWait) || ctx.Err() != nil || !r.Alive() {
		// A CLI that ended, or a request that did, is Wait's to report.
		return nil
	}
	r.spec.Logger.Warn("kept "+r.spec.CLI+" printed nothing within "+ackWait.String()+" of the message; stopped",
		"stderr", Redact(r.stderr.String(), r.spec.Secrets))
	r.setSink(nil)
	t.cancel()
	r.Close()
	return ErrHung
}

// acked waits up to wait for the CLI to print a line after the message
// just sent; false when it did not (or ctx ended, or the CLI did).
func (r *Run) acked(ctx context.Context, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.acks:
		return true
	case <-r.eof:
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// Wait hands the CLI's output lines to line (on a goroutine of its own,
// one at a time) and its stderr to a StderrTail ring, and waits for the
// turn to end: the process to exit or, for a kept run, its work for the
// turn to be done (Monitor.Settled; the process runs on, Exit.Alive). It
// ends the CLI's input once its work is done and kills it when it
// lingers a grace period after that (an MCP server that will not exit, a
// stuck hook: the answer is complete, and the CLI must not hold the
// request), when the watchdog finds it silent while not busy, when the
// parser asks (Monitor.Stop), and stops work it still runs after its
// answer as the timeout nears. It then waits, bounded, for the output to
// end. line is not called once Wait returned; every goroutine of a run
// that is not kept has ended or is about to (its stream closed).
func (r *Run) Wait(line func(Line)) *Exit {
	t := r.turn.Load()
	defer t.cancel()
	r.setSink(line)
	if !r.spec.Keep {
		// A kept CLI's input ends when it is stopped (kill, below).
		stopInput := context.AfterFunc(t.runCtx, r.closeInput)
		defer stopInput()
	}
	proc := r.proc

	x := &Exit{Began: t.began, spec: &t.spec}
	if t.fresh {
		x.Started = r.started
	}
	notice := func(code, msg string) {
		x.Notices = append(x.Notices, code)
		r.spec.Logger.Warn(msg, "notice", code)
		chat.Whole(t.spec.Emit, fmt.Sprintf("%s-notice-%d", r.spec.ErrorID, len(x.Notices)), chat.TypeNotice, msg,
			map[string]any{"code": code, "message": msg})
	}
	// A kept CLI's process does not end with the request: the run stops
	// it (and ends its context when the kill does not take).
	var ctxDone <-chan struct{}
	var unstick <-chan time.Time
	kill := func() {
		r.closeInput()
		_ = proc.Kill()
		if r.spec.Keep && unstick == nil {
			unstick = time.After(drainWait)
		}
	}
	if r.spec.Keep {
		ctxDone = t.runCtx.Done()
	}
	var grace <-chan time.Time
	var graceTimer *time.Timer
	defer func() {
		if graceTimer != nil {
			graceTimer.Stop()
		}
	}()
	startGrace := func(d time.Duration) {
		if graceTimer == nil {
			graceTimer = time.NewTimer(d)
			grace = graceTimer.C
		}
	}
	var idle <-chan time.Time
	if t.spec.IdleTimeout > 0 {
		tk := time.NewTicker(min(t.spec.IdleTimeout/4, time.Second))
		defer tk.Stop()
		idle = tk.C
	}
	var margin <-chan time.Time
	if d, ok := t.runCtx.Deadline(); ok && t.spec.Timeout > 0 {
		tm := time.NewTimer(time.Until(d) - min(t.spec.Timeout/10, maxStopMargin))
		defer tm.Stop()
		margin = tm.C
	}
	stop := (<-chan struct{})(t.stop)
	for done := false; !done; {
		select {
		case <-r.exited:
			done = true
		case <-t.changed:
			if _, settled := t.state(); settled && r.spec.Keep && !x.bgStopped && r.Alive() {
				// The turn is over, unless a message was sent into it
				// meanwhile (say); the CLI waits for the next one.
				if r.end(t) {
					x.Alive, done = true, true
				}
			} else if settled {
				r.closeInput()
				startGrace(t.spec.GracePeriod)
			} else if graceTimer != nil && grace != nil {
				graceTimer.Stop()
				graceTimer, grace = nil, nil
			}
		case <-grace:
			grace = nil
			if x.ctxStopped {
				r.spec.Logger.Warn(r.spec.CLI + " did not stop its canceled turn within " + t.spec.GracePeriod.String() + "; stopped")
			} else if !x.bgStopped {
				notice(NoticeCLIHung, fmt.Sprintf("%s did not exit within %s after its work was done and was stopped", r.spec.CLI, t.spec.GracePeriod))
			}
			x.Killed = true
			kill()
		case <-idle:
			busy, settled := t.state()
			silent := time.Since(time.Unix(0, r.lastOutput.Load()))
			if busy || settled || silent < t.spec.IdleTimeout {
				continue
			}
			idle = nil
			x.Idle = true
			if t.answered.Load() {
				notice(NoticeCLIHung, fmt.Sprintf("%s printed nothing for %s after it answered and was stopped", r.spec.CLI, t.spec.IdleTimeout.Round(time.Second)))
			}
			x.Killed = true
			kill()
		case <-margin:
			margin = nil
			if _, settled := t.state(); t.answered.Load() && !settled {
				notice(NoticeBackgroundStopped, fmt.Sprintf("background work of %s was still running as the turn's timeout (%s) neared and was stopped; what it was doing may be incomplete", r.spec.CLI, t.spec.Timeout))
				x.bgStopped = true
				r.closeInput()
				// The CLI may end its tasks itself once its input ends;
				// it is killed before the timeout in any case.
				if graceTimer == nil {
					startGrace(min(t.spec.GracePeriod, min(t.spec.Timeout/10, maxStopMargin)/2))
				}
			}
		case <-stop:
			stop = nil
			x.Killed = true
			kill()
		case <-ctxDone:
			ctxDone = nil
			x.ctxStopped = true
			if r.canceler != nil && r.Alive() && r.canceler() {
				// The CLI stops the turn and stays: kept when it settles
				// within the grace period.
				startGrace(t.spec.GracePeriod)
				continue
			}
			kill()
		case <-unstick:
			unstick = nil
			r.stop()
		}
	}
	if !x.Alive {
		x.Code, x.Err = r.code, r.waitErr
		// Wait for the parser to see the end of the output, bounded: a
		// process left behind by the CLI could hold the pipe open.
		select {
		case <-r.eof:
			x.ParseErr = r.readErr
		case <-time.After(drainWait):
			_ = proc.Kill()
			x.ParseErr = errors.New("output did not end after the process exited")
		}
		select {
		case <-r.stderrDone:
		case <-time.After(stderrWait):
		}
	}
	r.lines.Lock()
	t.ended = true
	r.lines.Unlock()
	r.setSink(nil)
	x.Stderr = Redact(r.stderr.String(), r.spec.Secrets)
	x.answered = t.answered.Load()
	x.stopCode, x.stopMsg, _ = t.stopped()
	if !x.Alive {
		r.release()
	}
	return x
}

// stopped classifies a turn stopped by its contexts: the caller's (the
// request canceled or past its deadline) or the turn's timeout.
func (t *turnState) stopped() (code, msg string, ok bool) {
	cli := t.spec.CLI
	switch {
	case t.ctx.Err() != nil:
		if errors.Is(t.ctx.Err(), context.DeadlineExceeded) {
			return chat.ErrTimeout, "the request deadline passed; " + cli + " was stopped", true
		}
		return chat.ErrCanceled, "the request was canceled; " + cli + " was stopped", true
	case t.runCtx.Err() != nil:
		return chat.ErrTimeout, fmt.Sprintf("%s ran longer than the sandbox timeout (%s) and was stopped", cli, t.spec.Timeout), true
	}
	return "", "", false
}

// end decides the end of a kept CLI's turn whose work is done: false
// when a message sent into it meanwhile (say) made it wait again.
func (r *Run) end(t *turnState) bool {
	r.lines.Lock()
	defer r.lines.Unlock()
	if _, settled := t.state(); !settled {
		return false
	}
	t.ended = true
	return true
}

// Talker is a Parser of a kept CLI that takes a user message while its
// turn runs (its input queues it) and can stop the turn's current step
// without ending. The driver attaches it to the turn's executor.Talk and
// calls its methods with the output's lines held: never at once with
// Line.
type Talker interface {
	// Say encodes msg as the CLI's next user input and holds the turn
	// open (Monitor.Settled) until the CLI has taken and answered it; at
	// is where the turn's answer stands (a byte offset into its content).
	Say(msg chat.Message) (line []byte, at int, err error)
	// Interrupt encodes the request that stops the turn's current step;
	// the turn then settles with what was answered so far.
	Interrupt() ([]byte, error)
}

// talking is a kept run's turn as its executor.Talk reaches it.
type talking struct {
	r *Run
	p Talker
}

var _ executor.Talker = talking{}

// Say implements executor.Talker.
func (k talking) Say(msg chat.Message) error {
	r := k.r
	r.lines.Lock()
	defer r.lines.Unlock()
	t := r.turn.Load()
	if t.ended {
		return executor.ErrTurnEnding
	}
	line, at, err := k.p.Say(msg)
	if err != nil {
		return err
	}
	if err := r.Send(line); err != nil {
		return err
	}
	t.said = append(t.said, chat.Said{Content: msg.Content, At: at})
	r.spec.Logger.Debug("message sent into the running turn", "bytes", len(msg.Content))
	return nil
}

// Interrupt implements executor.Talker.
func (k talking) Interrupt() error {
	r := k.r
	r.lines.Lock()
	defer r.lines.Unlock()
	if r.turn.Load().ended {
		return executor.ErrTurnEnding
	}
	line, err := k.p.Interrupt()
	if err != nil {
		return err
	}
	r.spec.Logger.Debug("running turn interrupted")
	return r.Send(line)
}

// talk attaches a kept run's turn to the request's Talk when its parser
// can take messages mid-turn; detach before the turn's result is read.
func (r *Run) talk(to *executor.Talk, parser Parser) (detach func()) {
	p, ok := parser.(Talker)
	if !ok || !r.spec.Keep {
		return func() {}
	}
	return to.Attach(talking{r, p})
}

// said returns the messages sent into the run's turn (Talker.Say).
func (r *Run) said() []chat.Said {
	r.lines.Lock()
	defer r.lines.Unlock()
	return r.turn.Load().said
}

// Secrets lists the values a run must never show in events or errors:
// the connector's key and the values of the CLI's MCP environment
// (MCPConfig.Env). Values shorter than four bytes are left out: redacting
// them would mangle ordinary text and they protect nothing.
func Secrets(key string, mcpEnv map[string]string) []string {
	var out []string
	if len(key) >= 4 {
		out = append(out, key)
	}
	for _, v := range mcpEnv {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	return out
}
