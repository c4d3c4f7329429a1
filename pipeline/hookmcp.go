package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/jsapi"
)

// A hook's ctx.mcp: the turn's own MCP servers (the assistant's, after
// its Create hook), reached the way the turn reaches them for its model
// or agent: a process server's tools run the app's scripts with the
// request's ctx, an http or sse server is reached with its headers, a
// direct assistant's stdio server runs on this host. A sandboxed
// assistant's stdio servers run inside its sandbox, for its agent: hooks
// do not start them on the host. Sessions a hook opens last until the
// turn ends.

var _ jsapi.MCPServers = (*turn)(nil)

// hookServer returns the definition of server if the turn uses it, and
// the assistant's reference to it (its allowed tools).
func (t *turn) hookServer(server string) (assistant.MCPRef, *assistant.MCPServer, error) {
	run := t.mcpRun.Load()
	if run == nil {
		run = t.asst
	}
	var ids []string
	for _, ref := range run.MCP {
		ids = append(ids, ref.ServerID)
		if ref.ServerID != server {
			continue
		}
		def := run.MCPServers[server]
		if def == nil {
			return ref, nil, fmt.Errorf("MCP server %q is not defined", server)
		}
		return ref, def, nil
	}
	if len(ids) == 0 {
		return assistant.MCPRef{}, nil, fmt.Errorf("MCP server %q is not one of assistant %s's: it has none (package.yao mcp.servers)", server, run.ID)
	}
	return assistant.MCPRef{}, nil, fmt.Errorf("MCP server %q is not one of assistant %s's (%s)", server, run.ID, strings.Join(ids, ", "))
}

// hookSession returns the turn's session with server (a stdio, http or
// sse one), connecting on first use.
func (t *turn) hookSession(ctx context.Context, server string, def *assistant.MCPServer) (*mcp.ClientSession, error) {
	if def.Transport == "stdio" && t.asst.Sandbox != nil {
		return nil, fmt.Errorf("MCP server %q runs inside the sandbox, for the agent: hooks reach process, http and sse servers", server)
	}
	t.mu.Lock()
	sess := t.hookMCP[server]
	t.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	// The session outlives the hook call that opens it: it ends with the
	// turn (closeHookMCP), its connection bounded here.
	cctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	type conn struct {
		sess *mcp.ClientSession
		err  error
	}
	ch := make(chan conn, 1)
	go func() {
		s, _, err := connectMCP(context.WithoutCancel(ctx), t.p.App(), def)
		ch <- conn{s, err}
	}()
	var c conn
	select {
	case c = <-ch:
	case <-cctx.Done():
		go func() {
			if c := <-ch; c.sess != nil {
				_ = c.sess.Close()
			}
		}()
		return nil, fmt.Errorf("MCP server %q: %w", server, cctx.Err())
	}
	if c.err != nil {
		return nil, fmt.Errorf("MCP server %q: %w", server, c.err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.hookMCP[server]; old != nil {
		_ = c.sess.Close()
		return old, nil
	}
	if t.hookMCP == nil {
		t.hookMCP = map[string]*mcp.ClientSession{}
	}
	t.hookMCP[server] = c.sess
	return c.sess, nil
}

// closeHookMCP ends the MCP sessions the turn's hooks opened.
func (t *turn) closeHookMCP() {
	t.mu.Lock()
	sessions := t.hookMCP
	t.hookMCP = nil
	t.mu.Unlock()
	for _, s := range sessions {
		_ = s.Close()
	}
}

// asJSON is v (an MCP result) as JSON values, the shape hooks get.
func asJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

// ListTools implements jsapi.MCPServers.
func (t *turn) ListTools(ctx context.Context, server string) (any, error) {
	ref, def, err := t.hookServer(server)
	if err != nil {
		return nil, err
	}
	tools := []map[string]any{}
	if def.Transport == "process" {
		for _, pt := range def.Process.Tools {
			if allowed(ref, pt.Name) {
				tools = append(tools, map[string]any{"name": pt.Name, "description": pt.Description, "inputSchema": pt.InputSchema})
			}
		}
		return asJSON(map[string]any{"tools": tools})
	}
	sess, err := t.hookSession(ctx, server, def)
	if err != nil {
		return nil, err
	}
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if allowed(ref, tool.Name) {
			tools = append(tools, map[string]any{"name": tool.Name, "description": tool.Description, "inputSchema": tool.InputSchema})
		}
	}
	return asJSON(map[string]any{"tools": tools})
}

// CallTool implements jsapi.MCPServers: the arguments are checked
// against the tool's schema, and the call bounded by the server's timeout,
// as the tool loop calls it.
func (t *turn) CallTool(ctx context.Context, server, tool string, args map[string]any) ([]json.RawMessage, bool, error) {
	ref, def, err := t.hookServer(server)
	if err != nil {
		return nil, false, err
	}
	if !allowed(ref, tool) {
		return nil, false, fmt.Errorf("tool %s of MCP server %q is not in the assistant's tools list for it (%s)", tool, server, strings.Join(ref.Tools, ", "))
	}
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(def.Timeout, bridge.DefaultToolTimeout))
	defer cancel()
	if def.Transport == "process" {
		pt, ok := def.Process.Tool(tool)
		if !ok {
			return nil, false, fmt.Errorf("MCP server %q has no tool %s", server, tool)
		}
		if r := resolveSchema(pt.InputSchema, t.p.log); r != nil {
			if err := r.Validate(args); err != nil {
				return nil, false, fmt.Errorf("tool %s: argument validation failed: %w", tool, err)
			}
		}
		st := processTools(assistant.MCPRef{ServerID: server, Tools: []string{tool}}, def, t.p.hooks.Scripts(t.p.App()), t.hc, t.p.log)
		return st[0].run(ctx, args)
	}
	sess, err := t.hookSession(ctx, server, def)
	if err != nil {
		return nil, false, err
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, false, err
	}
	content := make([]json.RawMessage, 0, len(res.Content))
	for _, c := range res.Content {
		if b, err := json.Marshal(c); err == nil {
			content = append(content, b)
		}
	}
	return content, res.IsError, nil
}

