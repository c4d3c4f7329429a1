package assistant

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// rawMCP is package.yao's "mcp" block: the servers the assistant uses.
type rawMCP struct {
	Servers []rawMCPRef `json:"servers"`
}

type rawMCPRef struct {
	ServerID string   `json:"server_id"`
	Tools    []string `json:"tools"`
}

// rawMCPServer is an mcps/**/NAME.mcp.yao file as written.
type rawMCPServer struct {
	Transport string            `json:"transport"`
	Command   string            `json:"command"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
}

// loadMCPServers loads the MCP server definitions of one assistant, by id;
// a defined but broken server maps to nil.
func (l *loader) loadMCPServers(dir string) map[string]*MCPServer {
	files := l.defFiles(dir, mcpSuffix)
	out := make(map[string]*MCPServer, len(files))
	for id, abs := range files {
		var raw rawMCPServer
		d := l.decode(abs, &raw)
		if d == nil || d.broken {
			l.done(d)
			out[id] = nil // defined but broken: references to it are fine
			continue
		}
		s := &MCPServer{ID: id, File: l.rel(abs), Transport: raw.Transport, Command: raw.Command,
			Args: raw.Args, Env: raw.Env, URL: raw.URL, Headers: raw.Headers}
		if s.Transport == "" {
			switch {
			case raw.Command != "":
				s.Transport = "stdio"
			case raw.URL != "":
				s.Transport = "http"
			}
		}
		switch s.Transport {
		case "stdio":
			if raw.Command == "" {
				d.errPath("", "command is required for a stdio server")
			}
			if raw.URL != "" {
				d.errPath("url", "url is only for http and sse servers")
			}
			if len(raw.Headers) > 0 {
				d.errPath("headers", "headers are only for http and sse servers")
			}
		case "http", "sse":
			if raw.URL == "" {
				d.errPath("", "url is required for an %s server", s.Transport)
			} else if u, err := url.Parse(raw.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.errPath("url", "url: want an http(s) URL, got %q", raw.URL)
			}
			if raw.Command != "" {
				d.errPath("command", "command is only for stdio servers")
			}
		case "":
			d.errPath("", "transport is required: stdio (with command) or http/sse (with url)")
		default:
			d.errPath("transport", "unknown transport %q (known: stdio, http, sse)", s.Transport)
		}
		for k, v := range raw.Env {
			if !envName.MatchString(k) {
				d.errPath("env."+k, "env: invalid variable name %q", k)
			}
			if msg := checkEnvRef(v); msg != "" {
				d.errPath("env."+k, "env.%s: %s", k, msg)
			}
		}
		for k, v := range raw.Headers {
			if msg := checkEnvRef(v); msg != "" {
				d.errPath("headers."+k, "headers.%s: %s", k, msg)
			}
		}
		if l.done(d) {
			out[id] = s
		} else {
			out[id] = nil // defined but broken: referenced without a second error
		}
	}
	return out
}

// checkMCPRefs checks package.yao's mcp.servers against the defined servers.
func (l *loader) checkMCPRefs(d *doc, m *rawMCP, servers map[string]*MCPServer, dir string) []MCPRef {
	refs := make([]MCPRef, 0, len(m.Servers))
	seen := map[string]bool{}
	for i, r := range m.Servers {
		p := fmt.Sprintf("mcp.servers[%d]", i)
		if r.ServerID == "" {
			d.errPath(p, "%s.server_id is required", p)
			continue
		}
		if seen[r.ServerID] {
			d.errPath(p+".server_id", "server %q is listed twice", r.ServerID)
			continue
		}
		seen[r.ServerID] = true
		if _, ok := servers[r.ServerID]; !ok {
			have := make([]string, 0, len(servers))
			for k := range servers {
				have = append(have, k)
			}
			sort.Strings(have)
			hint := "none are defined"
			if len(have) > 0 {
				hint = "defined: " + strings.Join(have, ", ")
			}
			d.errPath(p+".server_id", "MCP server %q is not defined in %s/ (%s)", r.ServerID, l.rel(dir), hint)
			continue
		}
		for j, t := range r.Tools {
			if strings.TrimSpace(t) == "" {
				d.errPath(fmt.Sprintf("%s.tools[%d]", p, j), "tool name is empty")
			}
		}
		refs = append(refs, MCPRef(r))
	}
	return refs
}
