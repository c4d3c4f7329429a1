package pipeline

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// acquire is the phase that gets a sandboxed turn its sandbox (nil for a
// direct turn): the chat's kept one, or a new one whose prepare steps it
// runs. The sandbox's removal, or its keeping for the chat's next turn,
// runs after the done event.
func (t *turn) acquire(ctx context.Context, app *assistant.App) (sandbox.Sandbox, error) {
	a := t.asst
	if a.Sandbox == nil {
		return nil, nil
	}
	// The CLI's connector, when it cannot be resolved (a key not set),
	// fails the turn before its sandbox and workspace are made.
	if _, err := t.resolve(app); err != nil {
		return nil, err
	}
	sb, cleanup, err := t.sandboxFor(ctx, app, a, limits(app))
	if err != nil {
		return nil, err
	}
	// After the done event: the answer does not wait for the removal.
	t.defer_(cleanup)
	if t.tm.sandbox != chat.SandboxWarm {
		t.startingCLI()
	}
	t.hc.Sandbox = sb
	t.hc.Computer = t.computerInfo(app, a)
	if t.tm.sandbox != chat.SandboxWarm {
		// A kept sandbox started its desktop and ran its prepare steps
		// when it started.
		if err := t.startDesktop(ctx, a, sb); err != nil {
			return nil, err
		}
		if err := t.prepare(ctx, a, sb); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// startDesktop starts a new sandbox's desktop (sandbox.desktop), which
// then lives, its supervisor restarting any part that exits, as long as
// the sandbox.
func (t *turn) startDesktop(ctx context.Context, a *assistant.Assistant, sb sandbox.Sandbox) error {
	d := a.Sandbox.Desktop
	if d == nil {
		return nil
	}
	prog := t.startProgress("Starting the desktop…", map[string]any{"step": "desktop"})
	defer prog.end()
	if _, err := desktop.Start(ctx, sb, desktop.Options{Resolution: d.Resolution, ViewOnly: d.ViewOnly}); err != nil {
		code := chat.ErrSandbox
		if ctx.Err() != nil {
			code = chat.ErrCanceled
		}
		return &chat.Error{Code: code, Message: "desktop not started: " + err.Error(), Err: err}
	}
	return nil
}

// sandboxFor gets the turn's sandbox: for an assistant with
// sandbox.keep_alive, the chat's kept one when its CLI is alive and the
// assistant is the one it was started for (a reload or a change restarts
// it), else a new one to keep. The returned cleanup removes the sandbox,
// or keeps it for the chat's next turn.
func (t *turn) sandboxFor(ctx context.Context, app *assistant.App, a *assistant.Assistant, lim assistant.Limits) (sandbox.Sandbox, func(), error) {
	// A skill's test turn runs in a throwaway chat: nothing to keep.
	t.keep = a.Sandbox.KeepAlive > 0 && t.trial == nil
	if !t.keep {
		return t.createSandbox(ctx, app, a, lim)
	}
	start := time.Now()
	c := t.p.kept.take(t.req.UserID, t.req.ChatID)
	var thawErr error
	if c != nil {
		c.endIdleWatch()
		// An idle kept chat is frozen after a while: its CLI runs again.
		thawErr = c.thaw()
	}
	if c != nil && thawErr == nil && c.assistant == a && c.cli != nil && c.cli.Alive() {
		releaseSlot, err := t.sandboxSlot(ctx, lim)
		if err != nil {
			t.p.kept.put(c)
			return nil, nil, err
		}
		t.kept, t.bridge = c, c.bridge
		if c.hookCtx != nil {
			c.hookCtx.Store(t.hc)
		}
		if c.cur != nil {
			c.cur.Store(t)
		}
		t.usageBase, t.egressBase = c.usage, c.egress
		t.tm.sandbox = chat.SandboxWarm
		t.phase(phaseSandboxCreate, start)
		t.watchDisk(ctx, c.sb)
		endTurn := t.bridgeTurn(ctx, a)
		return c.sb, func() { endTurn(); releaseSlot(); t.keepOrDrop(c) }, nil
	}
	if c != nil {
		t.p.log.Info("kept chat restarted", "user", t.req.UserID, "chat", t.req.ChatID, "assistant", a.ID,
			"assistant_changed", c.assistant != a, "cli_alive", c.cli != nil && c.cli.Alive(), "thaw_error", thawErr)
		t.p.kept.drop(c)
	}
	return t.createSandbox(ctx, app, a, lim)
}

// createSandbox acquires the chat's workspace and creates the sandbox. The
// returned cleanup removes the sandbox and releases the workspace; it runs
// with its own timeout even when ctx has ended.
func (t *turn) createSandbox(ctx context.Context, app *assistant.App, a *assistant.Assistant, lim assistant.Limits) (sandbox.Sandbox, func(), error) {
	p := t.p
	rt, name, err := p.runtimeFor(app, a)
	if err != nil {
		return nil, nil, err
	}
	if a.Sandbox.Egress != nil && p.cfg.Bridge == nil {
		return nil, nil, chat.Errorf(chat.ErrSandbox, "assistant %q has a network allow list, which needs the bridge's egress proxy; this server runs without a bridge", a.ID)
	}
	env, err := sandboxEnv(a)
	if err != nil {
		return nil, nil, err
	}
	releaseSlot, err := t.sandboxSlot(ctx, lim)
	if err != nil {
		return nil, nil, err
	}
	// One progress message says what the turn waits for until the sandbox
	// runs: its workspace (mounted, made on first use), then the sandbox
	// (named with its isolation when it is not runc's).
	isolation := cmp.Or(a.Sandbox.Isolation, app.Config.Sandbox.Isolation, sandbox.IsolationRunc)
	prog := t.startProgress("Preparing the workspace…", map[string]any{"runtime": name, "isolation": isolation, "step": "workspace"})
	defer prog.end()
	createStart := time.Now()
	early := t.startEarly(ctx, app, a, rt, name)
	ws, releaseWS, err := p.acquireWorkspace(ctx, t.req.UserID, t.req.ChatID, a.Sandbox.DiskBytes)
	if err != nil {
		releaseSlot()
		return nil, nil, err
	}
	// A kept chat's sandbox outlives the turn: the turn gives back its
	// slot, the rest goes when the kept chat stops.
	release := func() { releaseWS(); releaseSlot() }
	if t.keep {
		release = releaseWS
	}
	var mounts []sandbox.Mount
	mounts = append(mounts, p.cfg.RuntimeMounts[name]...)
	starting := "Starting the sandbox (" + name + ")…"
	if isolation != sandbox.IsolationRunc {
		starting = "Starting the sandbox (" + name + ", " + isolation + ")…"
	}
	prog.set(starting, "sandbox")
	if p.cfg.Bridge != nil {
		sess, err := t.startBridge(ctx, name, app, a)
		if err != nil {
			release()
			if t.keep {
				releaseSlot()
			}
			return nil, nil, err
		}
		t.bridge = sess
		mounts = append(mounts, sess.Mounts()...)
		releaseRest := release
		release = func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
			defer cancel()
			if err := sess.Close(cctx); err != nil {
				p.log.Error("bridge not closed", "user", t.req.UserID, "chat", t.req.ChatID, "error", err)
			}
			releaseRest()
		}
	}
	spec := p.sandboxSpec(app, a, t.req.UserID, t.req.ChatID, ws, mounts)
	spec.Env = withBridgeEnv(env, t.bridge)
	// A new chat of a pooled assistant claims a sandbox made ahead of
	// demand, else (none ready, or its check failed) creates its own.
	t.tm.sandbox = chat.SandboxPooled
	sb, primed := p.pool.claim(ctx, a, name, spec)
	t.adopt(primed, spec)
	if sb == nil {
		t.tm.sandbox = chat.SandboxCold
		sb = early.claim(ctx, spec)
	}
	if sb == nil {
		sb, err = rt.Create(ctx, spec)
	}
	t.phase(phaseSandboxCreate, createStart)
	prog.end()
	if err != nil {
		release()
		if t.keep {
			releaseSlot()
		}
		code := chat.ErrSandbox
		if ctx.Err() != nil {
			code = chat.ErrCanceled
		}
		return nil, nil, &chat.Error{Code: code, Message: "sandbox not created: " + err.Error(), Err: err}
	}
	live := &liveSandbox{sb: sb, bridge: t.bridge, user: t.req.UserID, chat: t.req.ChatID}
	p.track(live)
	endPreviews, err := t.openPreviews(ctx, a, sb, t.bridge, t.cur)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		if rerr := sb.Remove(rctx); rerr == nil {
			p.untrack(live)
		}
		cancel()
		release()
		if t.keep {
			releaseSlot()
		}
		return nil, nil, err
	}
	t.watchDisk(ctx, sb)
	remove := func() {
		endPreviews()
		start := time.Now()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		if err := sb.Remove(rctx); err != nil {
			p.log.Error("sandbox not removed", "sandbox", sb.ID(), "user", t.req.UserID, "chat", t.req.ChatID, "error", err)
		} else {
			p.untrack(live)
		}
		if t.keep {
			// Stopped after the turn (keep_alive passed, caps): not its phase.
			p.metrics.phase(phaseSandboxRemove, start)
		} else {
			t.phase(phaseSandboxRemove, start)
		}
		release()
	}
	if t.keep {
		c := &keptChat{key: keptKey(t.req.UserID, t.req.ChatID), user: t.req.UserID, chat: t.req.ChatID, assistant: a,
			sb: sb, bridge: t.bridge, hookCtx: t.hookCtx, cur: t.cur, memory: spec.MemoryBytes, keepAlive: a.Sandbox.KeepAlive,
			serves: t.bridge != nil && t.bridge.Ports() != nil}
		var once sync.Once
		c.remove = func() { once.Do(remove) }
		p.kept.admit(c)
		t.kept = c
		endTurn := t.bridgeTurn(ctx, a)
		return sb, func() { endTurn(); releaseSlot(); t.keepOrDrop(c) }, nil
	}
	return sb, remove, nil
}

