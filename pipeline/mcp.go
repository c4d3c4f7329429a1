package pipeline

import (
	"maps"
	"net/http"
	"slices"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
)

// hasRemoteMCP reports whether app defines a remote (http, sse) MCP server
// an assistant could use, for which a sandbox needs the bridge's remote
// MCP relay.
func hasRemoteMCP(app *assistant.App) bool {
	remote := func(defs map[string]*assistant.MCPServer) bool {
		for _, d := range defs {
			if d != nil && (d.Transport == "http" || d.Transport == "sse") {
				return true
			}
		}
		return false
	}
	if remote(app.MCPServers) {
		return true
	}
	for _, a := range app.Assistants {
		if remote(a.OwnMCPServers) {
			return true
		}
	}
	return false
}

// mcpForSandbox returns the assistant the executor runs with its MCP
// servers as the sandbox may see them, none with a credential: each remote
// server is replaced by the stdio relay to the host, which reaches it with
// its headers and enforces its tool list (set on sess), and each
// "$ENV.NAME" env value of a stdio server by the placeholder of the sandbox
// secret of that value (assistant.MCPSecret), which the egress proxy swaps
// for the value in requests to the secret's hosts. A credential that no
// secret stands for, or whose secret was left out (its variable unset), is
// an error naming it.
func mcpForSandbox(a *assistant.Assistant, sess *bridge.Session) (*assistant.Assistant, error) {
	// A process server's tools are the bridge's host tools
	// (processHostTools): no CLI runs the server.
	a = withoutProcessServers(a)
	remote := map[string]bridge.RemoteMCP{}
	refs := slices.Clone(a.MCP)
	defs := make(map[string]*assistant.MCPServer, len(a.MCPServers))
	placeholders := sess.Placeholders()
	for i, ref := range refs {
		def := a.MCPServers[ref.ServerID]
		if def == nil {
			continue // the executor says it has no definition
		}
		switch {
		case def.Transport == "http" || def.Transport == "sse" || (def.Transport == "" && def.URL != ""):
			relay := sess.RemoteMCPServer(ref.ServerID)
			if relay.Command == "" {
				return nil, chat.Errorf(chat.ErrInternal, "mcp server %s is remote, and this sandbox's bridge has no remote MCP relay", ref.ServerID)
			}
			h := http.Header{}
			for _, k := range slices.Sorted(maps.Keys(def.Headers)) {
				v, err := assistant.ResolveValue(def.Headers[k])
				if err != nil {
					return nil, chat.Errorf(chat.ErrInternal, "mcp server %s (%s): header %s: %v", ref.ServerID, def.File, k, err)
				}
				h.Set(k, v)
			}
			transport := def.Transport
			if transport == "" {
				transport = "http"
			}
			remote[ref.ServerID] = bridge.RemoteMCP{Transport: transport, URL: def.URL, Header: h, Tools: ref.Tools}
			defs[ref.ServerID] = &relay
			// The relay lists only the allowed tools: the CLI may
			// approve the whole server.
			refs[i].Tools = nil
		case len(def.Env) > 0:
			cp := *def
			cp.Env = make(map[string]string, len(def.Env))
			for k, v := range def.Env {
				name, isSecret, err := a.MCPSecret(def, k, v)
				if err != nil {
					return nil, &chat.Error{Code: chat.ErrInternal, Message: "assistant " + a.ID + ": " + err.Error(), Err: err}
				}
				if isSecret {
					if v = placeholders[name]; v == "" {
						return nil, chat.Errorf(chat.ErrAuth, "assistant %s: mcp server %s: env %s stands for sandbox secret %s, whose variable is not set", a.ID, ref.ServerID, k, name)
					}
				}
				cp.Env[k] = v
			}
			defs[ref.ServerID] = &cp
		default:
			defs[ref.ServerID] = def
		}
	}
	if err := sess.SetRemoteMCP(remote); err != nil {
		return nil, &chat.Error{Code: chat.ErrInternal, Message: err.Error(), Err: err}
	}
	cp := *a
	cp.MCP, cp.MCPServers = refs, defs
	return &cp, nil
}

// withoutProcessServers is a without its process MCP servers, which no
// CLI runs: their tools reach a sandboxed agent as the bridge's host
// tools.
func withoutProcessServers(a *assistant.Assistant) *assistant.Assistant {
	has := false
	for _, def := range a.MCPServers {
		has = has || (def != nil && def.Transport == "process")
	}
	if !has {
		return a
	}
	cp := *a
	cp.MCP = slices.DeleteFunc(slices.Clone(a.MCP), func(r assistant.MCPRef) bool {
		def := a.MCPServers[r.ServerID]
		return def != nil && def.Transport == "process"
	})
	cp.MCPServers = maps.Clone(a.MCPServers)
	maps.DeleteFunc(cp.MCPServers, func(_ string, def *assistant.MCPServer) bool { return def != nil && def.Transport == "process" })
	return &cp
}
