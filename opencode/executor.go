// Package opencode runs chat turns with opencode (opencode-ai) inside a
// chat's sandbox: `opencode run --format json` with its anthropic or openai
// provider pointed at the bridge's model proxy (the connector's type
// decides), HOME in the assistant's state folder of the workspace, where
// ~/.config/opencode holds its configuration (MCP servers, permissions,
// the step limit, the system prompt, skills) and ~/.local/share/opencode
// the sessions it continues with --session; all but the sessions are
// written anew on every run, and it reads no configuration of the
// workspace (OPENCODE_DISABLE_PROJECT_CONFIG, and Hide for what it reads
// despite that).
package opencode

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// DefaultBinary is the CLI the executor runs when Options names none.
const DefaultBinary = "opencode"

// keyEnv carries the connector's key (the bridge's per-request token).
const keyEnv = "AGENTBOX_OPENCODE_KEY"

// Options configure an Executor (see agentcli.Options). The zero value is
// usable.
type Options = agentcli.Options

// Executor runs turns with opencode (the driver, agentcli.Executor,
// filled with cli). It is safe for concurrent use.
type Executor = agentcli.Executor

// New returns an executor with opts, defaults filled in.
func New(opts Options) *Executor {
	return agentcli.New(cli{opts.WithDefaults(DefaultBinary)}, opts)
}

// cli is what is opencode's own: its command and configuration, its
// stream.
type cli struct{ opts Options }

func (cli) Profile() agentcli.Profile {
	return agentcli.Profile{
		Name: "opencode", ErrorID: "oc-error",
		// Its database, where --session finds the session. Not its
		// snapshots: git repositories, whose configuration runs
		// commands.
		Homes:    []agentcli.Home{{Dir: "home", Keep: []string{".local/share/opencode/opencode.db", ".local/share/opencode/opencode.db-*"}}},
		Sessions: true,
		// The workspace's opencode configuration that the CLI reads
		// even with OPENCODE_DISABLE_PROJECT_CONFIG (its second
		// configuration loader does not check it, 1.18.33): the
		// .opencode folder (plugins, agents, commands) and the
		// opencode.json and opencode.jsonc files, whose plugins it
		// loads.
		Hide:  []string{".opencode/", "opencode.json", "opencode.jsonc"},
		Lines: agentcli.ChatLines,
		// Not primed (agentcli.Profile.Primes): opencode opens its
		// database, where its sessions are, as it starts, so a CLI
		// started ahead of the chat would keep the chat's session in
		// the pooled sandbox's own folder, gone with it; and its
		// session/new, which sets up the folder's project, is most of
		// its start.
	}
}

func (cli) NewParser(emit chat.EmitFunc, plan *agentcli.Plan, m agentcli.Monitor) agentcli.Parser {
	if conn, ok := plan.Protocol.(*acp.Conn); ok && conn != nil {
		return acpParser(conn, emit, plan, m)
	}
	return NewParser(emit, ParserOptions{Model: plan.Model, Skills: plan.Skills, MCPServers: plan.MCP.Names(), Monitor: m,
		PermissionMode: plan.PermissionMode, FailureThreshold: plan.FailureThreshold})
}

// mode is how a permission_mode runs: opencode's agent, its permission
// rules and whether --auto approves what they leave to ask (headless,
// opencode cannot ask: what is left to ask is refused).
type mode struct {
	agent      string
	permission any
	auto       bool
}

var modes = map[string]mode{
	"":                  {agent: "build", permission: "allow", auto: true},
	"bypassPermissions": {agent: "build", permission: "allow", auto: true},
	"dontAsk":           {agent: "build", permission: "allow", auto: true},
	"auto":              {agent: "build", permission: "allow", auto: true},
	"acceptEdits":       {agent: "build", permission: map[string]string{"edit": "allow", "bash": "ask", "webfetch": "ask"}},
	"default":           {agent: "build"},
	"plan":              {agent: "plan"},
}

// mcpFormat: opencode expands {env:NAME} in its configuration.
var mcpFormat = agentcli.MCPFormat{Reference: func(n string) string { return "{env:" + n + "}" }}

