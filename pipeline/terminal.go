package pipeline

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/bridge/egress"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// TerminalShell is what a terminal runs: bash as a login shell where the
// sandbox has it, else sh.
var TerminalShell = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l"}

// TerminalRequest asks for an interactive shell in a chat's sandbox.
type TerminalRequest struct {
	// UserID owns the chat; ChatID names it. Both are validated.
	UserID, ChatID string
	// AssistantID is the assistant whose sandbox settings (runtime, image,
	// limits, network policy) the terminal gets; "" means the chat's, else
	// the app's only sandboxed assistant. A chat that has an assistant
	// takes no other.
	AssistantID string
	// Rows and Cols are the initial size (0: 24x80).
	Rows, Cols uint16
}

// Terminal is an interactive shell on a pseudo-terminal, in a sandbox of
// its own with the chat's workspace, made the way the chat's assistant
// gets its sandboxes: the same runtime, image, limits, hardening, disk
// limit and network policy (an allow list gets its own egress proxy, as a
// turn's sandbox does); no model proxy and no host tools. It takes one of
// the server's sandbox slots (limits.sandboxes) and, like a turn, one of
// its user's (limits.turns_per_user), within limits.terminals_per_user. Close ends the shell and
// removes the sandbox. Read, Write, Resize and Wait are the
// sandbox.Terminal's.
type Terminal struct {
	sandbox.Terminal
	// AssistantID and Runtime say whose settings and which runtime the
	// sandbox has.
	AssistantID string
	Runtime     string

	p      *Pipeline
	user   string
	chatID string
	sb     sandbox.Sandbox
	live   *liveSandbox
	// cleanups run after the sandbox is removed, newest first (the bridge
	// session, the disk watch, the workspace, the slot).
	cleanups []func()

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// OpenTerminal starts a shell in a new sandbox of the chat. The caller
// must Close it. Errors are *chat.Error: an unknown or unsandboxed
// assistant is invalid_request, another assistant than the chat's
// chat_assistant, a user at limits.terminals_per_user or
// limits.turns_per_user too_many_turns, no free sandbox slot server_busy,
// a sandbox that cannot start sandbox.
func (p *Pipeline) OpenTerminal(ctx context.Context, req TerminalRequest) (_ *Terminal, err error) {
	if err := validateIDs(req.UserID, req.ChatID); err != nil {
		return nil, err
	}
	if req.Rows == 0 {
		req.Rows = sandbox.DefaultRows
	}
	if req.Cols == 0 {
		req.Cols = sandbox.DefaultCols
	}
	if err := sandbox.CheckSize(req.Rows, req.Cols); err != nil {
		return nil, badRequest("%v", err)
	}
	app := p.App()
	a, err := p.terminalAssistant(ctx, app, req)
	if err != nil {
		return nil, err
	}
	rt, name, err := p.runtimeFor(app, a)
	if err != nil {
		return nil, err
	}
	if a.Sandbox.Egress != nil && p.cfg.Bridge == nil {
		return nil, chat.Errorf(chat.ErrSandbox, "assistant %q has a network allow list, which needs the bridge's egress proxy; this server runs without a bridge", a.ID)
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, &chat.Error{Code: chat.ErrShuttingDown, Message: "the server is shutting down", Err: ErrClosed}
	}
	t := &Terminal{AssistantID: a.ID, Runtime: name, p: p, user: req.UserID, chatID: req.ChatID, closed: make(chan struct{})}
	defer func() {
		if err != nil {
			t.cleanup()
		}
	}()
	lim := limits(app)
	releaseUser, err := p.terminalSlots(req.UserID, lim)
	if err != nil {
		return nil, err
	}
	t.cleanups = append(t.cleanups, releaseUser)
	slotStart := time.Now()
	releaseSlot, err := p.sandboxSlot(ctx, lim, nil)
	p.metrics.phase(phaseSandboxWait, slotStart)
	if err != nil {
		return nil, err
	}
	t.cleanups = append(t.cleanups, releaseSlot)
	ws, releaseWS, err := p.acquireWorkspace(ctx, req.UserID, req.ChatID, a.Sandbox.DiskBytes)
	if err != nil {
		return nil, err
	}
	t.cleanups = append(t.cleanups, releaseWS)
	mounts := append([]sandbox.Mount(nil), p.cfg.RuntimeMounts[name]...)
	argv := TerminalShell
	var sess *bridge.Session
	if a.Sandbox.Egress != nil {
		if sess, err = p.terminalBridge(ctx, name, app, a, req); err != nil {
			return nil, err
		}
		t.cleanups = append(t.cleanups, func() {
			cctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
			defer cancel()
			if err := sess.Close(cctx); err != nil {
				p.log.Error("bridge not closed", "user", req.UserID, "chat", req.ChatID, "error", err)
			}
		})
		mounts = append(mounts, sess.Mounts()...)
		argv = sess.WrapCommand(argv)
	}
	env, err := sandboxEnv(a)
	if err != nil {
		return nil, err
	}
	spec := p.sandboxSpec(app, a, req.UserID, req.ChatID, ws, mounts)
	spec.Env = withBridgeEnv(env, sess)
	spec.Labels["dev.agentbox.terminal"] = "true"
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "sandbox not created: " + err.Error(), Err: err}
	}
	t.sb = sb
	t.live = &liveSandbox{sb: sb, bridge: sess, user: req.UserID, chat: req.ChatID}
	p.track(t.live)
	// Where the disk limit is measured, a workspace that grows past it
	// ends the terminal: its sandbox is removed and what it wrote past
	// the limit deleted (a turn is stopped the same way).
	wctx, stopWatch := context.WithCancel(context.Background())
	stop := ws.WatchDisk(wctx, sb.Remove, func(f sandbox.DiskFull) {
		p.log.Warn("terminal's workspace is full", "user", req.UserID, "chat", req.ChatID, "message", f.Message())
		if !f.Enforced {
			go t.Close()
		}
	})
	t.cleanups = append(t.cleanups, func() { stopWatch(); stop() })
	ts, ok := sb.(sandbox.TerminalSandbox)
	if !ok {
		return nil, chat.Errorf(chat.ErrSandbox, "the %s runtime runs no terminals", name)
	}
	term, err := ts.StartTerminal(ctx, sandbox.TerminalRequest{Argv: argv, Rows: req.Rows, Cols: req.Cols})
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "shell not started: " + err.Error(), Err: err}
	}
	t.Terminal = term
	p.mu.Lock()
	if p.terms == nil {
		p.terms = map[*Terminal]struct{}{}
	}
	p.terms[t] = struct{}{}
	p.mu.Unlock()
	p.log.Info("terminal opened", "user", req.UserID, "chat", req.ChatID, "assistant", a.ID, "runtime", name, "sandbox", sb.ID())
	return t, nil
}