// earlySandbox is a new chat's container started while the chat's
// workspace and bridge are made (startEarly).
type earlySandbox struct {
	t    *turn
	done chan struct{}
	sb   sandbox.Pooled
	err  error
	// claimed: the chat's sandbox is sb; else drop removes it.
	claimed bool
}

// startEarly starts the container of a new chat's sandbox at once, on a
// runtime that attaches a workspace and sockets to a running container
// (sandbox.Pooler, the warm pool's mechanism), so that the cold path
// waits for the longest of the container, the workspace and the bridge,
// not for their sum. It returns nil when the pool holds a sandbox for
// the chat or the runtime cannot start one early; the turn then claims
// or creates one once its workspace is made. A container the turn does
// not claim is removed after the done event.
func (t *turn) startEarly(ctx context.Context, app *assistant.App, a *assistant.Assistant, rt sandbox.Runtime, name string) *earlySandbox {
	// Docker's claim is a mount on the host, without an engine call; a
	// runtime whose claim costs more starts the sandbox for the chat.
	pooler, ok := rt.(sandbox.Pooler)
	if !ok || rt.Name() != "docker" || t.p.pool.has(a, name) {
		return nil
	}
	mounts, err := t.p.pooledMounts(app, a, name)
	if err != nil {
		return nil
	}
	spec := t.p.sandboxSpec(app, a, t.req.UserID, t.req.ChatID, nil, mounts)
	e := &earlySandbox{t: t, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.sb, e.err = pooler.Prestart(ctx, spec)
	}()
	t.defer_(e.drop)
	return e
}

