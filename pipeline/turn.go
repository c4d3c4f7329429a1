package pipeline

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
)

// removeTimeout bounds sandbox removal, which runs even after the request's
// context ended.
const removeTimeout = 30 * time.Second

// turn is one running Chat call. Its phases run in this order (run),
// each in the file of its name: admit, assemble, acquire (the sandbox),
// create (the Create hook), execute, next (the Next hook) and persist;
// finish then sends the done event and records the turn. The fields are
// grouped by the phase that sets them.
type turn struct {
	p      *Pipeline
	req    *Request
	cancel context.CancelCauseFunc
	start  time.Time
	// done is closed when Chat returns: the sandbox is gone by then.
	done chan struct{}

	// emit is the turn's serialized event stream (see serialize).
	emit       chat.EmitFunc
	errEmitted atomic.Bool
	msgSeq     atomic.Int64
	// answered: the done event went out. The turn has ended for its
	// client (a server's response ends with it); its teardown (the
	// sandbox's removal, the chat's release) may still run.
	answered atomic.Bool

	// admit: the assistant, the request's metadata (with the Create
	// hook's merged in later) and the turn's connector (a Create hook may
	// choose another).
	asst   *assistant.Assistant
	meta   map[string]any
	connID string
	// refused is set when a limit refused the turn before it did any
	// work: it gets no usage record.
	refused bool

	// assemble: conv is the turn's conversation (nil before; from then on
	// the chat holds the turn, and a failure is stored with it), opts its
	// options, hooks and hc the assistant's hooks and their context.
	conv  *conversation
	opts  chat.Options
	hooks *jsapi.Hooks
	hc    *jsapi.Context

	// acquire: bridge is the request's bridge session (nil without one);
	// upstreamConn is the connector id its model proxy forwards to.
	bridge       *bridge.Session
	upstreamConn string
	// keep is set for a turn of an assistant with sandbox.keep_alive; kept
	// is then the chat's kept sandbox and CLI, and usageBase and
	// egressBase what its bridge had metered before this turn.
	keep bool
	kept *keptChat
	// starting: the turn counts among the new sandboxes' turns before
	// their first text (startingCLI).
	starting atomic.Bool
	// primed is the CLI started ahead of the chat in its claimed pooled
	// sandbox (prime.go), until the executor takes it.
	primed executor.Warm
	// hookCtx is the hook context the bridge's host tools run with.
	hookCtx *atomic.Pointer[jsapi.Context]
	// cur is the turn the bridge's own tools serve (this one, or a later
	// turn of a kept chat).
	cur        *atomic.Pointer[turn]
	usageBase  chat.Usage
	egressBase []chat.HostUsage
	// stopWatch ends the watch on the sandbox's workspace disk, before the
	// done event (its last check may send a notice).
	stopWatch func()

	// create: hookOptions are the model options the Create hook returned;
	// delegated is set when a hook's delegate (Create's, or Next's) gave
	// the turn's answer; mcpRun is the assistant with the MCP servers the
	// turn uses (its Create hook's mcp_servers applied), which the
	// bridge's process tools read from their own goroutines; tools are a
	// direct assistant's MCP tools, which the server runs (tools.go; nil
	// for a sandboxed one).
	hookOptions chat.ModelOptions
	delegated   bool
	mcpRun      atomic.Pointer[assistant.Assistant]
	tools       *toolbox

	// execute: model is the model the turn asked for, answer what the
	// execution produced (Next may replace its content), usage the turn's
	// usage (finish adds what is measured last).
	model  string
	answer execution
	usage  chat.Usage
	// scripted is set when the turn's model is a scripted connector.
	scripted bool
	// authMode is the auth_mode of the connector connection() resolved.
	authMode string
	// closers run when the turn ends (per-turn scripted servers).
	closers []func()

	// next: data is what the Next hook (or a delegate) returned as
	// {data}.
	data any

	// talk is the turn's line from its user to its CLI (talk.go).
	talk executor.Talk

	// persist: saved tells that the turn is in the chat's history.
	saved bool

	// tm records where the turn's time goes.
	tm timings
	// trial, when set, makes the turn the test of a skill proposal.
	trial *skillTrial
	// nested is set for a turn another turn's hook runs (ctx.agent,
	// delegate): that turn holds the user's slot and its own chat.
	nested bool
	// hookUsage is the usage of the hooks' ctx.llm calls not yet in
	// usage (guarded by mu: a hook's All calls at once).
	hookUsage chat.Usage
	// hookMCP are the MCP sessions the hooks' ctx.mcp opened, by server,
	// closed when the turn ends (guarded by mu).
	hookMCP map[string]*mcp.ClientSession
	// mu guards proposed, hookUsage and hookMCP: the proposals with a test prompt the agent made
	// (host tools may run at once), tested once the turn ended.
	mu       sync.Mutex
	proposed []proposedTest
	// after is the turn's teardown (the sandbox's removal, the chat's
	// admission), run after the done event, last registered first, before
	// Chat returns: the client has its answer without waiting for it.
	after []func()
}

