package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/checkpoint"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/preview"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/store"
)

// AppSource gives the current app. *assistant.Live implements it; so does
// Static for an app that never reloads.
type AppSource interface {
	Current() *assistant.App
}

// Static is an AppSource for a fixed app.
type Static struct{ App *assistant.App }

// Current returns the app.
func (s Static) Current() *assistant.App { return s.App }

// History stores conversations per (user, chat).
type History interface {
	History(ctx context.Context, user, chat string) ([]chat.Message, error)
	AppendMessages(ctx context.Context, user, chat, assistantID string, msgs ...chat.Message) error
	ReplaceHistory(ctx context.Context, user, chat, assistantID string, msgs []chat.Message) error
	// ClaimChat binds the chat to assistantID when it has no assistant
	// yet, atomically, and returns the chat's assistant. A chat belongs to
	// the assistant that started it: a turn naming another is refused.
	ClaimChat(ctx context.Context, user, chat, assistantID string) (string, error)
}

// UsageRecorder records what each turn cost.
type UsageRecorder interface {
	RecordUsage(ctx context.Context, rec UsageRecord) error
}

// UsageRecord is one turn's usage line (the store's record, so a
// *store.Store is a UsageRecorder as it is).
type UsageRecord = store.UsageRecord

// Config wires a Pipeline. App is required; everything else has a usable
// default for direct (non-sandboxed) assistants. Sandboxed assistants need
// Runtimes and Workspaces.
type Config struct {
	App AppSource
	// Runtimes by name ("docker", "local"); DefaultRuntime is used when
	// neither the assistant nor app.jsonc names one.
	Runtimes       map[string]sandbox.Runtime
	DefaultRuntime string
	// RuntimeMounts are extra read-only mounts per runtime name (the local
	// runtime needs the host's CLI binaries mounted in).
	RuntimeMounts map[string][]sandbox.Mount
	Workspaces    *sandbox.Workspaces
	// Executors by sandbox command; nil means DefaultExecutors().
	Executors map[string]executor.Executor
	// History, Memory and Usage persist across requests; nil means
	// in-memory stores that live as long as the Pipeline.
	History History
	Memory  jsapi.MemoryStore
	Usage   UsageRecorder
	// Skills keeps the skills agents propose and their users approve
	// (nil: skill authoring is off, and turns install the assistants' own
	// skills only).
	Skills SkillStore
	// Approvals keeps what users allow for the rest of a chat (tool
	// approval's "remember"); nil: in memory, for as long as the
	// Pipeline lives. *store.Store keeps it with the chat.
	Approvals approval.Store
	// Checkpoints keeps the chats' checkpoints (nil: none are taken, and
	// chats cannot be rewound or forked).
	Checkpoints *checkpoint.Store
	// Bridge, when set, gives every sandbox its host tools and (for
	// claude) a model proxy; sandboxes then default to network "none" and
	// hold no real key. Nil: sandboxes reach the model API themselves
	// (network "host") and get the connector's key.
	Bridge *BridgeConfig
	// Previews serves the ports assistants declare to their chats' users
	// (nil: no previews; declared ports are not relayed). It needs Bridge:
	// the bridge's port relay carries the traffic.
	Previews *preview.Manager
	// Hooks compiles and caches the assistants' hooks; nil means a cache
	// of the Pipeline's own.
	Hooks *HookCache
	// Logger receives the audit line of every turn and hook logs.
	Logger *slog.Logger
	// ChatLocks serialises the turns of each chat (nil: NewChatLocks, in
	// this process).
	ChatLocks ChatLocks
	// Breakers are the connectors' circuit breakers (nil: a set of the
	// Pipeline's own). Their settings follow app.jsonc limits.breaker.
	Breakers *breaker.Set
	// Metrics receives the pipeline's metrics (nil: kept, not exported).
	Metrics *Metrics
	// CleanupGrace is how long Close lets canceled turns clean up before
	// it removes their sandboxes itself (0: DefaultCleanupGrace).
	CleanupGrace time.Duration
	// TracerProvider receives a span per turn with its phases as children
	// (nil: OpenTelemetry's global provider, a no-op unless set up).
	TracerProvider trace.TracerProvider
}

