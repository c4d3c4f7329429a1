package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/assistant"
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
	// the app's only sandboxed assistant.
	AssistantID string
	// Rows and Cols are the initial size (0: 24x80).
	Rows, Cols uint16
}

// Terminal is an interactive shell on a pseudo-terminal, in a sandbox of
// its own with the chat's workspace, made the way the chat's assistant
// gets its sandboxes (the same runtime, image, limits, hardening and
// network policy; no model proxy and no host tools). Close ends the shell
// and removes the sandbox. Read, Write, Resize and Wait are the
// sandbox.Terminal's.
type Terminal struct {
	sandbox.Terminal
	// AssistantID and Runtime say whose settings and which runtime the
	// sandbox has.
	AssistantID string
	Runtime     string

	p       *Pipeline
	user    string
	chatID  string
	sb      sandbox.Sandbox
	release func()

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// OpenTerminal starts a shell in a new sandbox of the chat. The caller
// must Close it. Errors are *chat.Error: an unknown or unsandboxed
// assistant is invalid_request, a sandbox that cannot start is sandbox.
func (p *Pipeline) OpenTerminal(ctx context.Context, req TerminalRequest) (*Terminal, error) {
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
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, &chat.Error{Code: chat.ErrInternal, Message: "server is shutting down", Err: ErrClosed}
	}
	ws, release, err := p.cfg.Workspaces.Acquire(ctx, req.UserID, req.ChatID)
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "workspace unavailable: " + err.Error(), Err: err}
	}
	spec := p.sandboxSpec(app, a, req.UserID, req.ChatID, ws, p.cfg.RuntimeMounts[name])
	spec.Labels["dev.agentbox.terminal"] = "true"
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		release()
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "sandbox not created: " + err.Error(), Err: err}
	}
	t := &Terminal{AssistantID: a.ID, Runtime: name, p: p, user: req.UserID, chatID: req.ChatID,
		sb: sb, release: release, closed: make(chan struct{})}
	ts, ok := sb.(sandbox.TerminalSandbox)
	if !ok {
		t.cleanup()
		return nil, chat.Errorf(chat.ErrSandbox, "the %s runtime runs no terminals", name)
	}
	term, err := ts.StartTerminal(ctx, sandbox.TerminalRequest{Argv: TerminalShell, Rows: req.Rows, Cols: req.Cols})
	if err != nil {
		t.cleanup()
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

// terminalAssistant picks the assistant whose sandbox the terminal gets:
// the request's, the chat's (stored, or of its running turn), or the
// app's only sandboxed one.
func (p *Pipeline) terminalAssistant(ctx context.Context, app *assistant.App, req TerminalRequest) (*assistant.Assistant, error) {
	id := req.AssistantID
	if id == "" {
		if cs, ok := p.chatStore(); ok {
			info, found, err := cs.Chat(ctx, req.UserID, req.ChatID)
			if err != nil {
				return nil, &chat.Error{Code: chat.ErrInternal, Message: "chat unavailable", Err: err}
			}
			if found {
				id = info.AssistantID
			}
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
	a, ok := app.Assistants[id]
	if !ok {
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Err: ErrUnknownAssistant,
			Message: fmt.Sprintf("unknown assistant %q (have: %s)", id, strings.Join(sortedKeys(app.Assistants), ", "))}
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
// and releases the workspace. It is idempotent; the sandbox is removed
// with its own timeout.
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
		t.p.log.Info("terminal closed", "user", t.user, "chat", t.chatID, "sandbox", t.sb.ID())
		close(t.closed)
	})
	return t.closeErr
}

func (t *Terminal) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	err := t.sb.Remove(ctx)
	if err != nil {
		t.p.log.Error("sandbox not removed", "sandbox", t.sb.ID(), "user", t.user, "chat", t.chatID, "error", err)
	}
	t.release()
	return err
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
