package pipeline

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// A pooled sandbox of an assistant whose executor can start its CLI ahead
// of a chat (executor.Primer: Codex, the Gemini CLI, opencode) waits with
// that CLI started, so that the new chat that claims it does not wait for
// the CLI's start either. What the CLI is started with is the request of
// the assistant's last turn, without its chat (learn): its system prompt,
// MCP servers, arguments, skills and connection, with a model token of
// the pooled sandbox's own. The chat that claims the sandbox makes its
// bridge session take that token (bridge.Session.UseToken) and hands the
// CLI to its executor as the turn's Warm CLI; the executor prepares the
// turn as any other and sends its first message to the primed CLI only
// when it arrives at the command line, environment and configuration the
// CLI was started with (else it starts a new one: a Create hook that
// changed the system prompt, a chat that resumes a session). Until an
// assistant's first turn, and for one whose turns ask under an approval
// policy, its pooled sandboxes wait without their CLI.

// primeTimeout bounds the preparation and start of a primed CLI.
const primeTimeout = 2 * time.Minute

// primedCLI is a CLI started in a pooled sandbox ahead of its chat.
type primedCLI struct {
	cli executor.Warm
	// token is the model token in its environment; env the sandbox
	// environment it was started in.
	token string
	env   map[string]string
}

// close stops the primed CLI (nil: nothing to stop).
func (pc *primedCLI) close() {
	if pc != nil {
		pc.cli.Close()
	}
}

// learn keeps what a turn of a pooled assistant a started its CLI with,
// without the chat, for its pooled sandboxes to prime: a turn through the
// bridge whose executor primes, and whose tools ask no one.
func (w *warmPool) learn(a *assistant.Assistant, ex executor.Executor, req *executor.Request) {
	if a.Sandbox == nil || a.Sandbox.Pool == 0 || req.Approve != nil {
		return
	}
	if _, ok := ex.(executor.Primer); !ok {
		return
	}
	tpl := *req
	tpl.UserID, tpl.ChatID, tpl.ForkedFrom = "", "", nil
	tpl.History, tpl.Input, tpl.Images = nil, nil, nil
	tpl.Sandbox, tpl.Emit, tpl.Talk, tpl.Warm, tpl.KeepAlive = nil, nil, nil, nil, false
	tpl.Connector.Key = ""
	w.mu.Lock()
	first := w.learned[a] == nil
	if w.p.App().Assistants[a.ID] == a {
		w.learned[a] = &tpl
	}
	w.mu.Unlock()
	if first {
		// The sandboxes already pooled get their CLI too.
		w.poke()
	}
}

// prime starts ps's assistant's CLI in it as the assistant's last turn
// started it (learn). ps waits without it when there is nothing to start
// it with yet, the executor or the runtime cannot, or the start failed.
func (w *warmPool) prime(ps *pooledSandbox) {
	a := ps.assistant
	w.mu.Lock()
	tpl := w.learned[a]
	w.mu.Unlock()
	primer, ok := w.p.executors[a.Sandbox.Command].(executor.Primer)
	un, ok2 := ps.sb.(sandbox.Unclaimed)
	if tpl == nil || !ok || !ok2 {
		return
	}
	ps.tried = true
	// The chat's sandbox environment, as its claim sets it: a bridge
	// over Unix sockets adds nothing to it.
	env, err := sandboxEnv(a)
	if err != nil {
		return
	}
	usb, err := un.Unclaimed(env)
	if err != nil {
		w.p.log.Warn("pooled sandbox's CLI not started", "assistant", a.ID, "sandbox", ps.sb.ID(), "error", err)
		return
	}
	req := *tpl
	req.Sandbox, req.Connector.Key, req.Emit = usb, bridge.NewToken(), func(chat.Event) {}
	ctx, cancel := context.WithTimeout(w.ctx, primeTimeout)
	defer cancel()
	cli, err := primer.Prime(ctx, &req)
	if err != nil {
		if !errors.Is(err, executor.ErrNotPrimed) && w.ctx.Err() == nil {
			w.p.log.Warn("pooled sandbox's CLI not started", "assistant", a.ID, "sandbox", ps.sb.ID(), "error", err)
		}
		return
	}
	ps.primed = &primedCLI{cli: cli, token: req.Connector.Key, env: env}
}

// primeReady starts the CLI of one ready pooled sandbox that waits
// without it, once its assistant's turns taught the pool how (learn),
// and reports whether there was one. The sandbox is out of the pool
// while its CLI starts.
func (w *warmPool) primeReady(app *assistant.App) bool {
	w.mu.Lock()
	var ps *pooledSandbox
	if w.fullLocked(app) {
		w.mu.Unlock()
		return false
	}
	for _, id := range slices.Sorted(maps.Keys(w.ready)) {
		list := w.ready[id]
		i := slices.IndexFunc(list, func(c *pooledSandbox) bool {
			return !c.tried && w.learned[c.assistant] != nil && app.Assistants[id] == c.assistant
		})
		if i >= 0 && w.making == nil {
			ps = list[i]
			w.ready[id] = slices.Delete(list, i, i+1)
			w.memory -= ps.memory
			w.making = ps.assistant
			break
		}
	}
	w.mu.Unlock()
	if ps == nil {
		return false
	}
	w.prime(ps)
	w.measure(ps)
	w.done(ps)
	return true
}

// adopt makes the CLI primed in the turn's claimed sandbox the turn's
// (t.primed), with its token the bridge session's, when the chat's
// sandbox environment is the one it was started in; else it stops it.
func (t *turn) adopt(pc *primedCLI, spec sandbox.Spec) {
	if pc == nil {
		return
	}
	if t.bridge == nil || !maps.Equal(pc.env, spec.Env) || t.bridge.UseToken(pc.token) != nil {
		go pc.close()
		return
	}
	t.primed = pc.cli
	// A turn that ends before its executor takes the CLI stops it.
	t.defer_(func() {
		if t.primed != nil {
			t.primed.Close()
		}
	})
}
