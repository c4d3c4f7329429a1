package pipeline

import (
	"cmp"
	"context"
	"maps"
	"sync"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// createSandbox acquires the chat's workspace and creates the sandbox. The
// returned cleanup removes the sandbox and releases the workspace; it runs
// with its own timeout even when ctx has ended.
func (t *turn) createSandbox(ctx context.Context, app *assistant.App, a *assistant.Assistant, lim assistant.Limits, hooks *jsapi.Hooks, hc *jsapi.Context) (sandbox.Sandbox, func(), error) {
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
		sess, err := t.startBridge(ctx, name, app, a, hooks, hc)
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
	sb, err := rt.Create(ctx, spec)
	t.phase(phaseSandboxCreate, createStart)
	t.tm.sandbox = chat.SandboxCold
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
	t.watchDisk(ctx, sb)
	remove := func() {
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
			sb: sb, bridge: t.bridge, hookCtx: t.hookCtx, cur: t.cur, memory: spec.MemoryBytes, keepAlive: a.Sandbox.KeepAlive}
		var once sync.Once
		c.remove = func() { once.Do(remove) }
		p.kept.admit(c)
		t.kept = c
		endTurn := t.bridgeTurn(ctx, a)
		return sb, func() { endTurn(); releaseSlot(); t.keepOrDrop(c) }, nil
	}
	return sb, remove, nil
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
