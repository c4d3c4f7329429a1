// Package cursor runs chat turns with the Cursor CLI (cursor-agent) inside
// a chat's sandbox: it prepares the workspace (.cursor/mcp.json, the
// assistant's skills and rules, a per-chat config dir and home emptied but
// for the CLI's chats, and the session file),
// starts `cursor-agent --print --output-format stream-json` and maps every
// line the CLI prints to chat events.
//
// The stream parser (Parser) is independent of the executor and works on
// any io.Reader, so transcripts can be replayed through it. The event
// format follows https://cursor.com/docs/cli/reference/output-format.
package cursor

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// Defaults for Options.
const (
	DefaultBinary      = "cursor-agent"
	DefaultGracePeriod = 3 * time.Second
	// DefaultInlinePrompt is the largest input passed on the command line;
	// larger input goes to PromptFile (Linux caps one argument at 128 KiB).
	DefaultInlinePrompt = 32 << 10
)

// Options configure an Executor. The zero value is usable.
type Options struct {
	// Binary is the CLI inside the sandbox ("cursor-agent", found on PATH;
	// current releases install it as "agent" too).
	Binary string
	// GracePeriod is how long the CLI may keep running after it printed
	// its result before it is killed.
	GracePeriod time.Duration
	// InlinePrompt is the largest input put on the command line
	// (DefaultInlinePrompt when 0); larger input, and any input that needs
	// the conversation history, goes through PromptFile.
	InlinePrompt int
	// Env is added to the CLI's environment.
	Env map[string]string
	// Logger receives run diagnostics (never secrets). Nil: slog.Default.
	Logger *slog.Logger
}

// Executor runs turns with the Cursor CLI (the driver, agentcli.Executor,
// filled with cli). It is safe for concurrent use.
type Executor = agentcli.Executor

// New returns an executor with opts, defaults filled in. It has no side
// effects.
func New(opts Options) *Executor {
	c := newCLI(opts)
	// The CLI prints nothing while the model thinks: no idle watchdog.
	return agentcli.New(c, agentcli.Options{Binary: c.opts.Binary, GracePeriod: c.opts.GracePeriod, IdleTimeout: -1, Logger: c.opts.Logger})
}

// newCLI returns the cli of opts, defaults filled in.
func newCLI(opts Options) cli {
	if opts.Binary == "" {
		opts.Binary = DefaultBinary
	}
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.InlinePrompt <= 0 {
		opts.InlinePrompt = DefaultInlinePrompt
	}
	return cli{opts}
}

// cli is what is the Cursor CLI's own: its command and configuration,
// its stream.
type cli struct{ opts Options }

func (cli) Profile() agentcli.Profile {
	return agentcli.Profile{
		Name: "cursor", Program: "cursor-agent", ErrorID: "cu-error",
		State: func(string) string { return StateDir },
		// What the CLI reads from its config dir and home (its
		// cli-config.json with the permissions, MCP servers and hooks of
		// the user level) comes from the assistant only: both are
		// emptied but for the chats.
		Homes: []agentcli.Home{
			{Dir: strings.TrimPrefix(ConfigDir, StateDir+"/"), Keep: []string{"chats/**"}},
			{Dir: strings.TrimPrefix(HomeDir, StateDir+"/"), Keep: []string{".cursor/chats/**"}},
		},
		Sessions: true,
		RunFiles: []string{PromptFile},
		Lines:    lineOptions(DefaultMaxEventContent),
	}
}

// Prepare implements agentcli.CLI.
func (c cli) Prepare(ctx context.Context, p *agentcli.Prepared) (*agentcli.Plan, error) {
	if p.Connector.Key == "" {
		return nil, &chat.Error{Code: chat.ErrAuth, Message: "the connector has no key: cursor-agent needs a Cursor API key (CURSOR_API_KEY)"}
	}
	args := p.Arguments
	mode, ok := modes[args.PermissionMode]
	if !ok {
		return nil, agentcli.Invalid("permission_mode %q is not one the cursor command knows (default, agent, plan, ask, or claude's acceptEdits, auto, bypassPermissions, dontAsk)", args.PermissionMode)
	}
	in := &runInput{
		assistant: p.Assistant,
		chatID:    p.ChatID,
		extraMCP:  p.MCPServers,
		args:      args,
		system:    p.System,
		history:   p.History,
		input:     p.Input,
		inlineMax: c.opts.InlinePrompt,
		relay:     p.Relay,
		mcpEnv:    p.MCPServerEnv,
		resume:    p.Resume,
	}
	prep, err := prepare(ctx, p.Sandbox.Workspace(), in)
	if err != nil {
		var ae *argError
		if errors.As(err, &ae) {
			return nil, agentcli.Invalid("%s", err.Error())
		}
		return nil, err
	}
	if len(prep.mcp.Filtered) > 0 {
		c.opts.logger().Debug("mcp servers behind the tool filter", "assistant", p.Assistant.ID, "chat", p.ChatID, "servers", prep.mcp.Filtered)
	}
	names := make([]string, 0, len(p.Assistant.Skills))
	for _, s := range p.Assistant.Skills {
		names = append(names, s.Name)
	}
	cmd := c.buildCommand(p.Request, prep, mode, p.Model)
	return &agentcli.Plan{Argv: cmd.argv, Env: cmd.env, MCP: prep.mcp.all, Skills: names, Remove: []string{PromptFile},
		Model: p.Model, PermissionMode: args.PermissionMode}, nil
}

// NewParser implements agentcli.CLI.
func (cli) NewParser(emit chat.EmitFunc, plan *agentcli.Plan, m agentcli.Monitor) agentcli.Parser {
	return NewParser(emit, ParserOptions{Skills: plan.Skills, MCPServers: plan.MCP.Names(),
		FailureThreshold: plan.FailureThreshold, Monitor: m})
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}