// terminalBridge starts the bridge session of a terminal whose assistant
// has an egress allow list: the egress proxy alone (refusals are logged;
// the shell's command gets the proxy's 403 with the reason).
func (p *Pipeline) terminalBridge(ctx context.Context, runtime string, app *assistant.App, a *assistant.Assistant, req TerminalRequest) (*bridge.Session, error) {
	log := p.log.With("user", req.UserID, "chat", req.ChatID, "terminal", true)
	eg, err := p.egressOptions(a, func(d *egress.Denial) {
		log.Info("egress denied", "host", d.Target.String(), "reason", d.Reason)
	})
	if err != nil {
		return nil, err
	}
	cfg := p.cfg.Bridge
	sess, err := bridge.Start(ctx, bridge.Options{Dir: cfg.Dir, Binary: cfg.Binary, UID: cfg.UID, GID: cfg.GID, ReadableBinary: readableBinary(app, a),
		UserID: req.UserID, ChatID: req.ChatID, Logger: log, Egress: eg, Gateway: cfg.Gateways[runtime]})
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "bridge not started: " + err.Error(), Err: err}
	}
	return sess, nil
}

// terminalAssistant picks the assistant whose sandbox the terminal gets:
// the request's, the chat's (stored, or of its running turn), or the
// app's only sandboxed one.
func (p *Pipeline) terminalAssistant(ctx context.Context, app *assistant.App, req TerminalRequest) (*assistant.Assistant, error) {
	id := req.AssistantID
	if cs, ok := p.chatStore(); ok {
		info, found, err := cs.Chat(ctx, req.UserID, req.ChatID)
		if err != nil {
			return nil, &chat.Error{Code: chat.ErrInternal, Message: "chat unavailable", Err: err}
		}
		switch owner := info.AssistantID; {
		case !found || owner == "":
		case id == "":
			id = owner
		case id != owner:
			// The chat's workspace is its assistant's: a terminal gets that
			// assistant's sandbox, not a looser one.
			return nil, chat.Errorf(chat.ErrChatAssistant,
				"chat %s belongs to assistant %q, and this terminal names %q: a terminal of the chat gets its assistant's sandbox", req.ChatID, owner, id)
		}
	}
	if id == "" {
		if ts := p.running(req.UserID, req.ChatID); len(ts) > 0 {
			id = ts[0].req.AssistantID
		}
	}
	if id == "" {
		var boxed []string
		for aid, a := range app.Assistants {
			if a.Sandbox != nil {
				boxed = append(boxed, aid)
			}
		}
		sort.Strings(boxed)
		if len(boxed) != 1 {
			return nil, badRequest("chat %q has no assistant yet, and the app has %d sandboxed assistants (%s): name the one whose sandbox the terminal gets",
				req.ChatID, len(boxed), strings.Join(boxed, ", "))
		}
		id = boxed[0]
	}
	a, err := findAssistant(app, id)
	if err != nil {
		return nil, err
	}
	if a.Sandbox == nil {
		return nil, badRequest("assistant %q runs without a sandbox: a terminal needs one", id)
	}
	return a, nil
}

