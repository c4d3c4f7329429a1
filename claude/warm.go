package claude

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// warmCloseWait bounds how long Close waits for a kept CLI to exit once
// its input ended before it kills it.
const warmCloseWait = 2 * time.Second

// errWarmHung: the kept CLI did not acknowledge the turn's message; the
// turn emitted nothing and starts a new CLI.
var errWarmHung = errors.New("the kept claude did not acknowledge the message")

// maxStopMargin bounds how long before a turn's timeout background work
// still running after the answer is stopped (as agentcli does).
const maxStopMargin = 15 * time.Second

// warmCLI is a Claude Code process kept running between the turns of one
// chat (sandbox.keep_alive). Its stdin stays open: each turn writes its
// user message there as a stream-json line, and the turn ends when the
// CLI's work for it is done (its result printed and its tasks ended). One
// goroutine reads its stdout and hands each line to the current turn's
// parser (none between turns: such lines are counted and dropped).
type warmCLI struct {
	// key is what the process was started with (startKey): a turn that
	// would start it differently starts a new one.
	key     string
	session string
	started time.Time
	proc    sandbox.Process
	input   *os.File // the write end of the CLI's stdin
	inputR  *os.File
	cancel  context.CancelFunc
	secrets []string
	log     *slog.Logger

	mu    sync.Mutex // held while a line is handed to sink
	sink  func(agentcli.Line)
	stray int

	// acks receives a token for each line the CLI prints (the liveness
	// check of a turn); lastOutput is when it last printed (unix
	// nanoseconds).
	acks       chan struct{}
	lastOutput atomic.Int64

	eof      chan struct{} // closed when the CLI's output ended
	exited   chan struct{} // closed when the process exited
	stderr   *agentcli.Ring
	dead     atomic.Bool
	closeOne sync.Once
}

var _ executor.Warm = (*warmCLI)(nil)

// warmKey identifies what a kept CLI was started for, besides the
// assistant (a changed assistant restarts the chat's sandbox): the system
// prompt, the MCP servers, the arguments, the model and the connection. A
// turn whose key differs starts a new CLI, which resumes the session.
func warmKey(req *executor.Request, maxTurns int, permMode, model string) string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		System    string
		MCP       map[string]assistant.MCPServer
		Args      chat.Arguments
		MaxTurns  int
		Perm      string
		Model     string
		Connector executor.Connection
		Relay     string
		Skills    []string
	}{req.System, req.MCPServers, req.Arguments, maxTurns, permMode, model, req.Connector, req.Relay, skillPrints(req.Assistant.Skills)})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// skillPrints are the fingerprints of the skills a CLI is started with: a
// user's skill approved, replaced or removed since restarts it.
func skillPrints(list []*skills.Skill) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, s.Fingerprint())
	}
	return out
}

// startWarm starts the CLI with its stdin held open, on a context of its
// own: it outlives the request that started it.
func startWarm(ctx context.Context, sb sandbox.Sandbox, exec sandbox.ExecRequest, key, session string, secrets []string, lineOpts agentcli.LineOptions, log *slog.Logger) (*warmCLI, error) {
	inputR, input, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	exec.Stdin = inputR
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &warmCLI{key: key, session: session, started: time.Now(), input: input, inputR: inputR, cancel: cancel, secrets: secrets, log: log,
		eof: make(chan struct{}), exited: make(chan struct{}), stderr: agentcli.NewRing(agentcli.StderrTail), acks: make(chan struct{}, 1)}
	w.lastOutput.Store(time.Now().UnixNano())
	proc, err := sb.Start(pctx, exec)
	if err != nil {
		cancel()
		input.Close()
		inputR.Close()
		return nil, err
	}
	w.proc = proc
	go w.read(lineOpts)
	go func() { _, _ = io.Copy(w.stderr, proc.Stderr()) }()
	go func() {
		_, _ = proc.Wait(pctx)
		w.dead.Store(true)
		close(w.exited)
	}()
	return w, nil
}

