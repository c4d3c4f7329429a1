// Package codex runs chat turns with the Codex CLI (@openai/codex) inside
// a chat's sandbox: `codex exec --json` against the bridge's model proxy
// (the Responses API, through a model provider of its own, so no key
// enters the sandbox), with CODEX_HOME in the assistant's state folder of
// the workspace, where its sessions live and are resumed with `codex exec
// resume ID`; everything else there is removed before every run and the
// configuration written from the assistant's definition, and no
// AGENTS.md, skills or project configuration of the workspace is read
// (Hide). Its JSONL events map onto the chat events (see Parser). A kept
// chat's CLI is `codex app-server` instead (appserver.go).
package codex

import (
	"context"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// DefaultBinary is the CLI the executor runs when Options names none.
const DefaultBinary = "codex"

// Options configure an Executor (see agentcli.Options). The zero value is
// usable.
type Options = agentcli.Options

// Executor runs turns with the Codex CLI (the driver, agentcli.Executor,
// filled with cli). It is safe for concurrent use.
type Executor = agentcli.Executor

// New returns an executor with opts, defaults filled in.
func New(opts Options) *Executor {
	return agentcli.New(cli{opts.WithDefaults(DefaultBinary)}, opts)
}

// cli is what is Codex's own: its command and configuration, its stream.
type cli struct{ opts Options }

func (cli) Profile() agentcli.Profile {
	return agentcli.Profile{
		Name: "codex", ErrorID: "cx-error",
		// The rollouts `codex exec resume` reads. Its databases (state,
		// logs, memories, goals) and the skills it unpacks are made
		// again.
		Homes:    []agentcli.Home{{Dir: "home", Keep: []string{"sessions/**"}}},
		Sessions: true,
		// The workspace folders the CLI reads skills from whatever its
		// configuration says (.agents/skills, .codex/skills), .codex
		// also holding the project configuration and rules it reads for
		// a trusted project.
		Hide:   []string{".codex/", ".agents/"},
		Lines:  agentcli.ChatLines,
		Primes: true,
	}
}

func (cli) NewParser(emit chat.EmitFunc, plan *agentcli.Plan, m agentcli.Monitor) agentcli.Parser {
	if conn, ok := plan.Protocol.(*appConn); ok && conn != nil {
		return newAppParser(conn, emit, parserOptions(plan, m), plan.Approve)
	}
	return NewParser(emit, parserOptions(plan, m))
}

func parserOptions(plan *agentcli.Plan, m agentcli.Monitor) ParserOptions {
	return ParserOptions{Model: plan.Model, Skills: plan.Skills, MCPServers: plan.MCP.Names(), MaxTurns: plan.MaxTurns,
		Monitor: m, FailureThreshold: plan.FailureThreshold}
}

// imageArgs attaches the input's image files to the prompt (--image)
// when the model takes images; its text names them either way, and a
// kept app server's turn gets that text only (the agent opens the files
// with its view_image tool).
func imageArgs(req *executor.Request) []string {
	var args []string
	for _, f := range agentcli.ImageFiles(req) {
		args = append(args, "--image", f)
	}
	return args
}

// permissionModes are the permission_mode values the codex command takes.
// The container is the sandbox, so the agent runs without Codex's own
// (bubblewrap, which needs user namespaces a container does not give);
// `codex exec` never asks for approval. plan would need that sandbox's
// read-only mode: it is refused.
var permissionModes = map[string]bool{"": true, "default": true, "acceptEdits": true, "auto": true, "bypassPermissions": true, "dontAsk": true}

func (e cli) Prepare(ctx context.Context, p *agentcli.Prepared) (*agentcli.Plan, error) {
	args := p.Arguments
	if args.PermissionMode == "plan" {
		return nil, agentcli.Invalid("permission_mode plan is not available to the codex command: Codex's read-only sandbox cannot run inside the container (it needs user namespaces); use default")
	}
	if !permissionModes[args.PermissionMode] {
		return nil, agentcli.Invalid("permission_mode %q is not one the codex command knows (default, acceptEdits, auto, bypassPermissions, dontAsk)", args.PermissionMode)
	}
	maxTurns := args.MaxTurns
	if maxTurns <= 0 {
		maxTurns = e.opts.DefaultMaxTurns
	}
	ws := p.Sandbox.Workspace()
	home := p.Home
	if err := skills.Sync(ctx, ws, home+"/skills", p.Assistant.Skills); err != nil {
		return nil, err
	}
	mcp, err := agentcli.ResolveMCP(p.Assistant, p.MCPServers, mcpFormat, p.Relay, p.MCPServerEnv)
	if err != nil {
		return nil, agentcli.Invalid("%s", err.Error())
	}
	conf := configTOML(p.Connector, p.Model, p.System, mcp, p.Relay)
	if err := ws.WriteFile(ctx, home+"/config.toml", conf, 0o600); err != nil {
		return nil, err
	}
	if p.Approve != nil {
		// Commands Codex knows only read run unasked: the ones the
		// policy's rules name ask all the same.
		if rules := execRules(p.PermissionAsk); rules != nil {
			if err := ws.WriteFile(ctx, home+"/rules/agentbox.rules", rules, 0o600); err != nil {
				return nil, err
			}
		}
	}
	prompt := agentcli.Prompt(p.History, p.Input, p.Resume)
	var argv []string
	var input []byte
	var conn any
	// Under an approval policy the app server asks before commands and
	// file changes and the policy answers: `codex exec` cannot ask, so
	// such a turn runs on the app server, kept or not.
	// The driver closes a CLI started to keep that the request does not
	// keep when the turn ends.
	p.Keep = p.Keep || p.Approve != nil
	if p.Keep {
		// Kept for the chat's next turns, or asking: the app server on
		// stdio (appserver.go); the model is the configuration's.
		argv = []string{e.opts.Binary, "app-server"}
		c := newAppConn(sandbox.Workdir, p.Resume, prompt, p.Approve != nil)
		conn, input = c, c.start()
	} else {
		argv = []string{e.opts.Binary, "exec", "--json", "--skip-git-repo-check", "--cd", sandbox.Workdir,
			"--dangerously-bypass-approvals-and-sandbox"}
		if p.Model != "" {
			argv = append(argv, "--model", p.Model)
		}
		if p.Resume != "" {
			argv = append(argv, "resume", p.Resume)
		}
		argv = append(argv, imageArgs(p.Request)...)
		// The prompt is read from standard input ("-"), never argv.
		argv = append(argv, "-")
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
			"CODEX_HOME": sandbox.Workdir + "/" + home,
			// Errors, and the warnings of MCP servers that fail to
			// start (which the JSON stream leaves out; see Parser.Stderr).
			"RUST_LOG": "error,codex_mcp::rmcp_client=warn",
			keyEnv:     p.Connector.Key,
			"NO_COLOR": "1",
		},
		MCP: mcp, Skills: names, MaxTurns: maxTurns, Model: p.Model,
	}, nil
}
