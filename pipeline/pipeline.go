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
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
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
	// Bridge, when set, gives every sandbox its host tools and (for
	// claude) a model proxy; sandboxes then default to network "none" and
	// hold no real key. Nil: sandboxes reach the model API themselves
	// (network "host") and get the connector's key.
	Bridge *BridgeConfig
	// Hooks compiles and caches the assistants' hooks; nil means a cache
	// of the Pipeline's own.
	Hooks *HookCache
	// Logger receives the audit line of every turn and hook logs.
	Logger *slog.Logger
}

// Pipeline runs chat turns. It is safe for concurrent use.
type Pipeline struct {
	cfg       Config
	log       *slog.Logger
	executors map[string]executor.Executor
	hooks     *HookCache

	mu     sync.Mutex
	active map[*turn]struct{}
	closed bool
	wg     sync.WaitGroup
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
	return &Pipeline{
		cfg:       cfg,
		log:       cfg.Logger,
		executors: cfg.Executors,
		hooks:     cfg.Hooks,
		active:    map[*turn]struct{}{},
	}, nil
}

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

// Close waits for running turns to finish (bounded by ctx; turns still
// running when ctx ends are cancelled) and refuses new ones.
func (p *Pipeline) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		for t := range p.active {
			t.cancel()
		}
		p.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// Chat runs one turn, streaming its events to emit, and returns the final
// response. Every event stream ends with exactly one done event, also on
// failure. A failed turn returns a *chat.Error; its cause is
// ErrUnknownAssistant for an assistant the app does not have.
func (p *Pipeline) Chat(ctx context.Context, req *Request, emit chat.EmitFunc) (resp *Response, err error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := &turn{p: p, req: req, cancel: cancel, start: start}
	t.emit = t.serialize(emit)

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, &chat.Error{Code: chat.ErrInternal, Message: "server is shutting down", Err: ErrClosed}
	}
	p.active[t] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.active, t)
		p.mu.Unlock()
		p.wg.Done()
	}()

	defer func() {
		if r := recover(); r != nil {
			p.log.Error("turn panicked", "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, &chat.Error{Code: chat.ErrInternal, Message: "internal error", Err: fmt.Errorf("panic: %v", r)}
		}
		if err != nil {
			// The one place a failure nobody classified gets its code.
			err = chat.AsError(err)
		}
		t.finish(ctx, resp, err)
	}()
	return t.run(ctx)
}

func validateIDs(user, chatID string) error {
	if err := sandbox.ValidateID("user", user); err != nil {
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	if err := sandbox.ValidateID("chat", chatID); err != nil {
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