// ListResources implements jsapi.MCPServers.
func (t *turn) ListResources(ctx context.Context, server string) (any, error) {
	_, def, err := t.hookServer(server)
	if err != nil {
		return nil, err
	}
	if def.Transport == "process" {
		out := []map[string]any{}
		for _, r := range def.Process.Resources {
			m := map[string]any{"uri": r.URI, "name": r.Name, "description": r.Description, "mimeType": r.MimeType}
			if r.Meta != nil {
				m["meta"] = r.Meta
			}
			out = append(out, m)
		}
		return asJSON(map[string]any{"resources": out})
	}
	sess, err := t.hookSession(ctx, server, def)
	if err != nil {
		return nil, err
	}
	res, err := sess.ListResources(ctx, nil)
	if err != nil {
		return nil, err
	}
	return asJSON(res)
}

// uriParam matches a {param} of a resource template.
var uriParam = regexp.MustCompile(`\{([A-Za-z_][\w]*)\}`)

// ReadResource implements jsapi.MCPServers. A process server's resource
// runs its process with the arguments its x-process-args make of the URI
// (the URI alone without them), as gou's process client runs it; its
// result is the text (a string, or JSON).
func (t *turn) ReadResource(ctx context.Context, server, uri string) (any, error) {
	_, def, err := t.hookServer(server)
	if err != nil {
		return nil, err
	}
	if def.Transport != "process" {
		sess, err := t.hookSession(ctx, server, def)
		if err != nil {
			return nil, err
		}
		res, err := sess.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return nil, err
		}
		return asJSON(res)
	}
	for _, r := range def.Process.Resources {
		uriParams, query, ok := matchURI(r.URI, uri)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, cmp.Or(def.Timeout, bridge.DefaultToolTimeout))
		defer cancel()
		v, err := t.p.hooks.Scripts(t.p.App()).Run(ctx, t.hc, r.Process, resourceArgs(r.ProcessArgs, uri, uriParams, query))
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", uri, err)
		}
		text, isString := v.(string)
		if !isString {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("resource %s: the process's result is not JSON: %w", uri, err)
			}
			text = string(b)
		}
		return asJSON(map[string]any{"contents": []map[string]any{{"uri": uri, "mimeType": r.MimeType, "text": text}}})
	}
	return nil, fmt.Errorf("MCP server %q has no resource %s", server, uri)
}