// claim waits for the early container and attaches spec (the chat's
// workspace, bridge and environment) to it. It returns nil when there is
// none to attach, its start or its claim failed (the caller creates the
// sandbox the usual way).
func (e *earlySandbox) claim(ctx context.Context, spec sandbox.Spec) sandbox.Sandbox {
	if e == nil {
		return nil
	}
	<-e.done
	if e.err != nil {
		if !errors.Is(e.err, sandbox.ErrNotPoolable) && ctx.Err() == nil {
			e.t.p.log.Warn("sandbox not started early: creating it", "user", e.t.req.UserID, "chat", e.t.req.ChatID, "error", e.err)
		}
		return nil
	}
	sb, err := e.sb.Claim(ctx, spec)
	if err != nil {
		e.t.p.log.Warn("sandbox started early not attached: creating another", "user", e.t.req.UserID, "chat", e.t.req.ChatID, "sandbox", e.sb.ID(), "error", err)
		return nil
	}
	e.claimed = true
	return sb
}

// drop removes the early container unless the chat claimed it.
func (e *earlySandbox) drop() {
	<-e.done
	if e.sb == nil || e.claimed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	if err := e.sb.Remove(ctx); err != nil {
		e.t.p.log.Error("sandbox started early not removed", "user", e.t.req.UserID, "chat", e.t.req.ChatID, "sandbox", e.sb.ID(), "error", err)
	}
}

