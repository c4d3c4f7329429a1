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
//     (ResolveMCP, MCPFormat).
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
	"sync"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
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
)

// Spec describes one run of a CLI process in a sandbox.
type Spec struct {
	// CLI names the program in messages ("claude", "cursor-agent").
	CLI string
	// ErrorID is the event id of the error events the run emits.
	ErrorID string
	// Emit receives the run's error events (Turn.Emit: serialized).
	Emit chat.EmitFunc
	// Sandbox starts the process (required).
	Sandbox sandbox.Sandbox
	// Exec is the process: argv, environment (secrets go here only),
	// stdin.
	Exec sandbox.ExecRequest
	// Timeout bounds the run (0: only ctx bounds it).
	Timeout time.Duration
	// GracePeriod is how long the CLI may keep running after its result
	// (Run.ResultSeen) before it is killed (0: at once).
	GracePeriod time.Duration
	// Secrets are redacted from the stderr tail.
	Secrets []string
	// Logger receives diagnostics. Nil: slog.Default.
	Logger *slog.Logger
}

// Run is a started CLI process. Its methods are called in order: Wait
// once, from the goroutine that started it; ResultSeen from any.
type Run struct {
	spec    Spec
	ctx     context.Context // the caller's
	runCtx  context.Context // ctx bounded by the timeout
	cancel  context.CancelFunc
	proc    sandbox.Process
	started time.Time

	seenOnce sync.Once
	seen     chan struct{}
}

// Start starts the process. A process that cannot start is a *chat.Error
// (canceled, timeout, or sandbox) with no event emitted: the caller
// reports it like its other early failures.
func Start(ctx context.Context, spec Spec) (*Run, *chat.Error) {
	if spec.Logger == nil {
		spec.Logger = slog.Default()
	}
	r := &Run{spec: spec, ctx: ctx, runCtx: ctx, cancel: func() {}, seen: make(chan struct{})}
	if spec.Timeout > 0 {
		r.runCtx, r.cancel = context.WithTimeout(ctx, spec.Timeout)
	}
	r.started = time.Now()
	proc, err := spec.Sandbox.Start(r.runCtx, spec.Exec)
	if err != nil {
		defer r.cancel()
		if code, msg, ok := r.stopped(); ok {
			return nil, &chat.Error{Code: code, Message: msg, Err: err}
		}
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "start " + spec.CLI + ": " + err.Error(), Err: err}
	}
	r.proc = proc
	return r, nil
}

// ResultSeen tells the run that the CLI printed its result, which starts
// the grace period. It is safe to call from any goroutine, any number of
// times (a stream parser's OnResult).
func (r *Run) ResultSeen() {
	r.seenOnce.Do(func() { close(r.seen) })
}

// Exit is how a run ended.
type Exit struct {
	// Code is the process's exit code, Err the error waiting for it
	// (a timeout, a lost sandbox).
	Code int
	Err  error
	// Killed reports that the CLI was stopped a grace period after its
	// result.
	Killed bool
	// ParseErr is the error the output parser returned, or that the
	// output did not end after the process exited.
	ParseErr error
	// Stderr is the tail of the CLI's stderr, trimmed, secrets redacted.
	Stderr string
	// Started is when the process was started.
	Started time.Time

	spec *Spec
	// Set when the run's contexts stopped it (see Run.stopped).
	stopCode, stopMsg string
}

