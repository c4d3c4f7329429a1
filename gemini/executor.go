// Package gemini runs chat turns with the Gemini CLI (@google/gemini-cli)
// inside a chat's sandbox: `gemini --output-format stream-json` against the
// bridge's model proxy (GOOGLE_GEMINI_BASE_URL, the per-request token as
// its key), with HOME in the assistant's state folder of the workspace,
// where ~/.gemini holds its settings (MCP servers, the turn limit), the
// system prompt as GEMINI.md, the skills and the sessions it resumes; all
// but the sessions are written anew on every run, and the workspace's
// .gemini and .agents folders are hidden from it (Hide).
package gemini

import (
	"context"
	"encoding/json"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// DefaultBinary is the CLI the executor runs when Options names none.
const DefaultBinary = "gemini"

// Options configure an Executor (see agentcli.Options). The zero value is
// usable.
type Options = agentcli.Options

// Executor runs turns with the Gemini CLI (the driver, agentcli.Executor,
// filled with cli). It is safe for concurrent use.
type Executor = agentcli.Executor

// New returns an executor with opts, defaults filled in.
func New(opts Options) *Executor {
	return agentcli.New(cli{opts.WithDefaults(DefaultBinary)}, opts)
}

// cli is what is the Gemini CLI's own: its command and configuration, its
// stream.
type cli struct{ opts Options }

func (cli) Profile() agentcli.Profile {
	return agentcli.Profile{
		Name: "gemini", ErrorID: "gm-error",
		// The chats --resume reads and the registry that names their
		// project folder.
		Homes: []agentcli.Home{{Dir: "home", Keep: []string{".gemini/projects.json", ".gemini/tmp/*/.project_root", ".gemini/tmp/*/chats/**",
			".gemini/history/*/.project_root"}}},
		Sessions: true,
		// The workspace folders the CLI reads project configuration
		// from, which no setting turns off (it reads them in every
		// folder it trusts, and headless it needs the workspace
		// trusted): .gemini (settings that start MCP servers, hooks and
		// tool-discovery commands; .env; commands, agents, skills,
		// policies) and .agents (skills).
		Hide:   []string{".gemini/", ".agents/"},
		Lines:  agentcli.ChatLines,
		Primes: true,
	}
}

func (cli) NewParser(emit chat.EmitFunc, plan *agentcli.Plan, m agentcli.Monitor) agentcli.Parser {
	if conn, ok := plan.Protocol.(*acp.Conn); ok && conn != nil {
		return acpParser(conn, emit, plan, m)
	}
	return NewParser(emit, ParserOptions{Skills: plan.Skills, MCPServers: plan.MCP.Names(), Monitor: m,
		PermissionMode: plan.PermissionMode, FailureThreshold: plan.FailureThreshold})
}

// approvalModes map permission_mode onto --approval-mode. Headless, the
// CLI cannot ask: "default" refuses what needs approval.
var approvalModes = map[string]string{
	"":                  "yolo",
	"default":           "default",
	"acceptEdits":       "auto_edit",
	"auto":              "yolo",
	"bypassPermissions": "yolo",
	"dontAsk":           "yolo",
	"plan":              "plan",
}

// mcpFormat: the CLI expands ${NAME} in its settings' env.
var mcpFormat = agentcli.MCPFormat{Reference: func(n string) string { return "${" + n + "}" }}

func (e cli) Prepare(ctx context.Context, p *agentcli.Prepared) (*agentcli.Plan, error) {
	args := p.Arguments
	mode, ok := approvalModes[args.PermissionMode]
	if !ok {
		return nil, agentcli.Invalid("permission_mode %q is not one the gemini command knows (default, acceptEdits, auto, bypassPermissions, dontAsk, plan)", args.PermissionMode)
	}
	maxTurns := args.MaxTurns
	if maxTurns <= 0 {
		maxTurns = e.opts.DefaultMaxTurns
	}
	ws := p.Sandbox.Workspace()
	home := p.Home
	conf := home + "/.gemini"
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
	// The system prompt is the user's context file, which the CLI adds to
	// its own prompt.
	if err := ws.WriteFile(ctx, conf+"/GEMINI.md", []byte(p.System+"\n"), 0o644); err != nil {
		return nil, err
	}
	// The CLI's debug log names an MCP server that did not connect (its
	// stderr only says "MCP issues detected"); it is read when the run
	// ends (Parser.Stderr). A log a lost run left is not this run's.
	logFile := p.State + "/debug.log"
	if err := ws.RemoveAll(ctx, logFile); err != nil {
		return nil, err
	}
	// Under an approval policy the CLI asks before its shell commands,
	// edits and web fetches (approval mode default; it reads, lists and
	// searches without asking) and the policy answers, through the Agent
	// Client Protocol: headless it cannot ask. Plan mode runs as without
	// a policy (it changes nothing).
	asks := p.Approve != nil && mode != "plan"
	resume := p.Resume
	if asks {
		mode = "default"
		// The CLI's session/load finds no sessions: a session made
		// before goes on in a new one with the conversation in its
		// prompt.
		resume = ""
	}
	prompt := agentcli.Prompt(p.History, p.Input, resume)
	argv := []string{e.opts.Binary, "--skip-trust", "--approval-mode", mode}
	if p.Model != "" {
		argv = append(argv, "--model", p.Model)
	}
	var input []byte
	var conn any
	// A kept chat's CLI opens its session with session/new; a session
	// made before (the chat's kept CLI is gone) is resumed by a turn of
	// its own, unkept: the CLI's session/load finds no sessions.
	// A turn that asks runs on ACP even when the request does not keep
	// the CLI: the driver closes it when the turn ends.
	p.Keep = (p.Keep && resume == "") || asks
	if p.Keep {
		// Kept for the chat's next turns, or asking: the Agent Client
		// Protocol on stdio (keep.go).
		argv = append(argv, "--acp")
		c := acp.NewConn(sandbox.Workdir, resume, prompt)
		conn, input = c, c.Start()
	} else {
		argv = append(argv, "--output-format", "stream-json")
		if p.Resume != "" {
			argv = append(argv, "--resume", p.Resume)
		}
		// The prompt comes on standard input; -p only makes the run
		// headless.
		argv = append(argv, "--prompt", " ")
		input = []byte(prompt)
	}
	// The CLI's maxSessionTurns counts over its process: a kept CLI's
	// turns would spend one budget, so its parser counts each turn's
	// steps instead (acp.Options.MaxTurns).
	sessionTurns, parserTurns := maxTurns, 0
	if p.Keep {
		sessionTurns, parserTurns = -1, maxTurns
	}
	settings, err := settingsJSON(mcp, sessionTurns, p.Relay)
	if err != nil {
		return nil, err
	}
	if err := ws.WriteFile(ctx, conf+"/settings.json", settings, 0o600); err != nil {
		return nil, err
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
			"HOME":                   sandbox.Workdir + "/" + home,
			"GEMINI_DEBUG_LOG_FILE":  sandbox.Workdir + "/" + logFile,
			"GEMINI_API_KEY":         p.Connector.Key,
			"GOOGLE_GEMINI_BASE_URL": p.Connector.Host,
			"NO_COLOR":               "1",
		},
		MCP: mcp, Skills: names, Model: p.Model, PermissionMode: args.PermissionMode, LogFile: logFile, MaxTurns: parserTurns,
	}, nil
}

