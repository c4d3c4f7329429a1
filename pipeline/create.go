package pipeline

import (
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
)

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
			if def.Transport == "process" {
				return nil, chat.Errorf(chat.ErrHook, "Create hook chose MCP server %q, which runs Yao processes (%s): agentbox cannot run it", o.ServerID, def.File)
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