// Wait feeds the process's stdout to parse (on a goroutine of its own)
// and its stderr to a StderrTail ring, waits for it to exit, and kills it
// a grace period after ResultSeen: the answer is complete, and a CLI that
// lingers (an MCP server that will not exit, a stuck hook, a background
// command) must not hold the request. It then waits, bounded, for the
// output to end. Every goroutine it starts has ended or is about to (its
// stream closed) when it returns.
func (r *Run) Wait(parse func(stdout io.Reader) error) *Exit {
	defer r.cancel()
	proc := r.proc
	parseDone := make(chan error, 1)
	go func() { parseDone <- parse(proc.Stdout()) }()
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
	var wr waitRes
	seen := (<-chan struct{})(r.seen)
	grace := (<-chan time.Time)(nil)
	for done := false; !done; {
		select {
		case wr = <-waitDone:
			done = true
		case <-seen:
			seen = nil
			t := time.NewTimer(r.spec.GracePeriod)
			defer t.Stop()
			grace = t.C
		case <-grace:
			r.spec.Logger.Debug(r.spec.CLI + " still running after its result; stopping it")
			x.Killed = true
			_ = proc.Kill()
			grace = nil
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

// Parsed is what the output parser made of the stream, for Failure.
type Parsed struct {
	// GotResult reports that the CLI printed its result.
	GotResult bool
	// Err is the failure the CLI reported in its result; its error event
	// was emitted by the parser.
	Err *chat.Error
	// NoResult, when set, refines the error of a run that ended without a
	// result: from the stderr tail it returns the chat error code and a
	// note for the message ("" for none). Nil: chat.ErrExecutor.
	NoResult func(stderrTail string) (code, note string)
}

// Failure returns the run's error, nil when it succeeded, and emits its
// error event unless the parser did (Parsed.Err). In order:
//   - the failure the CLI reported itself, with the stderr tail added;
//   - the process could not be waited for (a stop by the contexts is
//     canceled or timeout, a sandbox exec timeout is timeout, anything
//     else sandbox), unless it was killed after its result;
//   - no result (executor, or what NoResult says), with the stderr's last
//     line;
//   - a non-zero exit after the result, unless it was killed.
func (x *Exit) Failure(p Parsed) *chat.Error {
	cli, tail := x.spec.CLI, x.Stderr
	var err *chat.Error
	switch {
	case p.Err != nil:
		p.Err.Err = withStderr(tail, p.Err.Err)
		return p.Err
	case x.Err != nil && !(x.Killed && p.GotResult):
		code, msg := chat.ErrSandbox, cli+": "+x.Err.Error()
		if x.stopCode != "" {
			code, msg = x.stopCode, x.stopMsg
		} else if errors.Is(x.Err, sandbox.ErrExecTimeout) {
			code, msg = chat.ErrTimeout, fmt.Sprintf("%s ran longer than its timeout (%s) and was stopped", cli, x.spec.Timeout)
		}
		err = &chat.Error{Code: code, Message: msg, Err: withStderr(tail, x.Err)}
	case !p.GotResult:
		msg := fmt.Sprintf("%s exited with code %d without a result", cli, x.Code)
		if x.ParseErr != nil {
			msg += " (" + x.ParseErr.Error() + ")"
		}
		code := chat.ErrExecutor
		if p.NoResult != nil {
			var note string
			if code, note = p.NoResult(tail); note != "" {
				msg += "; " + note
			}
		}
		if tail != "" {
			msg += ": " + LastLine(tail)
		}
		err = &chat.Error{Code: code, Message: msg, Err: withStderr(tail, nil)}
	case x.Code != 0 && !x.Killed:
		msg := fmt.Sprintf("%s exited with code %d after its result", cli, x.Code)
		if tail != "" {
			msg += ": " + LastLine(tail)
		}
		err = &chat.Error{Code: chat.ErrExecutor, Message: msg, Err: withStderr(tail, nil)}
	default:
		return nil
	}
	chat.ErrorEvent(x.spec.Emit, x.spec.ErrorID, err.Code, err.Message)
	return err
}

// withStderr adds a stderr tail to the causes of a failure (none when the
// tail is empty).
func withStderr(tail string, cause error) error {
	if tail == "" {
		return cause
	}
	return &executor.Stderr{Tail: tail, Err: cause}
}

// Turn is what an executor's Run sets up before anything else: its events
// serialized (and dropped once Run returned), and the way it reports a
// failure before or instead of running the CLI.
type Turn struct {
	// Emit is the request's Emit, serialized (chat.Serial): safe for a
	// parser goroutine and the run, and silent once the turn ended.
	Emit    chat.EmitFunc
	stream  *chat.Serial
	errorID string
}

// NewTurn starts a turn that emits through emit; its error events have
// id errorID. The caller defers End.
func NewTurn(emit chat.EmitFunc, errorID string) *Turn {
	t := &Turn{errorID: errorID, stream: chat.NewSerial(emit)}
	t.Emit = t.stream.Emit
	return t
}

// End stops the turn's events: nothing is emitted after it.
func (t *Turn) End() { t.stream.Close() }

// Fail emits an error event and returns the failure as Run does: no
// result and a *chat.Error with code, message and cause (err may be nil).
func (t *Turn) Fail(code, message string, err error) (*executor.Result, error) {
	chat.ErrorEvent(t.Emit, t.errorID, code, message)
	return nil, &chat.Error{Code: code, Message: message, Err: err}
}

// Check fails a request that has no sandbox (or a sandbox without a
// workspace) or no assistant, as an internal error of the executor called
// name ("claude executor"); the error event is emitted. It returns nil for
// a request an executor can start with.
func (t *Turn) Check(req *executor.Request, name string) error {
	switch {
	case req.Sandbox == nil || req.Sandbox.Workspace() == nil:
		_, err := t.Fail(chat.ErrInternal, name+": request has no sandbox", nil)
		return err
	case req.Assistant == nil:
		_, err := t.Fail(chat.ErrInternal, name+": request has no assistant", nil)
		return err
	}
	return nil
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