// mcpEntry is a server in the settings' mcpServers.
type mcpEntry struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	HTTPURL string            `json:"httpUrl,omitempty"`
	Trust   bool              `json:"trust"`
}

// settingsJSON is ~/.gemini/settings.json: API-key auth (the bridge's
// token), the turn limit of the process (-1: none), no telemetry, update checks or usage
// statistics, skills on, no .env file of the workspace, and the MCP
// servers (trusted: the approval mode decides). It holds no secret.
func settingsJSON(mcp *agentcli.MCPConfig, maxTurns int, relay string) ([]byte, error) {
	servers := map[string]mcpEntry{}
	for _, s := range mcp.Servers {
		e := mcpEntry{Env: s.Env, Trust: true}
		switch {
		case s.Filtered:
			e.Command, e.Args, e.Env = agentcli.FilterCommand(s, mcpFormat, relay)
			e.Cwd = sandbox.Workdir
		case s.Transport == "stdio":
			// In the workspace, named: a CLI started ahead of the chat
			// (agentcli.Profile.Primes) works in another folder.
			e.Command, e.Args, e.Cwd = s.Command, s.Args, sandbox.Workdir
		case s.Transport == "sse":
			e.URL = s.URL
		default:
			e.HTTPURL = s.URL
		}
		servers[s.Name] = e
	}
	b, err := json.MarshalIndent(map[string]any{
		"security":   map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}, "folderTrust": map[string]any{"enabled": false}},
		"model":      map[string]any{"maxSessionTurns": maxTurns},
		"general":    map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
		"privacy":    map[string]any{"usageStatisticsEnabled": false},
		"telemetry":  map[string]any{"enabled": false},
		"skills":     map[string]any{"enabled": true},
		"advanced":   map[string]any{"ignoreLocalEnv": true},
		"mcpServers": servers,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