// Pipeline runs chat turns. It is safe for concurrent use.
type Pipeline struct {
	cfg       Config
	log       *slog.Logger
	executors map[string]executor.Executor
	hooks     *HookCache

	users userSlots
	// termSlots counts each user's open terminals, uploaders their
	// uploads.
	termSlots   userSlots
	uploaders   userSlots
	slots       slotPool
	uploadSlots slotPool
	quotas      diskQuotas
	chatLocks   ChatLocks
	// branchWait bounds how long a rewind or fork waits for the chat's
	// running turn (rewindWait; tests shorten it).
	branchWait time.Duration
	breakers   *breaker.Set
	metrics    *Metrics
	kept       *keptChats
	pool       *warmPool
	// waits counts the turns and terminals waiting for a sandbox slot:
	// the pool makes none meanwhile.
	waits atomic.Int64
	// starting counts the sandboxed turns between their new sandbox and
	// their first text (their CLI's start): the warm pool refills only
	// while none is, so that the cores go to the CLIs users wait for.
	starting atomic.Int64
	// approvals holds the tool calls waiting for their users' answers.
	approvals *approval.Broker
	// proxyLimits bound what the model proxies of all this server's
	// sandboxes hold at once (limits.model_proxy.request_memory, as the
	// app had it at the start).
	proxyLimits *bridge.ServerLimits

	mu     sync.Mutex
	active map[*turn]struct{}
	live   map[*liveSandbox]struct{}
	terms  map[*Terminal]struct{}
	closed bool
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeDone chan struct{}
	// measuring runs the kept chats' memory measures (Close waits).
	measuring sync.WaitGroup
	closeErr  error
}

// liveSandbox is a sandbox a turn created and has not removed yet, with the
// turn's bridge session: what Close removes when the turn cannot.
type liveSandbox struct {
	sb     sandbox.Sandbox
	bridge *bridge.Session
	user   string
	chat   string
}

