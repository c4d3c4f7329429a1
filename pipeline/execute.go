package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// execution is what the execute phase produced: the one result of both
// kinds of turn, an executor's run in the sandbox and a direct connector
// call. Each fills what its kind has; the rest stays zero.
type execution struct {
	// Started is when the execution began.
	Started time.Time
	// Content is the answer's text; Next may replace it.
	Content string
	// Thinking is a direct model's reasoning.
	Thinking string
	Usage    chat.Usage
	// FinishReason says why the answer ended (chat.FinishStop, ...; ""
	// when there was no answer).
	FinishReason string
	// ToolCalls are the client's functions a direct model called.
	ToolCalls []chat.ToolCall
	// Asked are the tool calls of a direct model's last answer, the
	// server's tools' too when the tool loop ran one round for a Next hook
	// (its completion.tool_calls).
	Asked []chat.ToolCall
	// Model is the model that answered a direct call, as the provider
	// names it.
	Model string
	// SessionID is the CLI's session, Notices the executor's notice
	// codes, Ran the tools the agent ran and Timings what the executor
	// measured.
	SessionID string
	Notices   []string
	Ran       []executor.ToolCall
	Timings   executor.Timings
	// Said are the messages its user sent into the turn (talk.go).
	Said []chat.Said
}

// execute is the phase that answers: the assistant's coding-agent CLI in
// the sandbox, or a direct connector call, whichever the turn has; agent
// is the assistant as the Create phase left it. Both kinds give the
// turn's answer, an execution, also when an error cut it short.
func (t *turn) execute(ctx context.Context, app *assistant.App, agent *assistant.Assistant, sb sandbox.Sandbox) error {
	start := time.Now()
	var x execution
	var err error
	if sb != nil && agent.Sandbox.Command != assistant.CommandYao {
		// (Yao's yao runner starts the sandbox for the hooks only: its
		// model answers directly.)
		x, err = t.execSandboxed(ctx, app, agent, sb, *t.conv, t.opts)
	} else {
		// With a Next hook, Yao runs one round of tools and lets the hook
		// answer (agent.go); so does mcp.options.tool_loop false.
		loop := !t.asst.ToolLoop.Disabled && (t.hooks == nil || !t.hooks.Has("Next"))
		x, err = t.execDirect(ctx, app, *t.conv, t.opts, t.tools, loop)
	}
	t.phase(phaseExecute, start)
	x.Started = start
	t.answer = x
	t.usage.Add(x.Usage)
	t.tm.exec, t.tm.tools = x.Timings, x.Ran
	return err
}

// resolve finds and resolves the turn's connector. A missing $ENV
// variable is a configuration error that names it (never the key).
func (t *turn) resolve(app *assistant.App) (assistant.Resolved, error) {
	c, ok := app.Connectors[t.connID]
	if !ok {
		return assistant.Resolved{}, chat.Errorf(chat.ErrInternal, "assistant %q uses connector %q, which does not exist", t.asst.ID, t.connID)
	}
	r, err := c.Resolve()
	if err != nil {
		// The error names the connector and its file.
		msg := err.Error()
		if errors.Is(err, assistant.ErrEnvNotSet) {
			msg += " (set it in agentbox's environment, or point the assistant's connector at a scripted one to try it offline)"
		}
		return assistant.Resolved{}, &chat.Error{Code: chat.ErrAuth, Message: msg, Err: err}
	}
	t.scripted = r.Type == connector.TypeScripted
	return r, nil
}

// execDirect answers with a direct, streaming connector call; with the
// turn's server tools (tb), the model's tool calls run here in the tool
// loop (toolloop.go; loop false: one round, for a Next hook).
func (t *turn) execDirect(ctx context.Context, app *assistant.App, conv conversation, options chat.Options, tb *toolbox, loop bool) (execution, error) {
	r, err := t.resolve(app)
	if err != nil {
		return execution{}, err
	}
	model := cmp.Or(options.Model, r.Model)
	t.model = model
	caps := t.capabilities(app, r, model)
	if err := t.checkVision(conv.input, model, caps); err != nil {
		return execution{}, err
	}
	if !caps.HasVision() {
		// Images of earlier turns, for a model that takes none (Create
		// chose another connector), become "[image]" where they were.
		conv.history = withoutImages(conv.history)
	}
	mo, err := t.modelOptions(r.Type, caps, options.ModelOptions)
	if err != nil {
		return execution{}, err
	}
	cl, err := connector.New(connector.Config{Type: r.Type, Host: r.Host, Key: r.Key, Model: model, Extra: r.Extra, Script: r.Script,
		AuthMode: r.AuthMode, APIVersion: r.APIVersion, Params: r.Params, Capabilities: &caps, Breaker: t.p.breakers.Get(t.connID)})
	if err != nil {
		return execution{}, &chat.Error{Code: chat.ErrInternal, Message: "connector " + t.connID + ": " + err.Error(), Err: err}
	}
	// The prompts go as the messages they are, names and all, before the
	// conversation, as Yao sends them.
	req := &connector.Request{Model: model, Messages: conv.all(), Options: mo}
	if !tb.empty() && !caps.ToolCalls {
		// Yao's ToolCallAdapter takes the tools out of the request of a
		// model without tool calls (its examples stay in the prompts).
		t.p.log.Warn("MCP tools not offered: the model takes no tool calls (declare options.capabilities.tool_calls in the connector)",
			"assistant", t.asst.ID, "connector", t.connID, "model", model)
	}
	var res *directAnswer
	if !tb.empty() && caps.ToolCalls {
		// Yao adds the MCP tools after the options' own (build.go).
		tools, terr := appendTools(req.Options.Tools, tb.spec())
		if terr != nil {
			return execution{}, badRequest("options.tools: %v", terr)
		}
		req.Options.Tools, req.ServerTools = tools, tb.names()
		res, err = t.toolLoop(ctx, cl, req, conv, tb, loop, cmp.Or(t.asst.ToolLoop.MaxTurns, assistant.DefaultMaxToolTurns))
	} else {
		var resp *connector.Response
		if resp, err = cl.Stream(ctx, req, t.sawAnswer(t.emit)); resp != nil {
			res = &directAnswer{Response: resp, asked: resp.ToolCalls}
		}
	}
	if res == nil {
		return execution{}, err
	}
	return execution{Content: res.Content, Thinking: res.Thinking, Usage: res.Usage, FinishReason: chat.FinishReason(res.FinishReason),
		ToolCalls: res.ToolCalls, Asked: res.asked, Model: res.Model, Ran: res.tools}, err
}