// Done is closed once the terminal is closed (by its owner, by DeleteChat
// or by the pipeline's Close).
func (t *Terminal) Done() <-chan struct{} { return t.closed }

// Close ends the shell and everything it started, removes the sandbox
// (with its own timeout) and releases the workspace and the sandbox slot.
// It is idempotent.
func (t *Terminal) Close() error {
	t.closeOnce.Do(func() {
		t.p.mu.Lock()
		delete(t.p.terms, t)
		t.p.mu.Unlock()
		var errs []error
		if t.Terminal != nil {
			errs = append(errs, t.Terminal.Close())
		}
		errs = append(errs, t.cleanup())
		t.closeErr = errors.Join(errs...)
		t.p.log.Info("terminal closed", "user", t.user, "chat", t.chatID)
		close(t.closed)
	})
	return t.closeErr
}

// cleanup removes the sandbox, then runs the cleanups, newest first.
func (t *Terminal) cleanup() error {
	var err error
	if t.sb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
		err = t.sb.Remove(ctx)
		cancel()
		if err != nil {
			t.p.log.Error("sandbox not removed", "sandbox", t.sb.ID(), "user", t.user, "chat", t.chatID, "error", err)
		} else {
			t.p.untrack(t.live)
		}
	}
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
	return err
}

// hasTerminals reports whether the user's chat has a terminal open.
func (p *Pipeline) hasTerminals(user, chatID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.terms {
		if t.user == user && t.chatID == chatID {
			return true
		}
	}
	return false
}

// closeTerminals closes the terminals of a user's chat (every terminal
// when user is "") and returns how many there were.
func (p *Pipeline) closeTerminals(user, chatID string) int {
	p.mu.Lock()
	var ts []*Terminal
	for t := range p.terms {
		if user == "" || t.user == user && t.chatID == chatID {
			ts = append(ts, t)
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Add(1)
		go func() { defer wg.Done(); _ = t.Close() }()
	}
	wg.Wait()
	return len(ts)
}
