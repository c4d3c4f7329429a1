package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
)

// MCPServers reaches the request's assistant's MCP servers for hooks
// (ctx.mcp). The pipeline implements it: only the assistant's own servers
// (those of its turn, after its Create hook) are reached, each tool
// within the server's allow list, bounded by ctx. Results are MCP's
// result objects as JSON values (tools, resources, prompts: MCP's field
// names, as Yao returns them).
type MCPServers interface {
	ListTools(ctx context.Context, server string) (any, error)
	// CallTool returns the result's content parts and whether the server
	// marked it an error.
	CallTool(ctx context.Context, server, tool string, args map[string]any) (content []json.RawMessage, isError bool, err error)
	ListResources(ctx context.Context, server string) (any, error)
	ReadResource(ctx context.Context, server, uri string) (any, error)
	ListPrompts(ctx context.Context, server string) (any, error)
	GetPrompt(ctx context.Context, server, name string, args map[string]string) (any, error)
}

var (
	mcpMembers     = []string{"ListTools", "CallTool", "CallTools", "CallToolsParallel", "All", "Any", "Race", "ListResources", "ReadResource", "ListPrompts", "GetPrompt"}
	mcpRequestKeys = []string{"mcp", "tool", "arguments"}
	mcpToolKeys    = []string{"name", "arguments"}
)

// mcpObject builds ctx.mcp (Yao's agent/context/jsapi_mcp.go): the
// single calls throw on failure, as Yao's do; All, Any and Race give
// results with error set.
func (c *call) mcpObject() *goja.Object {
	return c.newLazy(mcpMembers, func(key string) goja.Value {
		fn := "mcp." + key
		return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
			api := c.hc.MCP
			if api == nil {
				c.throw(errors.New(fn+": the assistant's MCP servers are not available here"), CodeMCP)
			}
			switch key {
			case "All", "Any", "Race":
				return c.runMCPBatch(fn, key, fc.Argument(0))
			}
			server := c.stringArg(fn, "the MCP server id", fc.Argument(0))
			var v any
			var err error
			switch key {
			case "ListTools":
				v, err = api.ListTools(c.ctx, server)
			case "ListResources":
				v, err = api.ListResources(c.ctx, server)
			case "ListPrompts":
				v, err = api.ListPrompts(c.ctx, server)
			case "ReadResource":
				v, err = api.ReadResource(c.ctx, server, c.stringArg(fn, "the resource's uri", fc.Argument(1)))
			case "GetPrompt":
				name := c.stringArg(fn, "the prompt's name", fc.Argument(1))
				args := map[string]string{}
				for k, a := range c.objectArg(fn, "arguments", fc.Argument(2)) {
					args[k] = fmt.Sprint(a)
				}
				v, err = api.GetPrompt(c.ctx, server, name, args)
			case "CallTool":
				tool := c.stringArg(fn, "the tool's name", fc.Argument(1))
				v, err = mcpResult(c.ctx, api, server, tool, c.objectArg(fn, "arguments", fc.Argument(2)))
			case "CallTools", "CallToolsParallel":
				return c.runMCPTools(fn, key == "CallToolsParallel", server, fc.Argument(1))
			}
			if err != nil {
				c.throw(fmt.Errorf("%s: %w", fn, err), CodeMCP)
			}
			return c.toJS(v)
		}))
	})
}

// mcpResult calls a tool and returns its result as Yao's ctx.mcp does:
// each text part parsed as JSON when it is JSON, one part alone, several
// as a list. A result the server marked an error is an error.
func mcpResult(ctx context.Context, api MCPServers, server, tool string, args map[string]any) (any, error) {
	content, isError, err := api.CallTool(ctx, server, tool, args)
	if err != nil {
		return nil, err
	}
	var parts []any
	var texts []string
	for _, raw := range content {
		var p struct {
			Type, Text, Data, MimeType string
			Resource                   any
		}
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
			var parsed any
			if json.Unmarshal([]byte(p.Text), &parsed) == nil {
				parts = append(parts, parsed)
			} else {
				parts = append(parts, p.Text)
			}
		case "image":
			parts = append(parts, map[string]any{"type": "image", "data": p.Data, "mimeType": p.MimeType})
		case "resource":
			parts = append(parts, p.Resource)
		default:
			parts = append(parts, map[string]any{"type": p.Type, "text": p.Text})
		}
	}
	if isError {
		return nil, fmt.Errorf("tool %s of %s failed: %s", tool, server, strings.Join(texts, "; "))
	}
	switch len(parts) {
	case 0:
		return nil, nil
	case 1:
		return parts[0], nil
	}
	return parts, nil
}