func (e cli) Prepare(ctx context.Context, p *agentcli.Prepared) (*agentcli.Plan, error) {
	args := p.Arguments
	m, ok := modes[args.PermissionMode]
	if !ok {
		return nil, agentcli.Invalid("permission_mode %q is not one the opencode command knows (default, acceptEdits, auto, bypassPermissions, dontAsk, plan)", args.PermissionMode)
	}
	if p.Model == "" {
		return nil, agentcli.Invalid("the opencode command needs a model: set the connector's model or sandbox.arguments.model")
	}
	provider := "anthropic"
	if p.Connector.Type == "openai" {
		provider = "openai"
	}
	maxTurns := args.MaxTurns
	if maxTurns <= 0 {
		maxTurns = e.opts.DefaultMaxTurns
	}
	ws := p.Sandbox.Workspace()
	home := p.Home
	conf := home + "/.config/opencode"
	if err := ws.MkdirAll(ctx, conf); err != nil {
		return nil, err
	}
	if err := skills.Sync(ctx, ws, conf+"/skills", p.Assistant.Skills); err != nil {
		return nil, err
	}
	mcp, err := agentcli.ResolveMCP(p.Assistant, p.MCPServers, mcpFormat, p.Relay, p.MCPServerEnv)
	if err != nil {
		return nil, agentcli.Invalid("%s", err.Error())
	}
	system := conf + "/system-prompt.md"
	if err := ws.WriteFile(ctx, system, []byte(p.System+"\n"), 0o644); err != nil {
		return nil, err
	}
	// Under an approval policy every tool asks (the policy decides, and
	// the chat's user where it says ask), through the Agent Client
	// Protocol: `opencode run` cannot ask. The plan agent, which ACP
	// cannot start, runs as without a policy.
	asks := p.Approve != nil && m.agent == "build"
	if asks {
		m.permission, m.auto = "ask", false
	}
	cfg, err := configJSON(provider, p.Connector.Host, p.Model, sandbox.Workdir+"/"+system, m, maxTurns, mcp, p.Relay)
	if err != nil {
		return nil, err
	}
	if err := ws.WriteFile(ctx, conf+"/opencode.json", cfg, 0o600); err != nil {
		return nil, err
	}
	// Warnings go to stderr: they name an MCP server that did not
	// connect, which the JSON stream leaves out (Parser.Stderr).
	prompt := agentcli.Prompt(p.History, p.Input, p.Resume)
	// The ACP server starts the build agent: the plan agent runs a turn
	// at a time.
	// A turn that asks runs on ACP even when the request does not keep
	// the CLI: the driver closes it when the turn ends.
	p.Keep = (p.Keep && m.agent == "build") || asks
	var argv []string
	var input []byte
	var conn any
	if p.Keep {
		// Kept for the chat's next turns, or asking: the Agent Client
		// Protocol on stdio (keep.go), the model and the permissions
		// from the configuration; what the rules leave to ask is
		// refused, or decided by the approval policy.
		argv = []string{e.opts.Binary, "acp", "--print-logs", "--log-level", "WARN"}
		c := acp.NewConn(sandbox.Workdir, p.Resume, prompt)
		conn, input = c, c.Start()
	} else {
		argv = []string{e.opts.Binary, "run", "--format", "json", "--model", provider + "/" + p.Model, "--agent", m.agent, "--thinking", "--print-logs", "--log-level", "WARN"}
		if m.auto {
			argv = append(argv, "--auto")
		}
		if p.Resume != "" {
			argv = append(argv, "--session", p.Resume)
		}
		// The input's images go with the message as files; its text names
		// them either way (and is all a kept CLI's turn gets).
		for _, f := range agentcli.ImageFiles(p.Request) {
			argv = append(argv, "--file="+f)
		}
		input = []byte(prompt)
	}
	names := make([]string, 0, len(p.Assistant.Skills))
	for _, s := range p.Assistant.Skills {
		names = append(names, s.Name)
	}
	return &agentcli.Plan{
		Argv:     argv,
		Input:    input,
		Protocol: conn,
		Env: map[string]string{
			"HOME":                             sandbox.Workdir + "/" + home,
			keyEnv:                             p.Connector.Key,
			"OPENCODE_DISABLE_AUTOUPDATE":      "1",
			"OPENCODE_DISABLE_MODELS_FETCH":    "1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD":    "1",
			"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
			"OPENCODE_DISABLE_CLAUDE_CODE":     "1",
			// Nothing of the workspace configures it: no opencode.json,
			// .opencode folder (plugins, agents, commands) or AGENTS.md
			// of the project, no skills of other tools' folders.
			"OPENCODE_DISABLE_PROJECT_CONFIG":    "1",
			"OPENCODE_DISABLE_EXTERNAL_SKILLS":   "1",
			"OPENCODE_DISABLE_SHARE":             "1",
			"OPENCODE_DISABLE_TERMINAL_TITLE":    "1",
			"OPENCODE_EXPERIMENTAL_DISABLE_COPY": "1",
		},
		MCP: mcp, Skills: names, Model: p.Model, PermissionMode: args.PermissionMode,
	}, nil
}

// configJSON is ~/.config/opencode/opencode.json: the provider at the
// bridge (key from the environment), the model, the mode's permissions,
// the step limit of both agents, the system prompt file as instructions,
// and the MCP servers. It holds no secret.
func configJSON(provider, host, model, system string, m mode, maxTurns int, mcp *agentcli.MCPConfig, relay string) ([]byte, error) {
	servers := map[string]any{}
	for _, s := range mcp.Servers {
		switch {
		case s.Filtered || s.Transport == "stdio":
			command, args, env := s.Command, s.Args, s.Env
			if s.Filtered {
				command, args, env = agentcli.FilterCommand(s, mcpFormat, relay)
			}
			e := map[string]any{"type": "local", "command": append([]string{command}, args...), "enabled": true}
			if len(env) > 0 {
				e["environment"] = env
			}
			servers[s.Name] = e
		default:
			servers[s.Name] = map[string]any{"type": "remote", "url": s.URL, "enabled": true}
		}
	}
	agent := map[string]any{"steps": maxTurns}
	c := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{provider: map[string]any{
			"options": map[string]any{"baseURL": strings.TrimRight(host, "/") + "/v1", "apiKey": "{env:" + keyEnv + "}"},
			"models":  map[string]any{model: map[string]any{"name": model}},
		}},
		"model":        provider + "/" + model,
		"small_model":  provider + "/" + model,
		"autoupdate":   false,
		"share":        "disabled",
		"instructions": []string{system},
		"agent":        map[string]any{"build": agent, "plan": agent},
		"mcp":          servers,
	}
	if m.permission != nil {
		c["permission"] = m.permission
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
