package codex

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
)

// keyEnv carries the connector's key (the bridge's per-request token) to
// the CLI's model provider.
const keyEnv = "AGENTBOX_CODEX_KEY"

// providerID is the model provider config.toml defines.
const providerID = "agentbox"

// mcpFormat: references are "${NAME}", which configTOML turns into what
// Codex knows (env_vars); Codex sets no type.
var mcpFormat = agentcli.MCPFormat{Reference: func(n string) string { return "${" + n + "}" }}

var reference = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// str is a TOML basic string (JSON's escapes are TOML's).
func str(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func strs(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = str(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// baseURL is the provider's base URL: the connector's host with /v1.
func baseURL(host string) string {
	host = strings.TrimRight(host, "/")
	if strings.HasSuffix(host, "/v1") {
		return host
	}
	return host + "/v1"
}

// configTOML is CODEX_HOME/config.toml for a run: the model provider (the
// bridge's proxy, Responses API over HTTP), the system prompt as developer
// instructions and no project instructions (AGENTS.md), no update checks,
// history, telemetry or provider-side web search, and the MCP servers. It
// holds no secret: the key and MCP values are environment variables the
// CLI reads (env_key, env_vars); a stdio
// server's env is set by `env` from those variables.
func configTOML(c executor.Connection, model, system string, mcp *agentcli.MCPConfig, relay string) []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Written by agentbox for every run; changes are overwritten.")
	w("model_provider = %s", str(providerID))
	if model != "" {
		w("model = %s", str(model))
	}
	if system != "" {
		w("developer_instructions = %s", str(system))
	}
	// No AGENTS.md of the workspace: the instructions are the assistant's.
	// (Its project folder, .codex, is read only for a trusted project, and
	// this configuration trusts none.)
	w("project_doc_max_bytes = 0")
	w("check_for_update_on_startup = false")
	// Codex offers the model the Responses API's web_search tool, which
	// runs at the provider, outside the sandbox's network policy: the
	// bridge's model proxy refuses every provider-side tool.
	w(`web_search = "disabled"`)
	w("")
	w("[history]")
	w(`persistence = "none"`)
	w("")
	w("[analytics]")
	w("enabled = false")
	w("")
	w("[model_providers.%s]", providerID)
	w(`name = "agentbox"`)
	w("base_url = %s", str(baseURL(c.Host)))
	w("env_key = %s", str(keyEnv))
	w(`wire_api = "responses"`)
	w("request_max_retries = 2")
	w("stream_max_retries = 2")
	w("supports_websockets = false")
	if mcp == nil {
		return []byte(b.String())
	}
	for _, s := range mcp.Servers {
		w("")
		w("[mcp_servers.%s]", str(s.Name))
		if s.Transport != "stdio" && !s.Filtered {
			w("url = %s", str(s.URL))
			continue
		}
		command, args, env := s.Command, s.Args, s.Env
		if s.Filtered {
			command, args, env = agentcli.FilterCommand(s, mcpFormat, relay)
		}
		var vars, sets []string
		for _, k := range sortedKeys(env) {
			if m := reference.FindStringSubmatch(env[k]); m != nil {
				vars = append(vars, m[1])
				sets = append(sets, k+"="+m[1])
			}
		}
		if len(vars) > 0 {
			// Codex hands a server only the variables env_vars names;
			// the server sees them under its own names.
			script := `for a in "$@"; do case $a in --) break;; *) export "${a%%=*}=$(printenv "${a#*=}")";; esac; shift; done; shift; exec "$@"`
			args = append(append(append([]string{"-c", script, "sh"}, sets...), "--", command), args...)
			command = "/bin/sh"
			w("env_vars = %s", strs(vars))
		}
		w("command = %s", str(command))
		if len(args) > 0 {
			w("args = %s", strs(args))
		}
		// In the workspace, named: a CLI started ahead of the chat
		// (agentcli.Profile.Primes) works in another folder.
		w("cwd = %s", str(sandbox.Workdir))
	}
	return []byte(b.String())
}

// execRules are Codex's execution policy rules ($CODEX_HOME/rules) that
// make it ask before the commands the approval rules (Claude Code's
// syntax) name, which it would run unasked when it knows them to only
// read: a prefix_rule "prompt" of each Bash rule's words up to its first
// "*" (Bash(cat:*), Bash(cat secrets/*) ask before every cat). A rule of
// no such words (Bash, Bash(*)) has none; nil when no rule has one.
func execRules(rules []string) []byte {
	var b strings.Builder
	seen := map[string]bool{}
	for _, r := range rules {
		spec, ok := strings.CutPrefix(r, "Bash(")
		if !ok || !strings.HasSuffix(spec, ")") {
			continue
		}
		spec = strings.TrimSuffix(strings.TrimSuffix(spec, ")"), ":*")
		var words []string
		for _, w := range strings.Fields(spec) {
			if strings.Contains(w, "*") {
				break
			}
			words = append(words, w)
		}
		if len(words) == 0 {
			continue
		}
		pattern, _ := json.Marshal(words) // a JSON list of strings is a Starlark one
		if seen[string(pattern)] {
			continue
		}
		seen[string(pattern)] = true
		fmt.Fprintf(&b, "prefix_rule(pattern = %s, decision = \"prompt\")\n", pattern)
	}
	if b.Len() == 0 {
		return nil
	}
	return []byte(b.String())
}
