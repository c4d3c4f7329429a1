package agentcli

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// A primed CLI is one started in a warm pool's sandbox before any chat
// claimed it (executor.Primer), so that a new chat's first turn does not
// wait for the CLI's start. Only a CLI whose keeping mode opens its
// session with a message that names the session's folder can be primed
// (Profile.Primes): the Agent Client Protocol's session/new and Codex's
// thread/start carry the folder, /workspace, and the CLI resolves it when
// the message comes, once the chat's workspace is attached over the
// pooled sandbox's empty one. Its homes are in the workspace too, named
// by absolute paths: Prime writes the assistant's configuration into the
// pooled sandbox's own folder for the start, and the turn writes the same
// into the chat's workspace before the CLI opens its session there.
//
// Nothing of the chat is known to Prime: the request is the assistant's
// (its system prompt, MCP servers, arguments, skills, the connection with
// the pool's own token). The chat's first turn prepares its run as any
// turn does, and sends its first message to the primed CLI only when the
// command line, the environment and the keep key (keepKey) it arrives at
// are the ones the CLI was started with; otherwise (a Create hook changed
// the system prompt, the chat resumes a session, an approval policy asks)
// the primed CLI is closed and a new one started, as for a kept CLI that
// changed.

// primedStart is how a primed CLI was started.
type primedStart struct {
	argv []string
	env  map[string]string
}

var _ executor.Primer = (*Executor)(nil)

// Prime implements executor.Primer: it prepares req's run in req.Sandbox
// and starts its CLI in its keeping mode, without a message.
func (x *Executor) Prime(ctx context.Context, req *executor.Request) (executor.Warm, error) {
	if _, ok := x.cli.(Keeper); !ok || !x.prof.Primes {
		return nil, executor.ErrNotPrimed
	}
	switch {
	case req.Sandbox == nil || req.Sandbox.Workspace() == nil:
		return nil, errors.New(x.prof.Name + " prime: request has no sandbox")
	case req.Assistant == nil:
		return nil, errors.New(x.prof.Name + " prime: request has no assistant")
	case req.ChatID != "" || len(req.Input) > 0 || len(req.History) > 0:
		return nil, errors.New(x.prof.Name + " prime: the request is a chat's")
	}
	p := &Prepared{Request: req, State: x.prof.State(req.Assistant.ID), Model: cmp.Or(req.Arguments.Model, req.Connector.Model), Keep: true}
	plan, err := x.prepare(ctx, p)
	if err != nil {
		return nil, err
	}
	if !p.Keep || p.Resume != "" {
		return nil, executor.ErrNotPrimed
	}
	argv, env, secrets := x.command(req, plan)
	log := x.opts.Logger.With("assistant", req.Assistant.ID, "cli", x.prof.Name, "primed", true)
	run, xe := Start(ctx, Spec{
		CLI: x.prof.Program, ErrorID: x.prof.ErrorID, Emit: func(chat.Event) {},
		Sandbox: req.Sandbox,
		Exec:    sandbox.ExecRequest{Argv: argv, Env: env},
		Keep:    true, GracePeriod: x.opts.GracePeriod, IdleTimeout: max(x.opts.IdleTimeout, 0),
		Secrets: secrets, Logger: log, Lines: x.prof.Lines,
	})
	if xe != nil {
		return nil, xe
	}
	return &kept{Run: run, owner: x, key: keepKey(req), plan: plan, secrets: secrets,
		primed: &primedStart{argv: argv, env: env}}, nil
}

// misfit says why the primed CLI k cannot take req's first turn, prepared
// as p with argv and env ("" when it can).
func (k *kept) misfit(x *Executor, req *executor.Request, p *Prepared, argv []string, env map[string]string) string {
	switch {
	case k.owner != x:
		return "another executor's"
	case !k.Alive():
		return "it ended before the chat came (its stderr: " + Redact(k.stderr.String(), k.secrets) + ")"
	case !p.Keep:
		return "the turn does not run in the CLI's keeping mode"
	case p.Resume != "":
		return "the chat resumes a session"
	case k.key != keepKey(req):
		return "the turn's system prompt, MCP servers, arguments, connection or skills differ"
	case !slices.Equal(k.primed.argv, argv):
		return "its command line differs"
	case !maps.Equal(k.primed.env, env):
		return "its environment differs"
	}
	return ""
}

// first runs a chat's first turn on the primed CLI k: its message is the
// plan's first input (the protocol's opening requests), as a CLI started
// for the turn would have read it. ErrHung: it did not take the message,
// nothing was emitted.
func (x *Executor) first(ctx context.Context, req *executor.Request, k *kept, plan *Plan, secrets []string, log *slog.Logger) (*executor.Result, error) {
	k.primed, k.plan, k.secrets = nil, plan, secrets
	res, err := x.turnOn(ctx, req, k, plan.Input, "", log)
	if errors.Is(err, ErrHung) {
		return nil, err // the CLI started for the turn reads the run's files
	}
	if res == nil || res.Warm == nil {
		for _, f := range append(plan.Remove, plan.LogFile) {
			if f != "" {
				_ = req.Sandbox.Workspace().RemoveAll(context.WithoutCancel(ctx), f)
			}
		}
	}
	return res, err
}