// capabilities are what the turn's model can take: the connector's, or
// those of the model a request chose instead.
func (t *turn) capabilities(app *assistant.App, r assistant.Resolved, model string) connector.Capabilities {
	if c, ok := app.Connectors[t.connID]; ok && model != r.Model {
		return c.ModelCapabilities(model)
	}
	return r.Capabilities
}

// modelOptions are the turn's model options as the connector gets them,
// in Yao's order of precedence (package.yao's, then the request's, then
// the Create hook's): the assistant's own and its hook's as Yao's
// provider sends them to this model (connector.YaoOptions: what the
// model cannot take goes, a fixed temperature is 1), the request's as the
// client sent them, refused when the model would not get them as asked
// (connector.CheckOptions). merged is what the hooks saw, which the
// layers make again.
func (t *turn) modelOptions(typ string, caps connector.Capabilities, merged chat.ModelOptions) (chat.ModelOptions, error) {
	if err := connector.CheckOptions(typ, caps, t.req.Options); err != nil {
		return chat.ModelOptions{}, fieldError(err)
	}
	own, adj := connector.YaoOptions(typ, caps, t.asst.Options)
	hook, hadj := connector.YaoOptions(typ, caps, t.hookOptions)
	if adj = append(adj, hadj...); len(adj) > 0 {
		t.p.log.Debug("model options adjusted as Yao's provider sends them", "assistant", t.asst.ID, "connector", t.connID, "adjusted", adj)
	}
	out := own.Merge(t.req.Options).Merge(hook)
	out.Model = merged.Model
	return out, nil
}