// progress is a loading message that says what a turn waits for: set
// replaces its text as the wait moves on, end ends it (once; later calls
// do nothing).
type progress struct {
	t     *turn
	id    string
	props map[string]any
	ended bool
}

// startProgress starts a progress message with text; props (the same on
// every event of it) get "message" (the text) and "step".
func (t *turn) startProgress(text string, props map[string]any) *progress {
	pr := &progress{t: t, id: t.nextID("loading"), props: props}
	pr.emit(chat.Start, text, props["step"])
	return pr
}

func (pr *progress) set(text, step string) {
	if !pr.ended {
		pr.emit(chat.Replace, text, step)
	}
}

func (pr *progress) end() {
	if !pr.ended {
		pr.ended = true
		pr.t.emit(chat.Event{Event: chat.End, ID: pr.id, Type: chat.TypeLoading})
	}
}

func (pr *progress) emit(phase, text string, step any) {
	props := maps.Clone(pr.props)
	props["message"], props["step"] = text, step
	pr.t.emit(chat.Event{Event: phase, ID: pr.id, Type: chat.TypeLoading, Text: text, Props: props})
}

// watchDisk watches the workspace of the turn's sandbox while the turn
// runs. A full workspace is a notice: the agent got ENOSPC, or, where the
// limit is measured, the turn was stopped, its sandbox removed and what
// it wrote past the limit deleted (sandbox.Workspace.WatchDisk).
func (t *turn) watchDisk(ctx context.Context, sb sandbox.Sandbox) {
	t.stopWatch = sb.Workspace().WatchDisk(ctx, func(ctx context.Context) error {
		t.cancel(sandbox.ErrDiskFull)
		return sb.Remove(ctx)
	}, func(f sandbox.DiskFull) {
		chat.Notice(t.emit, t.nextID("notice"), sandbox.NoticeCode, f.Message())
	})
}

// runtimeFor returns the runtime a's sandboxes run on, and its name.
func (p *Pipeline) runtimeFor(app *assistant.App, a *assistant.Assistant) (sandbox.Runtime, string, error) {
	if p.cfg.Workspaces == nil || len(p.cfg.Runtimes) == 0 {
		return nil, "", chat.Errorf(chat.ErrSandbox, "assistant %q needs a sandbox, but this server has no sandbox runtime configured", a.ID)
	}
	name := cmp.Or(a.Sandbox.Runtime, app.Config.Sandbox.Runtime, p.cfg.DefaultRuntime)
	rt, ok := p.cfg.Runtimes[name]
	if !ok {
		return nil, "", chat.Errorf(chat.ErrSandbox, "assistant %q wants sandbox runtime %q, which is not available on this server (have: %s)", a.ID, name, strings.Join(sortedKeys(p.cfg.Runtimes), ", "))
	}
	return rt, name, nil
}