// mcpReq is one tool call of a batch.
type mcpReq struct {
	server, tool string
	args         map[string]any
}

// runMCPTools is CallTools (one after another; the first failure throws)
// and CallToolsParallel (at once; a failure is {error}) of tools [{name,
// arguments?}] on one server.
func (c *call) runMCPTools(fn string, parallel bool, server string, v goja.Value) goja.Value {
	elems := c.requestArray(fn, v, "{name, arguments?}")
	reqs := make([]mcpReq, len(elems))
	for i, eo := range elems {
		at := fmt.Sprintf("%s: tools[%d]", fn, i)
		c.knownKeys(at, eo, mcpToolKeys)
		reqs[i] = mcpReq{server: server, tool: c.stringArg(at, "name", eo.Get("name")), args: c.objectArg(at, "arguments", eo.Get("arguments"))}
	}
	if !parallel {
		out := make([]any, len(reqs))
		for i, r := range reqs {
			res, err := mcpResult(c.ctx, c.hc.MCP, r.server, r.tool, r.args)
			if err != nil {
				c.throw(fmt.Errorf("%s: tools[%d]: %w", fn, i, err), CodeMCP)
			}
			out[i] = res
		}
		return c.toJS(out)
	}
	out := make([]any, len(reqs))
	for _, d := range c.runMCP(fn, fanAll, reqs) {
		r := d.res.(map[string]any)
		if e, failed := r["error"]; failed {
			out[d.idx] = map[string]any{"error": e}
		} else {
			out[d.idx] = r["result"]
		}
	}
	return c.toJS(out)
}

// runMCPBatch is Yao's ctx.mcp.All, Any and Race over requests [{mcp,
// tool, arguments?}]: results {mcp, tool, result, error}, in request
// order for All; Any's first success alone (or every failure), Race's
// first to end alone.
func (c *call) runMCPBatch(fn, key string, v goja.Value) goja.Value {
	elems := c.requestArray(fn, v, "{mcp, tool, arguments?}")
	reqs := make([]mcpReq, len(elems))
	for i, eo := range elems {
		at := fmt.Sprintf("%s: requests[%d]", fn, i)
		c.knownKeys(at, eo, mcpRequestKeys)
		reqs[i] = mcpReq{server: c.stringArg(at, "mcp", eo.Get("mcp")), tool: c.stringArg(at, "tool", eo.Get("tool")),
			args: c.objectArg(at, "arguments", eo.Get("arguments"))}
	}
	mode := map[string]string{"All": fanAll, "Any": fanAny, "Race": fanRace}[key]
	got := c.runMCP(fn, mode, reqs)
	if mode == fanAll {
		out := make([]any, len(reqs))
		for _, d := range got {
			out[d.idx] = d.res
		}
		return c.toJS(out)
	}
	if mode == fanAny && len(got) > 0 && !got[len(got)-1].failed {
		got = got[len(got)-1:]
	}
	out := make([]any, len(got))
	for i, d := range got {
		out[i] = d.res
	}
	return c.toJS(out)
}

// runMCP makes reqs' tool calls at once (see fan): each result is
// {mcp, tool, result} or {mcp, tool, error}.
func (c *call) runMCP(fn, mode string, reqs []mcpReq) []fanResult {
	api := c.hc.MCP
	return c.fan(fanOut{fn: fn, mode: mode, n: len(reqs), run: func(ctx context.Context, i int, _ chat.EmitFunc) (any, bool) {
		r := reqs[i]
		out := map[string]any{"mcp": r.server, "tool": r.tool}
		res, err := mcpResult(ctx, api, r.server, r.tool, r.args)
		if err != nil {
			out["error"] = err.Error()
			return out, true
		}
		out["result"] = res
		return out, false
	}})
}

// stringArg checks a non-empty string argument of fn.
func (c *call) stringArg(fn, what string, v goja.Value) string {
	s, ok := asString(v)
	if !ok || s == "" {
		c.throw(argErr("%s: want %s (a string), got %s", fn, what, typeName(v)), "")
	}
	return s
}

// objectArg checks an optional object argument of fn (nil when absent).
func (c *call) objectArg(fn, what string, v goja.Value) map[string]any {
	if isNullish(v) {
		return nil
	}
	x, err := c.exportJSON(v)
	m, ok := x.(map[string]any)
	if err != nil || !ok {
		c.throw(argErr("%s: %s: want an object, got %s", fn, what, typeName(v)), "")
	}
	return m
}