// execSandboxed runs the assistant's coding-agent CLI in the sandbox.
func (t *turn) execSandboxed(ctx context.Context, app *assistant.App, a *assistant.Assistant, sb sandbox.Sandbox, conv conversation, options chat.Options) (execution, error) {
	ex, ok := t.p.executors[a.Sandbox.Command]
	if !ok {
		return execution{}, chat.Errorf(chat.ErrExecutor, "no executor for sandbox command %q", a.Sandbox.Command)
	}
	args := options.SandboxArguments(a.Sandbox.Arguments)
	// A model the request (or the assistant's options) chose, when the
	// assistant allows it, runs the CLI; the model proxy holds it there.
	args.Model = cmp.Or(options.Model, args.Model)
	timeout := a.Sandbox.Timeout
	if tr := t.trial; tr != nil {
		if args.MaxTurns <= 0 || args.MaxTurns > tr.maxTurns {
			args.MaxTurns = tr.maxTurns
		}
		timeout = tr.timeout
	}
	// Every executor's events pass the failure patterns' watch.
	watch := executor.NewWatch(t.emit, a)
	// Every CLI gets the input's images as files its prompt names; one
	// that takes images inline gets them too when its model does.
	input, images, err := attachImages(ctx, sb.Workspace(), t.req.ChatID, conv.input)
	if err != nil {
		return execution{}, err
	}
	req := &executor.Request{
		Assistant: t.turnAssistant(ctx, a),
		UserID:    t.req.UserID,
		ChatID:    t.req.ChatID,
		System:    withDesktopHint(conv.systemPrompt(), a),
		History:   slices.Concat(conv.examples(), withoutImages(conv.history)),
		Input:     input,
		Images:    images,
		Arguments: args,
		Sandbox:   sb,
		Timeout:   timeout,
		Emit:      watch.Emit,
		Talk:      &t.talk,
	}
	req.ForkedFrom = t.p.forkedFrom(ctx, t.req.UserID, t.req.ChatID)
	if !t.asst.Approval.Empty() && !asks(a) {
		// A CLI that asks through its own protocol (Claude Code asks the
		// bridge's prompt tool): the executor answers it with the policy.
		req.Approve = func(tool string, input json.RawMessage, id string) (bool, string) {
			v := t.approve(ctx, tool, input, id)
			return v.Allow, v.Reason
		}
		// The calls it must ask about even where it would not: those the
		// deny and ask rules name.
		for _, r := range slices.Concat(t.asst.Approval.Deny, t.asst.Approval.Ask) {
			req.PermissionAsk = append(req.PermissionAsk, r.Text)
		}
	}
	if t.bridge != nil {
		if err := t.wireBridge(app, req, options.TokenLimit()); err != nil {
			return execution{}, err
		}
	} else if run := withoutProcessServers(req.Assistant); run != req.Assistant {
		// No CLI runs a process server: its tools are the bridge's.
		chat.Notice(t.emit, t.nextID("notice"), NoticeToolsUnavailable,
			"the tools of the assistant's process MCP servers reach a sandboxed agent through the bridge, which this server does not run: this turn runs without them")
		req.Assistant = run
	}
	if req.Connector.Host == "" && req.Connector.Key == "" {
		conn, err := t.connection(app)
		if err != nil {
			return execution{}, err
		}
		conn.Model = cmp.Or(args.Model, conn.Model)
		req.Connector = conn
	}
	t.model = req.Connector.Model
	if c, ok := app.Connectors[t.connID]; ok {
		req.Vision = c.ModelCapabilities(req.Connector.Model).HasVision()
	}
	if t.kept != nil {
		req.KeepAlive, req.Warm = true, t.kept.cli
	}
	if t.trial == nil {
		t.p.pool.learn(t.asst, ex, req)
	}
	primed := t.primed
	if primed != nil && req.Warm == nil {
		req.Warm = primed
	}
	t.primed = nil
	res, err := ex.Run(ctx, req)
	if primed != nil {
		if res == nil || res.Warm != primed {
			// Not kept: stopped, if the executor did not already.
			primed.Close()
		}
		if res != nil && res.Timings.Started.IsZero() && t.tm.sandbox == chat.SandboxPooled {
			t.tm.sandbox = chat.SandboxPrimed
		}
	}
	if t.kept != nil {
		t.kept.cli = nil
		if res != nil {
			t.kept.cli = res.Warm
			if t.tm.sandbox == chat.SandboxWarm && !res.Timings.Started.IsZero() {
				t.tm.sandbox = chat.SandboxRestart
			}
		}
	}
	if err != nil && t.bridge != nil {
		// The CLI failed because the model proxy refused its calls: the
		// connector's breaker is open. That is what the client must hear.
		if ce := t.bridge.CircuitOpen(); ce != nil {
			err = ce
		}
	}
	if res == nil {
		return execution{}, err
	}
	var metered chat.Usage
	if t.bridge != nil && t.proxied(a) {
		metered = subUsage(t.bridge.Usage(), t.usageBase)
	}
	return execution{Content: res.Content, Usage: withMetered(res.Usage, metered), FinishReason: chat.FinishStop,
		SessionID: res.SessionID, Notices: append(res.Notices, watch.Notices()...), Ran: res.ToolCalls, Timings: res.Timings, Said: res.Said}, err
}

// withMetered is a sandboxed turn's usage: the tokens the bridge's model
// proxy metered from the provider's answers, which the sandbox cannot
// under-report, with the CLI's own report kept beside them (its cost is
// the only one: the proxy knows no prices); the CLI's alone when the
// proxy metered none (Cursor, which talks to its own service).
func withMetered(cli, metered chat.Usage) chat.Usage {
	u := cli
	u.TokensFrom, u.ModelCalls = chat.MeteredByCLI, metered.ModelCalls
	if cli.CostUSD > 0 {
		u.CostFrom = chat.MeteredByCLI
	}
	if metered.InputTokens+metered.OutputTokens == 0 {
		return u
	}
	u.CLI = &chat.Usage{InputTokens: cli.InputTokens, OutputTokens: cli.OutputTokens,
		CacheReadTokens: cli.CacheReadTokens, CacheCreationTokens: cli.CacheCreationTokens, CostUSD: cli.CostUSD}
	u.InputTokens, u.OutputTokens = metered.InputTokens, metered.OutputTokens
	u.CacheReadTokens, u.CacheCreationTokens = metered.CacheReadTokens, metered.CacheCreationTokens
	u.TokensFrom = chat.MeteredByProxy
	return u
}

// withDesktopHint adds what the agent is told of its sandbox's desktop
// (desktop.AgentHint) to the system prompt of an assistant with one.
func withDesktopHint(system string, a *assistant.Assistant) string {
	if a.Sandbox.Desktop == nil {
		return system
	}
	if system == "" {
		return desktop.AgentHint
	}
	return system + "\n\n" + desktop.AgentHint
}