// sandboxSpec is the spec of a's sandboxes in the chat (user, chat): its
// image, limits, network policy, isolation and labels. Turns and terminals both get
// theirs here, so a terminal is confined like the agent it looks after.
func (p *Pipeline) sandboxSpec(app *assistant.App, a *assistant.Assistant, user, chatID string, ws *sandbox.Workspace, mounts []sandbox.Mount) sandbox.Spec {
	return sandbox.Spec{
		UserID:      user,
		ChatID:      chatID,
		Workspace:   ws,
		Image:       a.Sandbox.Image,
		MemoryBytes: a.Sandbox.MemoryBytes,
		CPUs:        a.Sandbox.CPUs,
		Network:     cmp.Or(a.Sandbox.Network, app.Config.Sandbox.Network, p.defaultNetwork(a)),
		Isolation:   isolationOf(app, a),
		Mounts:      mounts,
		Hide:        p.hidden(a.Sandbox.Command),
		Labels:      map[string]string{"dev.agentbox.assistant": a.ID},
	}
}

// isolationOf is the isolation of a's sandboxes: its own, else app.jsonc's
// ("": runc).
func isolationOf(app *assistant.App, a *assistant.Assistant) string {
	return cmp.Or(a.Sandbox.Isolation, app.Config.Sandbox.Isolation)
}

// hidden names the workspace folders and files the command's CLI reads
// configuration from that none of its switches turns off
// (executor.Hider): its sandboxes hide them.
func (p *Pipeline) hidden(command string) []string {
	if h, ok := p.executors[command].(executor.Hider); ok {
		return h.Hide()
	}
	return nil
}

// defaultNetwork is "none" when the bridge carries the CLI's model traffic,
// and "host" otherwise: the CLI must then reach the model API itself.
func (p *Pipeline) defaultNetwork(a *assistant.Assistant) string {
	if p.proxied(a) || a.Sandbox.Command == assistant.CommandYao {
		// (The yao runner's sandbox runs no CLI that would reach a model.)
		return sandbox.NetworkNone
	}
	return sandbox.NetworkHost
}

// sandboxEnv is the environment a Yao v2 sandbox sets (its
// "environment"); an unset $ENV variable fails the turn naming it.
// Secrets are not here: the sandbox holds only placeholders for them and
// the bridge's egress proxy puts the values into requests (egress.go).
func sandboxEnv(a *assistant.Assistant) (map[string]string, error) {
	sb := a.Sandbox
	if len(sb.Environment) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(sb.Environment))
	for k, v := range sb.Environment {
		r, err := assistant.ResolveValue(v)
		if err != nil {
			return nil, chat.Errorf(chat.ErrSandbox, "sandbox environment %s (%s): %v", k, sb.File, err)
		}
		env[k] = r
	}
	return env, nil
}

// computerInfo describes the turn's sandbox for ctx.computer.Info.
func (t *turn) computerInfo(app *assistant.App, a *assistant.Assistant) jsapi.ComputerInfo {
	_, name, _ := t.p.runtimeFor(app, a)
	policy := "oneshot"
	if t.keep {
		policy = "session"
	}
	info := jsapi.ComputerInfo{Runtime: name, Image: a.Sandbox.Image, Policy: policy, Desktop: a.Sandbox.Desktop != nil}
	if pv := t.p.cfg.Previews; pv != nil {
		user, chatID := t.req.UserID, t.req.ChatID
		info.Preview = func(port int, path string) (string, error) { return pv.URL(user, chatID, port, path, nil) }
	}
	return info
}
