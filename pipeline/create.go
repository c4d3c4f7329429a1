package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
)

// create is the phase of the Create hook, when the assistant has one: it
// may replace the conversation and change the options (metadata, locale,
// connector, MCP servers, prompt preset), or delegate the turn to another
// assistant, whose answer is the turn's (t.delegated; create returns nil).
// Then the turn's prompts go in front of the conversation and its
// connector and MCP servers are settled, and a direct assistant's MCP
// tools started (t.tools). It returns the assistant the executor runs:
// the turn's, or a copy with the MCP servers Create chose.
func (t *turn) create(ctx context.Context, app *assistant.App) (*assistant.Assistant, error) {
	a := t.asst
	if t.hooks != nil && t.hooks.Has("Create") {
		if err := t.createHook(ctx, app); err != nil || t.delegated {
			return nil, err
		}
	}
	if c := t.opts.Connector; c != t.connID {
		if _, ok := app.Connectors[c]; !ok {
			return nil, chat.Errorf(chat.ErrHook, "Create hook chose unknown connector %q", c)
		}
		t.connID = c
	}
	run, err := t.withMCPServers(app, a, t.opts.MCPServers)
	if err != nil {
		return nil, err
	}
	t.mcpRun.Store(run)
	prompts := t.prompts(app, a, t.opts)
	if a.Sandbox == nil {
		// A direct assistant's MCP tools run here (tools.go); a sandboxed
		// one's agent reaches them itself, process tools through the
		// bridge.
		t.tools = t.directTools(ctx, app, run, t.hc)
		if !t.tools.empty() && len(t.req.Options.Tools) > 0 {
			return nil, badRequest("options.tools: assistant %q runs its own tools on the server (its MCP servers): a request cannot add function tools to them", a.ID)
		}
		if t.tools.samples != "" {
			// Yao's examples of the MCP tools follow the prompts (build.go).
			prompts = append(prompts, chat.Message{Role: chat.RoleSystem, Content: t.tools.samples})
		}
	}
	*t.conv = t.conv.withPrompts(prompts)
	return run, nil
}

// createHook runs the Create hook and merges what it returned into the
// turn: its messages replace the conversation (the stored history stays
// as the request made it), its options are merged over the turn's, its
// metadata into the request's (as in Yao), its locale is the hooks'.
func (t *turn) createHook(ctx context.Context, app *assistant.App) error {
	start := time.Now()
	res, err := t.hooks.Create(ctx, t.hc, t.conv.all(), t.opts)
	t.phase(phaseHookCreate, start)
	if err != nil {
		t.p.log.Info("Create hook failed", "assistant", t.asst.ID, "user", t.req.UserID, "chat", t.req.ChatID, "error", err, "stack", jsapi.Stack(err))
		return jsapi.ChatError(err)
	}
	if res == nil {
		return nil
	}
	if res.Messages != nil {
		// The hook's images are taken as a client's: checked, fetched.
		if err := resolveImages(ctx, app, res.Messages, "Create hook returned messages", chat.ErrHook); err != nil {
			return err
		}
		// Yao sends the messages as they are, whatever comes last.
		replace, added := t.conv.replace, t.conv.added
		*t.conv = split(res.Messages)
		t.conv.replace, t.conv.added = replace, added
		if len(t.conv.input) == 0 && t.asst.Sandbox != nil {
			return &chat.Error{Code: chat.ErrHook, Message: "Create hook returned messages without a trailing user message: a sandboxed assistant's agent needs one to act on"}
		}
	}
	if o := res.Options; o != nil {
		if o.Sandbox != nil && t.asst.Sandbox == nil {
			return chat.Errorf(chat.ErrHook, "Create hook options: sandbox: this assistant has no sandbox")
		}
		meta := o.Metadata
		t.opts = t.opts.Merge(*o)
		t.hookOptions = t.hookOptions.Merge(o.ModelOptions)
		// Yao merges the hook's metadata into the request's.
		for k, v := range meta {
			if t.meta == nil {
				t.meta = map[string]any{}
			}
			t.meta[k] = v
		}
		t.opts.Metadata = t.meta
		if o.Locale != "" {
			t.hc.Locale = o.Locale
		}
	}
	if len(res.Ignored) > 0 {
		t.p.log.Warn("Create hook returned Yao-only fields; ignored", "assistant", t.asst.ID, "fields", res.Ignored)
	}
	if len(res.Unknown) > 0 {
		t.p.log.Warn("Create hook returned fields neither Yao nor agentbox knows; ignored, as Yao ignores them", "assistant", t.asst.ID, "file", t.hooks.File(), "fields", res.Unknown)
	}
	if res.Delegate != nil {
		// Yao: the other assistant answers instead.
		return t.delegate(ctx, res.Delegate, *t.conv)
	}
	return nil
}

// withMCPServers returns the assistant the executor runs: a itself, or a
// copy whose MCP servers are the ones a Create hook chose (mcp_servers),
// with $ENV references in server urls, commands and arguments resolved.
func (t *turn) withMCPServers(app *assistant.App, a *assistant.Assistant, chosen []chat.MCPServerOption) (*assistant.Assistant, error) {
	refs := a.MCP
	defs := a.MCPServers
	if chosen != nil {
		refs, defs = nil, map[string]*assistant.MCPServer{}
		for _, o := range chosen {
			def, ok := app.MCPServer(a, o.ServerID)
			if !ok {
				return nil, chat.Errorf(chat.ErrHook, "Create hook chose MCP server %q, which is not defined", o.ServerID)
			}
			refs = append(refs, assistant.MCPRef{ServerID: o.ServerID, Tools: o.Tools, Resources: o.Resources})
			defs[o.ServerID] = def
		}
	}
	changed := chosen != nil
	resolved := make(map[string]*assistant.MCPServer, len(defs))
	for id, def := range defs {
		r, err := resolveMCPServer(def)
		if err != nil {
			return nil, chat.Errorf(chat.ErrInternal, "mcp server %s (%s): %v", id, def.File, err)
		}
		changed = changed || r != def
		resolved[id] = r
	}
	if !changed {
		return a, nil
	}
	cp := *a
	cp.MCP, cp.MCPServers = refs, resolved
	return &cp, nil
}

// resolveMCPServer returns def, or a copy with the $ENV references of its
// url, command and arguments resolved (env and headers are credentials:
// mcpForSandbox keeps them out of the sandbox).
func resolveMCPServer(def *assistant.MCPServer) (*assistant.MCPServer, error) {
	has := strings.HasPrefix(def.URL, assistant.EnvPrefix) || strings.HasPrefix(def.Command, assistant.EnvPrefix)
	for _, a := range def.Args {
		has = has || strings.HasPrefix(a, assistant.EnvPrefix)
	}
	if !has {
		return def, nil
	}
	cp := *def
	var err error
	if cp.URL, err = assistant.ResolveValue(def.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if cp.Command, err = assistant.ResolveValue(def.Command); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	cp.Args = make([]string, len(def.Args))
	for i, a := range def.Args {
		if cp.Args[i], err = assistant.ResolveValue(a); err != nil {
			return nil, fmt.Errorf("arguments[%d]: %w", i, err)
		}
	}
	return &cp, nil
}