// defer registers f to run after the done event (see after).
func (t *turn) defer_(f func()) { t.after = append(t.after, f) }

// teardown runs the turn's after functions, last registered first; a
// panic in one does not skip the others.
func (t *turn) teardown() {
	for i := len(t.after) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.p.log.Error("turn teardown panicked", "panic", r, "user", t.req.UserID, "chat", t.req.ChatID)
				}
			}()
			t.after[i]()
		}()
	}
	t.after = nil
}

// serialize makes emit safe to call from executor and hook goroutines,
// drops events after done, and notes whether an error event went out.
func (t *turn) serialize(emit chat.EmitFunc) chat.EmitFunc {
	return chat.NewSerial(func(e chat.Event) {
		if e.Type == chat.TypeError && e.Event == chat.Start {
			t.errEmitted.Store(true)
		}
		t.sawEvent(e)
		if emit != nil {
			emit(e)
		}
	}).Emit
}

// nextID returns a message id for events the pipeline itself sends.
func (t *turn) nextID(prefix string) string {
	return prefix + "-" + strconv.FormatInt(t.msgSeq.Add(1), 10)
}

// run runs the turn's phases. What a phase leaves to undo after the
// done event (the sandbox, the chat's admission) it registers with
// defer_; what must end before the done event run defers.
func (t *turn) run(ctx context.Context) (*Response, error) {
	app := t.p.App()
	if err := t.admit(ctx, app); err != nil {
		return nil, err
	}
	// Hooks that call other assistants see which run above them.
	ctx = withChain(ctx, t.asst.ID)
	t.p.metrics.running.Inc()
	defer t.p.metrics.running.Dec()
	if err := t.assemble(ctx, app); err != nil {
		return nil, err
	}
	// Messages a hook left streaming are ended before done, whatever path
	// the turn takes (Next ends them itself when it runs).
	defer t.hc.EndOpen()
	// The sandbox comes before Create: the hook may use it.
	sb, err := t.acquire(ctx, app)
	defer t.endWatch()
	if err != nil {
		return nil, err
	}
	agent, err := t.create(ctx, app)
	// The MCP sessions of a direct assistant's tools end before done.
	defer t.tools.close()
	if err != nil {
		return nil, err
	}
	if !t.delegated {
		// A Create hook's delegate answered instead: the model and the
		// Next hook do not run (as in Yao).
		err = t.execute(ctx, app, agent, sb)
		if err = t.next(ctx, err); err != nil {
			return nil, err
		}
	}
	return t.persist(ctx), nil
}

// endWatch ends the watch on the sandbox's workspace disk, if any.
func (t *turn) endWatch() {
	if t.stopWatch != nil {
		t.stopWatch()
	}
}