// New builds a Pipeline. It starts no goroutines.
func New(cfg Config) (*Pipeline, error) {
	if cfg.App == nil || cfg.App.Current() == nil {
		return nil, errors.New("pipeline: no app")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Executors == nil {
		cfg.Executors = DefaultExecutors()
	}
	if cfg.History == nil {
		cfg.History = newMemHistory()
	}
	if cfg.Memory == nil {
		cfg.Memory = jsapi.NewMemStore()
	}
	if cfg.Hooks == nil {
		cfg.Hooks = &HookCache{}
	}
	if cfg.Runtimes != nil && cfg.DefaultRuntime != "" {
		if _, ok := cfg.Runtimes[cfg.DefaultRuntime]; !ok {
			return nil, fmt.Errorf("pipeline: default runtime %q is not configured (have %s)", cfg.DefaultRuntime, strings.Join(sortedKeys(cfg.Runtimes), ", "))
		}
	}
	if cfg.CleanupGrace <= 0 {
		cfg.CleanupGrace = DefaultCleanupGrace
	}
	if cfg.ChatLocks == nil {
		cfg.ChatLocks = NewChatLocks()
	}
	if cfg.Breakers == nil {
		cfg.Breakers = breaker.NewSet(breakerSettings(cfg.App.Current()), cfg.Logger)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = mustMetrics()
	}
	p := &Pipeline{
		cfg:         cfg,
		log:         cfg.Logger,
		executors:   cfg.Executors,
		hooks:       cfg.Hooks,
		chatLocks:   cfg.ChatLocks,
		branchWait:  rewindWait,
		breakers:    cfg.Breakers,
		metrics:     cfg.Metrics,
		active:      map[*turn]struct{}{},
		live:        map[*liveSandbox]struct{}{},
		kept:        newKeptChats(),
		approvals:   approval.NewBroker(cfg.Approvals, cfg.Logger),
		closeDone:   make(chan struct{}),
		proxyLimits: bridge.NewServerLimits(limits(cfg.App.Current()).ModelProxy.RequestMemory, 0),
	}
	p.pool = newWarmPool(p)
	return p, nil
}

// limits are the app's limits (app.jsonc "limits", defaults for a hand-built
// app).
func limits(app *assistant.App) assistant.Limits {
	if app.Config == nil {
		return assistant.DefaultLimits()
	}
	return app.Config.Limits.WithDefaults()
}

func breakerSettings(app *assistant.App) breaker.Settings {
	b := limits(app).Breaker
	return breaker.Settings{Failures: b.Failures, Cooldown: b.Cooldown}
}

// Breakers returns the state of every connector's circuit breaker that has
// been used, sorted by connector.
func (p *Pipeline) Breakers() []breaker.Status { return p.breakers.Statuses() }

// App returns the current app.
func (p *Pipeline) App() *assistant.App { return p.cfg.App.Current() }

// Workspace acquires the workspace of (user, chat) for the files API. The
// caller must call release.
func (p *Pipeline) Workspace(ctx context.Context, user, chatID string) (*sandbox.Workspace, func(), error) {
	if p.cfg.Workspaces == nil {
		return nil, nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: "this server has no workspaces", Err: sandbox.ErrNotFound}
	}
	if err := validateIDs(user, chatID); err != nil {
		return nil, nil, err
	}
	// Reading a chat's files must not create its workspace.
	dir, err := p.cfg.Workspaces.Path(user, chatID)
	if err != nil {
		return nil, nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: fmt.Sprintf("chat %q has no workspace", chatID), Err: sandbox.ErrNotFound}
	}
	ws, release, err := p.cfg.Workspaces.Acquire(ctx, user, chatID)
	if err != nil {
		return nil, nil, &chat.Error{Code: chat.ErrSandbox, Message: "workspace unavailable", Err: err}
	}
	return ws, release, nil
}

// DefaultCleanupGrace is how long Close lets canceled turns remove their
// own sandboxes before it removes those still live itself.
const DefaultCleanupGrace = 10 * time.Second

