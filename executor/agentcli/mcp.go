package agentcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentbox/agentbox/assistant"
)

// MCPEnvPrefix starts the names of the environment variables that carry
// the env values of MCP servers: a CLI's MCP configuration file holds only
// references to them, which the CLI expands from its own environment.
//
// No credential is among them. The CLI's environment is every tool's the
// agent runs, so a real value there is one `env` away: a stdio server's
// "$ENV.NAME" value reaches ResolveMCP already replaced by the placeholder
// of a sandbox secret (the egress proxy puts the value in its place in
// requests to the secret's hosts), and a remote server's headers never
// reach it: the pipeline has the bridge's host relay reach such a server
// (the CLI starts `agentbox bridge mcp --server NAME`). ResolveMCP refuses
// what would break this.
const MCPEnvPrefix = "AGENTBOX_MCP_"

var envNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_]`)

// MCPServer is one MCP server of a run, checked, with every env value
// replaced by a reference to a variable in MCPConfig.Env.
type MCPServer struct {
	// Name is the server's name: the assistant's server id, or the
	// request's name for an extra server.
	Name string
	// Transport is "stdio", "http" or "sse" (inferred when the
	// definition sets none: http with a url, stdio otherwise).
	Transport string
	// Command and Args start a stdio server.
	Command string
	Args    []string
	// URL is a remote (http, sse) server's address; it has no headers
	// (the credentials of a remote server stay on the host).
	URL string
	// Env maps names to references (nil when none).
	Env map[string]string
	// Tools are the tools the assistant's reference names (empty: all of
	// them, and always for an extra server).
	Tools []string
	// Filtered reports a server the CLI reaches through the MCP filter
	// (`agentbox bridge mcp-filter`), which lists and lets it call only
	// Tools.
	Filtered bool
	// Extra reports a server from the request, not the assistant.
	Extra bool
}

// MCPConfig is the MCP servers of a run.
type MCPConfig struct {
	// Servers are the assistant's referenced servers in the order of its
	// references, then the request's extra servers by name.
	Servers []MCPServer
	// Env holds the values the references point to: it goes into the
	// CLI's environment, never a file.
	Env map[string]string
	// File is the CLI's MCP configuration file (see MCPFormat).
	File []byte
}

// Names returns the servers' names, sorted (nil when there are none, or
// no configuration).
func (c *MCPConfig) Names() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// MCPFormat is how a CLI's MCP configuration file differs from the
// shape Claude Code and Cursor share.
type MCPFormat struct {
	// Reference is how the file refers to an environment variable:
	// "${NAME}" for Claude Code, "${env:NAME}" for Cursor (required).
	Reference func(name string) string
	// Type writes each server's transport as its "type" (Claude Code
	// requires it; Cursor tells a stdio server by its command and a remote
	// one by its url).
	Type bool
}

// mcpEntry is a server in the file.
type mcpEntry struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
}

// file returns the MCP configuration file Claude Code and Cursor both
// read: {"mcpServers": {NAME: {type, command, args, env, url}}}, indented,
// with a final newline, members without a value left out. It holds no
// secret: env values are references.
func (c *MCPConfig) file(f MCPFormat, relay string) ([]byte, error) {
	servers := make(map[string]mcpEntry, len(c.Servers))
	for _, s := range c.Servers {
		e := mcpEntry{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL}
		if f.Type {
			e.Type = s.Transport
		}
		if s.Filtered {
			e = filterEntry(s, f, relay)
		}
		servers[s.Name] = e
	}
	b, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode mcp config: %w", err)
	}
	return append(b, '\n'), nil
}

// filterEntry is the stdio server that runs the MCP filter in front of
// the stdio server s: the relay binary with the allowed tools and s's
// command; s's env reaches it (and the server) in its environment.
func filterEntry(s MCPServer, f MCPFormat, relay string) mcpEntry {
	args := append([]string{"bridge", "mcp-filter", "--allow", strings.Join(s.Tools, ","), "--", s.Command}, s.Args...)
	e := mcpEntry{Command: relay, Args: args, Env: s.Env}
	if f.Type {
		e.Type = "stdio"
	}
	return e
}

// ResolveMCP resolves the assistant's MCP references (a may be nil)
// against its server definitions, adds the request's extra servers, moves
// every env value into the environment, and writes the file in the CLI's
// format. Each value becomes a reference to MCPEnvPrefix+SERVER_ENV_NAME.
// A stdio server whose reference lists tools goes through the MCP filter
// run by relay, the agentbox binary inside the sandbox (MCPServer.Filtered);
// without a relay that is an error, since nothing else can keep its other
// tools from the agent.
//
// A credential never goes into the sandbox (see MCPEnvPrefix): an env
// value that still reads "$ENV.NAME", a remote server with headers, or a
// remote server whose reference lists tools (enforced by the bridge's
// host relay, which then stands in for it) is an error that says so. So
// is a server without a definition, defined twice, without its command or
// url, with an unknown transport, or with env names that collide once
// normalized.
//
// pass (executor.Request.MCPServerEnv) maps variables every stdio server
// gets to the CLI's variables they are copied from (the egress proxy's and
// its CA's): each becomes a reference in the server's env, unless the
// server sets that variable itself, so CLIs that hand a server only what
// its configuration names (Codex) or drop variables whose names look like
// credentials or certificates (the Gemini CLI) pass them on too.
func ResolveMCP(a *assistant.Assistant, extra map[string]assistant.MCPServer, format MCPFormat, relay string, pass map[string]string) (*MCPConfig, error) {
	out := &MCPConfig{Env: map[string]string{}}
	seen := map[string]bool{}
	add := func(name string, s *assistant.MCPServer, tools []string, isExtra bool) error {
		if name == "" {
			return errors.New("mcp server with an empty name")
		}
		if seen[name] {
			return fmt.Errorf("mcp server %q configured twice", name)
		}
		e := MCPServer{Name: name, Transport: s.Transport, Tools: tools, Extra: isExtra}
		if e.Transport == "" {
			e.Transport = "stdio"
			if s.URL != "" {
				e.Transport = "http"
			}
		}
		switch e.Transport {
		case "stdio":
			if s.Command == "" {
				return fmt.Errorf("mcp server %q: stdio server without a command", name)
			}
			e.Command, e.Args = s.Command, s.Args
		case "http", "sse":
			if s.URL == "" {
				return fmt.Errorf("mcp server %q: %s server without a url", name, e.Transport)
			}
			if len(s.Headers) > 0 || len(tools) > 0 {
				return fmt.Errorf("mcp server %q: its headers and its tool list are kept by the bridge's host relay, which reaches the server for the sandbox so its credentials never enter it; this run has no bridge", name)
			}
			e.URL = s.URL
		default:
			return fmt.Errorf("mcp server %q: unknown transport %q (want stdio, http or sse)", name, e.Transport)
		}
		var err error
		if e.Env, err = indirect(name, s.Env, format.Reference, out.Env); err != nil {
			return err
		}
		if e.Transport == "stdio" {
			for k, v := range pass {
				if _, set := e.Env[k]; !set {
					if e.Env == nil {
						e.Env = map[string]string{}
					}
					e.Env[k] = format.Reference(v)
				}
			}
		}
		if len(tools) > 0 {
			if relay == "" {
				return fmt.Errorf("mcp server %q lists its tools (%s), which only the agentbox MCP filter enforces, and this sandbox has no agentbox binary (the bridge)", name, strings.Join(tools, ", "))
			}
			e.Filtered = true
		}
		seen[name] = true
		out.Servers = append(out.Servers, e)
		return nil
	}
	if a != nil {
		for _, ref := range a.MCP {
			def := a.MCPServers[ref.ServerID]
			if def == nil {
				return nil, fmt.Errorf("mcp server %q: no definition in mcps/", ref.ServerID)
			}
			if err := add(ref.ServerID, def, ref.Tools, false); err != nil {
				return nil, err
			}
		}
	}
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := extra[n]
		if err := add(n, &s, nil, true); err != nil {
			return nil, err
		}
	}
	var err error
	if out.File, err = out.file(format, relay); err != nil {
		return nil, err
	}
	return out, nil
}

// indirect replaces each env value with a reference to an MCPEnvPrefix
// variable, storing the value in env. A "$ENV.NAME" value is a credential
// the sandbox must not hold: an error.
func indirect(server string, in map[string]string, ref func(string) string, env map[string]string) (map[string]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if strings.HasPrefix(v, assistant.EnvPrefix) {
			return nil, fmt.Errorf("mcp server %q: env %s reads %s, a credential, which the sandbox must not hold: it gets the placeholder of the sandbox secret of that value (sandbox.secrets), which only a run through the bridge's egress proxy can give", server, k, v)
		}
		name := envName(server, "ENV", k)
		if old, dup := env[name]; dup && old != v {
			return nil, fmt.Errorf("mcp server %q: env %s collides with another setting after name normalization", server, k)
		}
		env[name] = v
		out[k] = ref(name)
	}
	return out, nil
}

// envName is the variable holding a server's env value (kind ENV).
func envName(server, kind, key string) string {
	return MCPEnvPrefix + strings.ToUpper(envNameUnsafe.ReplaceAllString(server, "_")+"_"+kind+"_"+envNameUnsafe.ReplaceAllString(key, "_"))
}

// FilterCommand is the stdio server that runs the MCP filter in front of
// the Filtered server s (its command, arguments and environment, with
// references in f's form), for a CLI whose configuration has a shape of
// its own.
func FilterCommand(s MCPServer, f MCPFormat, relay string) (string, []string, map[string]string) {
	e := filterEntry(s, f, relay)
	return e.Command, e.Args, e.Env
}