// read hands the CLI's output lines to the current turn.
func (w *warmCLI) read(opts agentcli.LineOptions) {
	defer close(w.eof)
	lr := agentcli.NewLineReaderOptions(w.proc.Stdout(), opts)
	for {
		line, err := lr.Next()
		if err != nil {
			w.dead.Store(true)
			return
		}
		w.lastOutput.Store(time.Now().UnixNano())
		// Any line after a message is the CLI's sign of life (it prints
		// its init line as soon as it reads one).
		select {
		case w.acks <- struct{}{}:
		default:
		}
		w.mu.Lock()
		if w.sink != nil {
			w.sink(line)
		} else {
			w.stray++
		}
		w.mu.Unlock()
	}
}

// setSink makes f receive the output lines (nil: none); once it returns,
// the previous sink is not called any more.
func (w *warmCLI) setSink(f func(agentcli.Line)) {
	w.mu.Lock()
	w.sink = f
	w.mu.Unlock()
}

// send writes the turn's input lines to the CLI's stdin.
func (w *warmCLI) send(ctx context.Context, lines []byte) error {
	done := make(chan error, 1)
	go func() {
		_, err := w.input.Write(lines)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		w.Close()
		return ctx.Err()
	}
}

// acked waits up to wait for the CLI to print a line after the message
// just sent; false when it did not (or ctx ended, or the CLI did).
func (w *warmCLI) acked(ctx context.Context, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.acks:
		return true
	case <-w.eof:
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// Alive implements executor.Warm.
func (w *warmCLI) Alive() bool { return !w.dead.Load() }

// Close implements executor.Warm: it ends the CLI's input, gives it
// warmCloseWait to exit and kills it then.
func (w *warmCLI) Close() {
	w.closeOne.Do(func() {
		w.dead.Store(true)
		_ = w.input.Close()
		select {
		case <-w.exited:
		case <-time.After(warmCloseWait):
			_ = w.proc.Kill()
			select {
			case <-w.exited:
			case <-time.After(warmCloseWait):
			}
		}
		w.cancel()
		_ = w.inputR.Close()
	})
}

// stderrTail is the end of the CLI's stderr, secrets redacted.
func (w *warmCLI) stderrTail() string { return agentcli.Redact(w.stderr.String(), w.secrets) }

// turnMonitor is a kept CLI's Monitor for one turn: the turn ends when the
// CLI's work is settled, or when the parser asks to stop it.
type turnMonitor struct {
	answered  atomic.Bool
	busy      atomic.Bool
	isSettled atomic.Bool
	settled   chan struct{}
	stop      chan struct{}
	once      sync.Once
	stopOnce  sync.Once
}

func newTurnMonitor() *turnMonitor {
	return &turnMonitor{settled: make(chan struct{}), stop: make(chan struct{})}
}

func (m *turnMonitor) Answered()   { m.answered.Store(true) }
func (m *turnMonitor) Busy(b bool) { m.busy.Store(b) }
func (m *turnMonitor) Settled(s bool) {
	m.isSettled.Store(s)
	if s {
		m.once.Do(func() { close(m.settled) })
	}
}
func (m *turnMonitor) Stop() { m.stopOnce.Do(func() { close(m.stop) }) }

// runWarm runs one turn on a kept CLI: the input goes to its stdin, the
// output to a parser of the turn, until the CLI's work for it is done.
// The CLI stays up unless the turn was canceled, timed out, or the CLI
// ended or failed in a way that will not heal: then it is closed and the
// result carries no Warm.
func (e *Executor) runWarm(ctx context.Context, req *executor.Request, w *warmCLI, turn *agentcli.Turn, input []byte, popts ParserOptions, sessionID string, fresh bool) (*executor.Result, error) {
	mon := newTurnMonitor()
	popts.Monitor = mon
	popts.FailureThreshold = executor.FailureThreshold(req.Assistant)
	parser := NewParser(turn.Emit, popts)
	w.setSink(parser.Line)
	start := time.Now()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	// The watchdog: a CLI that prints nothing for the idle timeout while
	// no tool or task runs is stopped (as a new chat's).
	var idle <-chan time.Time
	if it := e.opts.IdleTimeout; it > 0 {
		t := time.NewTicker(min(it/4, time.Second))
		defer t.Stop()
		idle = t.C
	}
	// Background work still running after the answer as the timeout nears
	// is stopped (with the kept CLI: it is closed; the next turn resumes).
	var margin <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout - min(req.Timeout/10, maxStopMargin))
		defer t.Stop()
		margin = t.C
	}
	var notices []string
	notice := func(code, msg string) {
		notices = append(notices, code)
		chat.Notice(turn.Emit, fmt.Sprintf("cc-error-notice-%d", len(notices)), code, msg)
	}
	var failCode, failMsg string
	var failErr error
	select {
	case <-w.acks: // stale
	default:
	}
	w.lastOutput.Store(time.Now().UnixNano())
	if err := w.send(ctx, input); err != nil {
		failCode, failMsg, failErr = chat.ErrSandbox, "claude did not take the message: "+err.Error(), err
	} else if !fresh && !w.acked(ctx, e.opts.AckWait) {
		if ctx.Err() == nil && w.Alive() {
			// Hung: nothing of this turn was emitted; a new CLI takes it.
			// A live process is not enough: Claude Code prints its init
			// line as soon as it reads a message, before any model call.
			w.log.Warn("kept claude printed nothing within "+e.opts.AckWait.String()+" of the message; stopped", "stderr", w.stderrTail())
			w.setSink(nil)
			w.Close()
			return nil, errWarmHung
		}
	}
	for failCode == "" {
		select {
		case <-mon.settled:
		case <-w.eof:
		case <-mon.stop:
			w.Close()
		case <-idle:
			silent := time.Since(time.Unix(0, w.lastOutput.Load()))
			if mon.busy.Load() || mon.isSettled.Load() || silent < e.opts.IdleTimeout {
				continue
			}
			answered := mon.answered.Load()
			w.Close()
			if answered {
				notice(agentcli.NoticeCLIHung, fmt.Sprintf("claude printed nothing for %s after it answered and was stopped", e.opts.IdleTimeout.Round(time.Second)))
				break
			}
			failCode, failMsg = chat.ErrTimeout, fmt.Sprintf("claude printed nothing for %s while no tool ran and was stopped", e.opts.IdleTimeout.Round(time.Second))
		case <-margin:
			margin = nil
			if !mon.answered.Load() || mon.isSettled.Load() {
				continue
			}
			notice(agentcli.NoticeBackgroundStopped, fmt.Sprintf("background work of claude was still running as the turn's timeout (%s) neared and was stopped; what it was doing may be incomplete", req.Timeout))
			w.Close()
		case <-ctx.Done():
			w.Close()
			failCode, failMsg, failErr = chat.ErrCanceled, "the request was canceled; claude was stopped", ctx.Err()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				failCode, failMsg = chat.ErrTimeout, "the request deadline passed; claude was stopped"
			}
		case <-timeout:
			w.Close()
			failCode, failMsg = chat.ErrTimeout, fmt.Sprintf("claude ran longer than the sandbox timeout (%s) and was stopped", req.Timeout)
		}
		break
	}
	if !w.Alive() {
		// The rest of the output belongs to this turn.
		select {
		case <-w.eof:
		case <-time.After(time.Second):
		}
	}
	w.setSink(nil)
	out := parser.Close()
	started := time.Time{}
	if fresh {
		started = w.started
	}
	res := out.Result(sessionID, start)
	res.Timings = out.Timings
	res.Timings.Started = started
	res.Notices = append(res.Notices, notices...)
	if failCode == "" && !out.GotResult {
		failCode, failMsg = chat.ErrExecutor, "claude ended before it answered"
		if tail := w.stderrTail(); tail != "" {
			failErr = &executor.Stderr{Tail: tail}
		}
	}
	if failCode != "" {
		w.Close()
		chat.ErrorEvent(turn.Emit, "cc-error", failCode, failMsg)
		return res, &chat.Error{Code: failCode, Message: failMsg, Err: failErr}
	}
	if w.Alive() && req.KeepAlive {
		res.Warm = w
	} else {
		w.Close()
	}
	if out.Err != nil {
		return res, out.Err
	}
	return res, nil
}