// Close closes the open terminals, refuses new turns and waits for the
// running ones until ctx ends.
// Then it cancels them and gives them Config.CleanupGrace to end and remove their
// sandboxes; the sandboxes (and bridge sessions) of turns still running
// after that, stuck where cancellation does not reach, it removes itself,
// so Close always returns. It returns ctx's error when turns had to be
// canceled. Later calls wait for the first one (or their ctx) and return
// its result.
func (p *Pipeline) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		defer close(p.closeDone)
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.closeTerminals("", "")
		// Nothing claims a pooled sandbox any more.
		p.pool.close()
		done := make(chan struct{})
		go func() {
			p.wg.Wait()
			p.kept.stopMeter()
			p.measuring.Wait()
			// Chats kept between turns stop once no turn runs (a turn
			// ending now stops its own).
			p.kept.closeAll()
			close(done)
		}()
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		select {
		case <-done: // both were ready
			return
		default:
		}
		p.CancelTurns()
		p.closeErr = ctx.Err()
		select {
		case <-done:
			return
		case <-time.After(p.cfg.CleanupGrace):
		}
		p.closeErr = errors.Join(p.closeErr, p.removeLive())
	})
	select {
	case <-p.closeDone:
		return p.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CancelTurns refuses new turns and cancels the running ones: each ends
// with a shutting_down error event and done, and removes its sandbox. It
// does not wait for them (Close does). A server calls it when its drain
// timeout passed, before it closes the connections, so clients learn why
// their turn ended.
func (p *Pipeline) CancelTurns() {
	p.mu.Lock()
	p.closed = true
	n := len(p.active)
	for t := range p.active {
		t.cancel(ErrClosed)
	}
	p.mu.Unlock()
	if n > 0 {
		p.log.Warn("shutting down: canceling running turns", "turns", n)
	}
}

// removeLive removes the sandboxes and bridge sessions of turns that did
// not end, in parallel.
func (p *Pipeline) removeLive() error {
	p.mu.Lock()
	live := make([]*liveSandbox, 0, len(p.live))
	for l := range p.live {
		live = append(live, l)
	}
	p.mu.Unlock()
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, l := range live {
		wg.Go(func() {
			p.log.Error("turn stuck after cancel: removing its sandbox", "sandbox", l.sb.ID(), "user", l.user, "chat", l.chat)
			ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
			defer cancel()
			errs[i] = l.sb.Remove(ctx)
			if l.bridge != nil {
				errs[i] = errors.Join(errs[i], l.bridge.Close(ctx))
			}
			if errs[i] == nil {
				p.untrack(l)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// track records a live sandbox; untrack forgets it once removed.
func (p *Pipeline) track(l *liveSandbox) {
	p.mu.Lock()
	p.live[l] = struct{}{}
	p.mu.Unlock()
	p.metrics.sandboxes.Inc()
}

func (p *Pipeline) untrack(l *liveSandbox) {
	p.mu.Lock()
	_, ok := p.live[l]
	delete(p.live, l)
	p.mu.Unlock()
	if ok {
		p.metrics.sandboxes.Dec()
	}
}

// Chat runs one turn, streaming its events to emit, and returns the final
// response. Every event stream ends with exactly one done event, also on
// failure. A failed turn returns a *chat.Error; its cause is
// ErrUnknownAssistant for an assistant the app does not have.
func (p *Pipeline) Chat(ctx context.Context, req *Request, emit chat.EmitFunc) (resp *Response, err error) {
	return p.chat(ctx, req, emit, nil, false)
}

// chat runs a turn, a skill proposal's test when trial is set, a turn a
// hook of another turn runs (ctx.agent, delegate) when nested.
func (p *Pipeline) chat(ctx context.Context, req *Request, emit chat.EmitFunc, trial *skillTrial, nested bool) (resp *Response, err error) {
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := &turn{p: p, req: req, cancel: cancel, start: start, done: make(chan struct{}), trial: trial, nested: nested}
	t.emit = t.serialize(emit)

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, &chat.Error{Code: chat.ErrShuttingDown, Message: "the server is shutting down and takes no new turns; retry on another server or later",
			Err: ErrClosed, RetryAfter: retryAfter}
	}
	p.active[t] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.active, t)
		p.mu.Unlock()
		close(t.done)
		p.wg.Done()
	}()
	var record func()
	// After the done event: the sandbox's removal and the chat's release,
	// then the turn's records (which include the removal).
	defer func() {
		t.teardown()
		if record != nil {
			record()
		}
		if len(t.proposed) > 0 {
			// The turn's sandbox and slots are released: its proposals'
			// tests do not wait for it, nor it for them.
			p.testProposals(req.UserID, t.proposed)
		}
	}()

	defer func() {
		if r := recover(); r != nil {
			p.log.Error("turn panicked", "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, &chat.Error{Code: chat.ErrInternal, Message: "internal error", Err: fmt.Errorf("panic: %v", r)}
		}
		if err != nil && errors.Is(context.Cause(ctx), ErrClosed) {
			err = &chat.Error{Code: chat.ErrShuttingDown, Err: ErrClosed, RetryAfter: retryAfter,
				Message: "the server is shutting down: this turn was canceled after the drain timeout; send it again (to this server once it is back, or another)"}
		}
		if err != nil {
			// The one place a failure nobody classified gets its code.
			err = chat.AsError(err)
			t.saveFailure(ctx, err)
		}
		record = t.finish(ctx, resp, err)
	}()
	return t.run(ctx)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