// matchURI matches uri against a resource's URI, a template when it holds
// {param}s, and returns the template's parameters and the query's.
func matchURI(tmpl, uri string) (params map[string]any, query map[string]any, ok bool) {
	params, query = map[string]any{}, map[string]any{}
	base, q, _ := strings.Cut(uri, "?")
	if q != "" {
		for _, kv := range strings.Split(q, "&") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				query[k] = v
			}
		}
	}
	if tmpl == uri || tmpl == base {
		return params, query, true
	}
	names := uriParam.FindAllStringSubmatch(tmpl, -1)
	if len(names) == 0 {
		return nil, nil, false
	}
	var re strings.Builder
	re.WriteString("^")
	last := 0
	for _, loc := range uriParam.FindAllStringIndex(tmpl, -1) {
		re.WriteString(regexp.QuoteMeta(tmpl[last:loc[0]]) + `([^/?]+)`)
		last = loc[1]
	}
	re.WriteString(regexp.QuoteMeta(tmpl[last:]) + "$")
	m := regexp.MustCompile(re.String()).FindStringSubmatch(base)
	if m == nil {
		return nil, nil, false
	}
	for i, n := range names {
		params[n[1]] = m[i+1]
	}
	return params, query, true
}

// resourceArgs are a resource process's arguments, as gou's process
// client makes them (mcp/process/args.go extractResourceArgs).
func resourceArgs(spec []string, uri string, uriParams, query map[string]any) []any {
	if len(spec) == 0 {
		return []any{uri}
	}
	out := make([]any, 0, len(spec))
	for _, a := range spec {
		switch {
		case a == ":uri":
			out = append(out, uri)
		case a == ":arguments" || a == ":parameters":
			out = append(out, query)
		case strings.HasPrefix(a, "$uri."):
			out = append(out, uriParams[strings.TrimPrefix(a, "$uri.")])
		case strings.HasPrefix(a, "$"):
			k := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(a, "$"), "args."), "params.")
			out = append(out, query[k])
		default:
			out = append(out, a)
		}
	}
	return out
}

// ListPrompts implements jsapi.MCPServers.
func (t *turn) ListPrompts(ctx context.Context, server string) (any, error) {
	_, def, err := t.hookServer(server)
	if err != nil {
		return nil, err
	}
	if def.Transport == "process" {
		out := []map[string]any{}
		for _, p := range def.Process.Prompts {
			out = append(out, map[string]any{"name": p.Name, "description": p.Description, "arguments": p.Arguments})
		}
		return asJSON(map[string]any{"prompts": out})
	}
	sess, err := t.hookSession(ctx, server, def)
	if err != nil {
		return nil, err
	}
	res, err := sess.ListPrompts(ctx, nil)
	if err != nil {
		return nil, err
	}
	return asJSON(res)
}

// GetPrompt implements jsapi.MCPServers: a process server's prompt is its
// template with each {{argument}} replaced; a required argument missing
// is an error.
func (t *turn) GetPrompt(ctx context.Context, server, name string, args map[string]string) (any, error) {
	_, def, err := t.hookServer(server)
	if err != nil {
		return nil, err
	}
	if def.Transport != "process" {
		sess, err := t.hookSession(ctx, server, def)
		if err != nil {
			return nil, err
		}
		res, err := sess.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			return nil, err
		}
		return asJSON(res)
	}
	i := slices.IndexFunc(def.Process.Prompts, func(p assistant.ProcessPrompt) bool { return p.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("MCP server %q has no prompt %s", server, name)
	}
	p := def.Process.Prompts[i]
	text := p.Template
	for _, a := range p.Arguments {
		v, ok := args[a.Name]
		if !ok && a.Required {
			return nil, fmt.Errorf("prompt %s: argument %s is required", name, a.Name)
		}
		text = strings.ReplaceAll(text, "{{"+a.Name+"}}", v)
	}
	return asJSON(map[string]any{"description": p.Description,
		"messages": []map[string]any{{"role": "user", "content": map[string]any{"type": "text", "text": text}}}})
}
