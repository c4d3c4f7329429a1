package claude

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/skills"
)

// Defaults for Options.
const (
	DefaultBinary      = "claude"
	DefaultMaxTurns    = 30
	DefaultGracePeriod = 5 * time.Second
	// DefaultIdleTimeout is how long the CLI may print nothing while no
	// tool or task runs before the watchdog stops it. It is longer than a
	// model's slowest first token: the CLI prints its status and retries
	// while it waits for the model API.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultAPIRetries is how often the CLI retries a failed model API
	// call (its own default is 10, with waits that add up to minutes):
	// a model that keeps failing ends the turn with its error at once.
	DefaultAPIRetries = 2
	// DefaultAckWait: Claude Code prints its init line within milliseconds
	// of reading a message; ten seconds leave room for a loaded host.
	DefaultAckWait = 10 * time.Second
)

// Options configure an Executor. The zero value is usable.
type Options struct {
	// Binary is the CLI inside the sandbox ("claude", found on PATH).
	Binary string
	// DefaultMaxTurns applies when the assistant sets no max_turns.
	DefaultMaxTurns int
	// GracePeriod is how long the CLI may keep running after its work is
	// done (its result printed and its background tasks ended) before it
	// is killed with a cli_hung notice.
	GracePeriod time.Duration
	// IdleTimeout is the watchdog (DefaultIdleTimeout when 0, negative:
	// none): a CLI that prints nothing for this long while no tool or
	// task runs is stopped (headless Claude Code is known to hang).
	IdleTimeout time.Duration
	// AckWait is how long a CLI kept between turns has to print its first
	// line after a turn's message (DefaultAckWait when 0); one that does
	// not is hung, and a new CLI takes the turn.
	AckWait time.Duration
	// APIRetries is how often the CLI retries a failed model API call
	// (DefaultAPIRetries when 0; negative: the CLI's own default).
	// MaxRetryWait is the longest wait before a retry a turn accepts
	// (DefaultMaxRetryWait when 0, negative: any): a rate limit that asks
	// for longer ends the turn at once with the model's error.
	APIRetries   int
	MaxRetryWait time.Duration
	// Env is added to the CLI's environment (CLAUDECODE and CLAUDE_CODE_*
	// entries are dropped).
	Env map[string]string
	// NoEnvFilter turns off the removal of CLAUDECODE and CLAUDE_CODE_*
	// variables the sandbox itself carries (done by starting the CLI
	// through /bin/sh and sed; turn it off for sandboxes without them).
	NoEnvFilter bool
	// Logger receives run diagnostics (never secrets). Nil: slog.Default.
	Logger *slog.Logger
}

// Executor runs turns with the Claude Code CLI (the driver,
// agentcli.Executor, filled with cli). It is safe for concurrent use; runs
// share nothing but the options.
type Executor = agentcli.Executor

// New returns an executor with opts, defaults filled in.
func New(opts Options) *Executor {
	c := newCLI(opts)
	return agentcli.New(c, agentcli.Options{Binary: c.opts.Binary, DefaultMaxTurns: c.opts.DefaultMaxTurns,
		GracePeriod: c.opts.GracePeriod, IdleTimeout: c.opts.IdleTimeout, AckWait: c.opts.AckWait, Logger: c.opts.Logger})
}

