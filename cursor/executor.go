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
	"fmt"
	"log/slog"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
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

// Executor runs turns with the Cursor CLI. It is safe for concurrent use;
// runs share nothing but the options.
type Executor struct {
	opts Options
}

var _ executor.Executor = (*Executor)(nil)

// New returns an executor with opts, defaults filled in. It has no side
// effects.
func New(opts Options) *Executor {
	if opts.Binary == "" {
		opts.Binary = DefaultBinary
	}
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.InlinePrompt <= 0 {
		opts.InlinePrompt = DefaultInlinePrompt
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Executor{opts: opts}
}

// Name returns "cursor".
func (e *Executor) Name() string { return "cursor" }

// Run executes one turn (see executor.Executor). Events go to req.Emit
// from the run only: Run never emits after it returns.
func (e *Executor) Run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	turn := agentcli.NewTurn(req.Emit, "cu-error")
	defer turn.End()
	emit, fail := turn.Emit, turn.Fail
	if err := turn.Check(req, "cursor executor"); err != nil {
		return nil, err
	}
	if len(req.Input) == 0 {
		return fail(chat.ErrInvalidRequest, "no input message: a turn needs at least one user message", nil)
	}
	if req.Connector.Key == "" {
		return fail(chat.ErrAuth, "the connector has no key: cursor-agent needs a Cursor API key (CURSOR_API_KEY)", nil)
	}
	args := req.Arguments
	mode, ok := modes[args.PermissionMode]
	if !ok {
		return fail(chat.ErrInvalidRequest, fmt.Sprintf("permission_mode %q is not one the cursor command knows (default, agent, plan, ask, or claude's acceptEdits, auto, bypassPermissions, dontAsk)", args.PermissionMode), nil)
	}
	model := args.Model
	if model == "" {
		model = req.Connector.Model
	}

	ws := req.Sandbox.Workspace()
	in := &runInput{
		assistant: req.Assistant,
		chatID:    req.ChatID,
		extraMCP:  req.MCPServers,
		args:      args,
		system:    req.System,
		history:   req.History,
		input:     req.Input,
		inlineMax: e.opts.InlinePrompt,
		relay:     req.Relay,
		mcpEnv:    req.MCPServerEnv,
	}
	prep, err := prepare(ctx, ws, in)
	if err != nil {
		var ae *argError
		if errors.As(err, &ae) {
			return fail(chat.ErrInvalidRequest, err.Error(), err)
		}
		return fail(chat.ErrSandbox, "prepare workspace: "+err.Error(), err)
	}
	defer func() { _ = ws.RemoveAll(context.WithoutCancel(ctx), PromptFile) }()
	cmd := e.buildCommand(req, prep, mode, model)
	argv := cmd.argv
	if req.WrapArgv != nil {
		argv = req.WrapArgv(argv)
	}
	log := e.opts.Logger.With("assistant", req.Assistant.ID, "chat", req.ChatID)
	log.Debug("cursor run", "resume", prep.resume, "mode", mode, "model", model,
		"mcp_servers", prep.mcp.Servers, "prompt_file", prep.promptFile, "max_turns_ignored", args.MaxTurns)
	if len(prep.mcp.Filtered) > 0 {
		log.Debug("mcp servers behind the tool filter", "servers", prep.mcp.Filtered)
	}

	run, xe := agentcli.Start(ctx, agentcli.Spec{
		CLI: "cursor-agent", ErrorID: "cu-error", Emit: emit,
		Sandbox: req.Sandbox,
		Exec:    sandbox.ExecRequest{Argv: argv, Env: cmd.env},
		Timeout: req.Timeout, GracePeriod: e.opts.GracePeriod,
		Secrets: agentcli.Secrets(req.Connector.Key, prep.mcp.Env), Logger: log,
	})
	if xe != nil {
		return fail(xe.Code, xe.Message, xe.Err)
	}

	skillNames := make([]string, 0, len(req.Assistant.Skills))
	for _, s := range req.Assistant.Skills {
		skillNames = append(skillNames, s.Name)
	}
	parser := NewParser(emit, ParserOptions{
		Skills:           skillNames,
		MCPServers:       prep.mcp.Servers,
		FailureThreshold: executor.FailureThreshold(req.Assistant),
		Monitor:          run,
	})
	exit := run.Wait(parser.Parse)
	out := parser.Close()

	res := out.Result(prep.resume, exit.Started)
	res.Notices = append(res.Notices, exit.Notices...)
	log.Debug("cursor done", "exit", exit.Code, "result", out.GotResult, "subtype", out.Subtype,
		"lines", out.Lines, "skipped", out.Skipped, "repeated_bytes", out.RepeatedBytes, "killed", exit.Killed)

	if xe := exit.Failure(agentcli.Parsed{GotResult: out.GotResult, Err: out.Err, NoResult: func(tail string) (string, string) {
		// The documented failure shape: a non-zero exit, the stream cut
		// short without a result, the reason on stderr. The CLI reports
		// no status codes, so the words on stderr give the code.
		if tail == "" {
			return chat.ErrExecutor, ""
		}
		return classify(tail), ""
	}}); xe != nil {
		return res, xe
	}
	if out.SessionID != "" {
		if err := writeSession(context.WithoutCancel(ctx), ws, session{AssistantID: req.Assistant.ID, ChatID: req.ChatID, SessionID: out.SessionID}); err != nil {
			// The answer stands; the next turn starts a new chat with the
			// history in its prompt instead of resuming.
			log.Warn("cursor session not saved", "err", err)
		}
	}
	return res, nil
}
