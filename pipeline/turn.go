package pipeline

import (
	"cmp"
	"context"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// removeTimeout bounds sandbox removal, which runs even after the request's
// context ended.
const removeTimeout = 30 * time.Second

// turn is one running Chat call.
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

	asst *assistant.Assistant
	// meta is the request's metadata with the Create hook's merged in.
	meta   map[string]any
	connID string
	// scripted is set when the turn's model is a scripted connector.
	scripted bool
	// conv is the turn's conversation once assembled (nil before), saved
	// tells that the turn is in the chat's history.
	conv         *conversation
	saved        bool
	model        string
	usage        chat.Usage
	sessionID    string
	content      string
	data         any
	finishReason string
	toolCalls    []chat.ToolCall
	notices      []string // an executor's notice codes

	// bridge is the request's bridge session (nil without one);
	// upstreamConn is the connector id its model proxy forwards to.
	bridge       *bridge.Session
	upstreamConn string
	// authMode is the auth_mode of the connector connection() resolved.
	authMode string
	// closers run when the turn ends (per-turn scripted servers).
	closers []func()
	// refused is set when a limit refused the turn before it did any
	// work: it gets no usage record.
	refused bool
	// tm records where the turn's time goes.
	tm timings
	// keep is set for a turn of an assistant with sandbox.keep_alive; kept
	// is then the chat's kept sandbox and CLI, and usageBase and
	// egressBase what its bridge had metered before this turn.
	keep bool
	kept *keptChat
	// hookCtx is the hook context the bridge's host tools run with.
	hookCtx *atomic.Pointer[jsapi.Context]
	// cur is the turn the bridge's own tools serve (this one, or a later
	// turn of a kept chat).
	cur        *atomic.Pointer[turn]
	usageBase  chat.Usage
	egressBase []chat.HostUsage

	// hookOptions are the model options the Create hook returned.
	hookOptions chat.ModelOptions

	// trial, when set, makes the turn the test of a skill proposal.
	trial *skillTrial
	// nested is set for a turn another turn's hook runs (ctx.agent,
	// delegate): that turn holds the user's slot and its own chat.
	nested bool
	// mu guards proposed: the proposals with a test prompt the agent made
	// (host tools may run at once), tested once the turn ended.
	mu       sync.Mutex
	proposed []proposedTest
	// after is the turn's teardown (the sandbox's removal, the chat's
	// admission), run after the done event, last registered first, before
	// Chat returns: the client has its answer without waiting for it.
	after []func()
	// stopWatch ends the watch on the sandbox's workspace disk, before the
	// done event (its last check may send a notice).
	stopWatch func()
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

func (t *turn) run(ctx context.Context) (*Response, error) {
	req := t.req
	if err := validateIDs(req.UserID, req.ChatID); err != nil {
		return nil, err
	}
	app := t.p.App()
	t.p.hooks.Prune(app)
	a, err := findAssistant(app, req.AssistantID)
	if err != nil {
		return nil, err
	}
	t.asst = a
	// Hooks that call other assistants see which run above them.
	ctx = withChain(ctx, a.ID)
	t.meta = maps.Clone(req.Metadata)
	if t.trial == nil {
		// Only a skill's test turn carries it, so hooks may trust it.
		delete(t.meta, SkillTestMetadata)
	}
	if err := checkMessages(req.Messages); err != nil {
		return nil, err
	}
	if err := t.checkRequest(app, a); err != nil {
		return nil, err
	}
	connID, err := t.initialConnector(app, a)
	if err != nil {
		return nil, err
	}
	t.connID = connID
	if c, ok := app.Connectors[connID]; ok && a.Sandbox == nil {
		// What the client asks of the model is checked before anything
		// runs (again when the connector is called: Create may change it).
		if err := connector.CheckOptions(c.Type, c.ModelCapabilities(a.Options.Merge(t.req.Options).Model), t.req.Options); err != nil {
			return nil, fieldError(err)
		}
	}
	lim := limits(app)
	t.p.breakers.Configure(breakerSettings(app))
	release, err := t.admit(ctx, lim)
	if err != nil {
		t.refused = true
		return nil, err
	}
	// Released last, after the sandbox is gone: the chat's next turn never
	// meets this one's sandbox.
	t.defer_(release)
	t.p.metrics.running.Inc()
	defer t.p.metrics.running.Dec()
	if t.proxied(a) {
		// A sandboxed turn whose model calls would only meet an open
		// breaker fails before it starts a sandbox.
		if err := t.p.breakers.Get(t.connID).Check(); err != nil {
			return nil, err
		}
	}
	assembleStart := time.Now()
	conv, err := t.assemble(ctx)
	t.phase(phaseAssemble, assembleStart)
	if err != nil {
		return nil, err
	}
	// From here on the chat holds the turn: a failure is stored with it.
	t.conv = &conv
	options := t.options(a)

	hooks, err := t.p.hooks.Get(a)
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrHook, Message: "hooks do not compile: " + err.Error(), Err: err}
	}
	hc := t.hookContext(a)
	// Messages a hook left streaming are ended before done, whatever path
	// the turn takes (Next ends them itself when it runs).
	defer hc.EndOpen()

	// Sandbox first: the Create hook may use it. Removal is deferred so it
	// runs on every path out of here, panics included.
	var sb sandbox.Sandbox
	if a.Sandbox != nil {
		s, cleanup, err := t.sandboxFor(ctx, app, a, lim, hooks, hc)
		if err != nil {
			return nil, err
		}
		// After the done event: the answer does not wait for the removal.
		t.defer_(cleanup)
		if t.stopWatch != nil {
			defer t.stopWatch()
		}
		sb = s
		hc.Sandbox = s
		hc.Computer = t.computerInfo(app, a)
		if t.tm.sandbox != chat.SandboxWarm {
			// A kept sandbox ran its prepare steps when it started.
			if err := t.prepare(ctx, a, s); err != nil {
				return nil, err
			}
		}
	}
	if hooks != nil && hooks.Has("Create") {
		start := time.Now()
		res, err := hooks.Create(ctx, hc, conv.all(), options)
		t.phase(phaseHookCreate, start)
		if err != nil {
			return nil, jsapi.ChatError(err)
		}
		if res != nil {
			if res.Messages != nil {
				replace, added := conv.replace, conv.added
				conv = split(res.Messages)
				conv.replace, conv.added = replace, added
				if len(conv.input) == 0 {
					return nil, &chat.Error{Code: chat.ErrHook, Message: "Create hook returned messages without a trailing user message"}
				}
			}
			if o := res.Options; o != nil {
				if o.Sandbox != nil && a.Sandbox == nil {
					return nil, chat.Errorf(chat.ErrHook, "Create hook options: sandbox: this assistant has no sandbox")
				}
				meta := o.Metadata
				options = options.Merge(*o)
				t.hookOptions = t.hookOptions.Merge(o.ModelOptions)
				// Yao merges the hook's metadata into the request's.
				for k, v := range meta {
					if t.meta == nil {
						t.meta = map[string]any{}
					}
					t.meta[k] = v
				}
				options.Metadata = t.meta
				if o.Locale != "" {
					hc.Locale = o.Locale
				}
			}
			if len(res.Ignored) > 0 {
				t.p.log.Warn("Create hook returned Yao-only fields; ignored", "assistant", a.ID, "fields", res.Ignored)
			}
			if res.Delegate != nil {
				// Yao: the other assistant answers instead, and this one's
				// model and Next hook do not run.
				if err := t.delegate(ctx, res.Delegate, conv); err != nil {
					return nil, err
				}
				return t.answer(ctx, conv), nil
			}
		}
	}
	conv = conv.withPrompts(t.prompts(app, a, options))
	if c := options.Connector; c != t.connID {
		if _, ok := app.Connectors[c]; !ok {
			return nil, chat.Errorf(chat.ErrHook, "Create hook chose unknown connector %q", c)
		}
		t.connID = c
	}
	run, err := t.withMCPServers(app, a, options.MCPServers)
	if err != nil {
		return nil, err
	}

	var execErr error
	var tools []executor.ToolCall
	execStart := time.Now()
	completion := jsapi.Completion{Created: time.Now().Unix()}
	if sb != nil {
		var res *executor.Result
		res, execErr = t.execSandboxed(ctx, app, run, sb, conv, options)
		if res != nil {
			t.content, t.sessionID, t.notices = res.Content, res.SessionID, res.Notices
			t.usage.Add(res.Usage)
			tools = res.ToolCalls
			t.tm.exec, t.tm.tools = res.Timings, res.ToolCalls
			completion.ID, completion.FinishReason = res.SessionID, "stop"
		}
	} else {
		var res *connector.Response
		res, execErr = t.execDirect(ctx, app, conv, options)
		if res != nil {
			t.content = res.Content
			t.usage.Add(res.Usage)
			t.finishReason = chat.FinishReason(res.FinishReason)
			t.toolCalls = res.ToolCalls
			completion.ReasoningContent, completion.FinishReason = res.Thinking, t.finishReason
			for _, tc := range res.ToolCalls {
				completion.ToolCalls = append(completion.ToolCalls, jsapi.CompletionToolCall{ID: tc.ID, Name: tc.Name, Arguments: string(tc.Input)})
			}
			completion.Model = res.Model
		}
	}
	t.phase(phaseExecute, execStart)
	if execErr == nil && t.finishReason == "" {
		t.finishReason = chat.FinishStop
	}

	if hooks != nil && hooks.Has("Next") {
		start := time.Now()
		defer t.phase(phaseHookNext, start)
		completion.Content, completion.Usage = t.content, t.usage
		completion.Model = cmp.Or(completion.Model, t.model)
		payload := jsapi.NextPayload{Messages: conv.all(), Completion: completion, Tools: tools}
		if execErr != nil {
			payload.Error = execErr.Error()
		}
		res, err := hooks.Next(ctx, hc, payload, options)
		switch {
		case err != nil:
			t.p.log.Warn("Next hook failed", "assistant", a.ID, "user", t.req.UserID, "chat", t.req.ChatID, "error", err)
			chat.Notice(t.emit, t.nextID("notice"), "next_hook_failed", "Next hook failed: "+err.Error())
		case res != nil:
			if len(res.Metadata) > 0 {
				t.p.log.Info("Next hook metadata", "assistant", a.ID, "user", t.req.UserID, "chat", t.req.ChatID, "metadata", res.Metadata)
			}
			if res.HasData {
				t.data = res.Data
				if s, ok := res.Data.(string); ok {
					t.content = s
				}
			}
			if res.Delegate != nil {
				// Yao: the other assistant's answer replaces this one's
				// (also one that failed: a fallback).
				if err := t.delegate(ctx, res.Delegate, conv); err != nil {
					return nil, err
				}
				execErr = nil
			}
		}
	}
	if execErr != nil {
		return nil, execErr
	}
	return t.answer(ctx, conv), nil
}

// answer stores the turn's answer in the chat's history (a failure to is a
// notice: the client has the answer) and returns it.
func (t *turn) answer(ctx context.Context, conv conversation) *Response {
	if err := t.saveHistory(ctx, conv, chat.Failure{}); err != nil {
		t.p.log.Error("history not saved", "user", t.req.UserID, "chat", t.req.ChatID, "error", err)
		chat.Notice(t.emit, t.nextID("notice"), "history_not_saved", "the answer was not saved to the chat history: "+err.Error())
	}
	return &Response{Content: t.content, SessionID: t.sessionID, Usage: t.usage, Data: t.data,
		FinishReason: t.finishReason, ToolCalls: t.toolCalls}
}