// newCLI returns the cli of opts, defaults filled in.
func newCLI(opts Options) cli {
	if opts.Binary == "" {
		opts.Binary = DefaultBinary
	}
	if opts.DefaultMaxTurns <= 0 {
		opts.DefaultMaxTurns = DefaultMaxTurns
	}
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.AckWait <= 0 {
		opts.AckWait = DefaultAckWait
	}
	if opts.APIRetries == 0 {
		opts.APIRetries = DefaultAPIRetries
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return cli{opts}
}

// cli is what is Claude Code's own: its command and configuration, its
// stream, and the message a CLI kept between turns reads (Keeper).
type cli struct{ opts Options }

var _ agentcli.Keeper = cli{}

func (cli) Profile() agentcli.Profile {
	return agentcli.Profile{
		Name: "claude", ErrorID: "cc-error",
		State: func(id string) string { return ConfigPaths(id).Dir },
		// The config dir keeps only the session transcripts:
		// projects/*/<uuid>.jsonl and the session folders beside them
		// (projects/*/<uuid>/: subagent transcripts, tool results). A
		// file can be put there, but it is read only as the agent's own
		// history. Settings, hooks, memory, skills, agents and commands
		// anyone wrote there go.
		Homes: []agentcli.Home{{Dir: "config", Keep: []string{"projects/*/" + uuidGlob + ".jsonl", "projects/*/" + uuidGlob}}},
		// The session id is the chat's (SessionID): the CLI resumes it
		// when its transcript is there.
		RunFiles: []string{SystemPromptFile},
		Lines:    lineOptions(DefaultMaxEventContent),
	}
}

// runInput is the part of a request preparation needs.
type runInput struct {
	assistant *assistant.Assistant
	// forkedFrom are the sessions the chat's fork may go on from
	// (executor.Request.ForkedFrom's chats', the parent's first).
	forkedFrom []string
	extraMCP   map[string]assistant.MCPServer
	skills     []*skills.Skill
	system     string
	history    []chat.Message
	sessionID  string
	relay      string
	mcpEnv     map[string]string // executor.Request.MCPServerEnv
}

// Prepare implements agentcli.CLI. The command is the same whether the
// CLI is kept or not: it reads stream-json messages on stdin.
func (c cli) Prepare(ctx context.Context, p *agentcli.Prepared) (*agentcli.Plan, error) {
	args := p.Arguments
	maxTurns := args.MaxTurns
	if maxTurns <= 0 {
		maxTurns = c.opts.DefaultMaxTurns
	}
	permMode := args.PermissionMode
	if permMode == "" {
		permMode = DefaultPermissionMode
	}
	if p.PermissionPromptTool != "" && permMode == "bypassPermissions" {
		// Bypassing asks nothing: with a prompt tool the CLI asks it
		// before each tool that is not read-only, as its default mode does.
		permMode = "default"
	}
	if !permissionModes[permMode] {
		return nil, agentcli.Invalid("permission_mode %q is not one of acceptEdits, auto, bypassPermissions, default, dontAsk, plan", permMode)
	}
	in := &runInput{
		assistant: p.Assistant,
		extraMCP:  p.MCPServers,
		skills:    p.Assistant.Skills,
		system:    p.System,
		history:   p.History,
		sessionID: SessionID(p.Assistant.ID, p.UserID, p.ChatID),
		relay:     p.Relay,
		mcpEnv:    p.MCPServerEnv,
	}
	for _, from := range p.ForkedFrom {
		in.forkedFrom = append(in.forkedFrom, SessionID(p.Assistant.ID, p.UserID, from))
	}
	prep, err := prepare(ctx, p.Sandbox.Workspace(), in)
	if err != nil {
		return nil, err
	}
	cmd, err := c.buildCommand(p.Request, prep, maxTurns, permMode, p.Model)
	if err != nil {
		return nil, agentcli.Invalid("%s", err.Error())
	}
	if p.Keep {
		// A kept CLI prints each message back as it takes it: how the
		// parser knows a message sent into a running turn was taken
		// (Parser.Say).
		cmd.argv = append(cmd.argv, "--replay-user-messages")
	}
	names := make([]string, 0, len(in.skills))
	for _, s := range in.skills {
		names = append(names, s.Name)
	}
	return &agentcli.Plan{
		Argv: cmd.argv, Env: cmd.env,
		// Input stays open while the CLI works: 2.1.197 stops its
		// background commands and subagents when its input ends.
		Input: cmd.stdin, HoldInput: true,
		MCP: prep.mcp.all, Skills: names, Remove: []string{SystemPromptFile},
		MaxTurns: maxTurns, Model: p.Model, PermissionMode: permMode, SessionID: prep.sessionID,
	}, nil
}

// NewParser implements agentcli.CLI.
func (c cli) NewParser(emit chat.EmitFunc, plan *agentcli.Plan, m agentcli.Monitor) agentcli.Parser {
	return NewParser(emit, ParserOptions{
		MaxTurns:         plan.MaxTurns,
		FailureThreshold: plan.FailureThreshold,
		Skills:           plan.Skills,
		MaxRetryWait:     c.opts.MaxRetryWait,
		MaxAPIRetries:    max(c.opts.APIRetries, 0),
		Monitor:          m,
	})
}

// NextMessage implements agentcli.Keeper: the kept CLI reads the turn's
// messages as a stream-json user line and prints its init line on
// reading it (the driver's liveness check, Options.AckWait).
func (cli) NextMessage(next agentcli.Next) ([]byte, error) {
	return inputLines(next.Input, next.Vision)
}
