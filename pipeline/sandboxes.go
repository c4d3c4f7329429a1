package pipeline

import (
	"cmp"
	"context"
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
	createStart := time.Now()
	ws, releaseWS, err := p.cfg.Workspaces.AcquireWith(ctx, t.req.UserID, t.req.ChatID, sandbox.AcquireOptions{MaxDisk: a.Sandbox.DiskBytes})
	if err != nil {
		releaseSlot()
		return nil, nil, &chat.Error{Code: chat.ErrSandbox, Message: "workspace unavailable: " + err.Error(), Err: err}
	}
	// A kept chat's sandbox outlives the turn: the turn gives back its
	// slot, the rest goes when the kept chat stops.
	release := func() { releaseWS(); releaseSlot() }
	if t.keep {
		release = releaseWS
	}
	var mounts []sandbox.Mount
	mounts = append(mounts, p.cfg.RuntimeMounts[name]...)
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
	loading := t.nextID("loading")
	isolation := cmp.Or(spec.Isolation, sandbox.IsolationRunc)
	msg := "Starting sandbox (" + name + ")…"
	if isolation != sandbox.IsolationRunc {
		msg = "Starting sandbox (" + name + ", " + isolation + ")…"
	}
	t.emit(chat.Event{Event: chat.Start, ID: loading, Type: chat.TypeLoading, Text: msg, Props: map[string]any{"message": msg, "runtime": name, "isolation": isolation}})
	spec.Env = withBridgeEnv(env, t.bridge)
	sb, err := rt.Create(ctx, spec)
	t.phase(phaseSandboxCreate, createStart)
	t.tm.sandbox = chat.SandboxCold
	t.emit(chat.Event{Event: chat.End, ID: loading, Type: chat.TypeLoading})
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
	// A full workspace is a notice (the agent got ENOSPC); where the limit
	// is only measured (no root), the turn is stopped too.
	t.stopWatch = ws.WatchDisk(ctx, func(f sandbox.DiskFull) {
		chat.Notice(t.emit, t.nextID("notice"), sandbox.NoticeCode, f.Message())
		if !f.Enforced {
			t.cancel(sandbox.ErrDiskFull)
		}
	})
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
