package claude

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
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

// Executor runs turns with the Claude Code CLI. It is safe for concurrent
// use; runs share nothing but the options.
type Executor struct {
	opts Options
}

var _ executor.Executor = (*Executor)(nil)

// New returns an executor with opts, defaults filled in.
func New(opts Options) *Executor {
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
	return &Executor{opts: opts}
}

// Name returns "claude".
func (e *Executor) Name() string { return "claude" }

// runInput is the part of a request preparation needs.
type runInput struct {
	assistant *assistant.Assistant
	extraMCP  map[string]assistant.MCPServer
	skills    []*skills.Skill
	system    string
	history   []chat.Message
	sessionID string
	relay     string
	mcpEnv    map[string]string // executor.Request.MCPServerEnv
}

// Run executes one turn (see executor.Executor). Events go to req.Emit from
// the calling goroutine's run only: Run never emits after it returns.
func (e *Executor) Run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	turn := agentcli.NewTurn(req.Emit, "cc-error")
	defer turn.End()
	emit, fail := turn.Emit, turn.Fail
	if err := turn.Check(req, "claude executor"); err != nil {
		return nil, err
	}
	args := req.Arguments
	maxTurns := args.MaxTurns
	if maxTurns <= 0 {
		maxTurns = e.opts.DefaultMaxTurns
	}
	permMode := args.PermissionMode
	if permMode == "" {
		permMode = DefaultPermissionMode
	}
	if !permissionModes[permMode] {
		return fail(chat.ErrInvalidRequest, fmt.Sprintf("permission_mode %q is not one of acceptEdits, auto, bypassPermissions, default, dontAsk, plan", permMode), nil)
	}
	model := args.Model
	if model == "" {
		model = req.Connector.Model
	}
	if len(req.Input) == 0 {
		return fail(chat.ErrInvalidRequest, "no input message: a turn needs at least one user message", nil)
	}

	key := warmKey(req, maxTurns, permMode, model)
	if w, ok := req.Warm.(*warmCLI); ok && w.Alive() && w.key == key {
		// The chat's kept CLI takes the turn: it has the session and its
		// configuration; nothing is prepared again.
		input, err := inputLines(req.Input)
		if err != nil {
			return fail(chat.ErrInvalidRequest, err.Error(), err)
		}
		res, err := e.runWarm(ctx, req, w, turn, input, e.parserOptions(maxTurns, req.Assistant.Skills), w.session, false)
		if !errors.Is(err, errWarmHung) {
			return res, err
		}
		// Hung (and stopped): a new CLI resumes the session and takes the
		// turn, which emitted nothing.
		e.opts.Logger.Warn("claude kept for the chat is hung and restarted", "assistant", req.Assistant.ID, "chat", req.ChatID)
	} else if req.Warm != nil {
		e.opts.Logger.Info("claude kept for the chat is restarted", "assistant", req.Assistant.ID, "chat", req.ChatID,
			"alive", req.Warm.Alive(), "changed", ok && w.key != key)
		// Closed before the new one starts: it ends its session (a
		// transcript the new one resumes).
		req.Warm.Close()
	}

	ws := req.Sandbox.Workspace()
	in := &runInput{
		assistant: req.Assistant,
		extraMCP:  req.MCPServers,
		skills:    req.Assistant.Skills,
		system:    req.System,
		history:   req.History,
		sessionID: SessionID(req.Assistant.ID, req.UserID, req.ChatID),
		relay:     req.Relay,
		mcpEnv:    req.MCPServerEnv,
	}
	prep, err := prepare(ctx, ws, in)
	if err != nil {
		return fail(chat.ErrSandbox, "prepare workspace: "+err.Error(), err)
	}
	cmd, err := e.buildCommand(req, prep, maxTurns, permMode, model)
	if err != nil {
		return fail(chat.ErrInvalidRequest, err.Error(), err)
	}
	log := e.opts.Logger.With("assistant", req.Assistant.ID, "chat", req.ChatID, "session", prep.sessionID)
	log.Debug("claude run", "resume", prep.resume, "max_turns", maxTurns, "permission_mode", permMode,
		"model", model, "mcp_servers", prep.mcp.Servers, "input_bytes", len(cmd.stdin))

	argv := cmd.argv
	if req.WrapArgv != nil {
		argv = req.WrapArgv(argv)
	}
	if req.KeepAlive {
		w, err := startWarm(ctx, req.Sandbox, sandbox.ExecRequest{Argv: argv, Env: cmd.env}, key, prep.sessionID,
			agentcli.Secrets(req.Connector.Key, prep.mcp.Env), NewParser(nil, ParserOptions{}).LineOptions(), log)
		if err != nil {
			if ctx.Err() != nil {
				return fail(chat.ErrCanceled, "the request was canceled; claude was not started", err)
			}
			return fail(chat.ErrSandbox, "start claude: "+err.Error(), err)
		}
		log.Debug("claude started to be kept", "resume", prep.resume)
		return e.runWarm(ctx, req, w, turn, cmd.stdin, e.parserOptions(maxTurns, in.skills), prep.sessionID, true)
	}
	run, xe := agentcli.Start(ctx, agentcli.Spec{
		CLI: "claude", ErrorID: "cc-error", Emit: emit,
		Sandbox: req.Sandbox,
		Exec:    sandbox.ExecRequest{Argv: argv, Env: cmd.env},
		// Input stays open while the CLI works: 2.1.197 stops its
		// background commands and subagents when its input ends.
		Input: cmd.stdin, HoldInput: true,
		Timeout: req.Timeout, GracePeriod: e.opts.GracePeriod, IdleTimeout: max(e.opts.IdleTimeout, 0),
		Secrets: agentcli.Secrets(req.Connector.Key, prep.mcp.Env), Logger: log,
	})
	if xe != nil {
		return fail(xe.Code, xe.Message, xe.Err)
	}

	skillNames := make([]string, 0, len(in.skills))
	for _, s := range in.skills {
		skillNames = append(skillNames, s.Name)
	}
	parser := NewParser(emit, ParserOptions{
		MaxTurns:         maxTurns,
		FailureThreshold: executor.FailureThreshold(req.Assistant),
		Skills:           skillNames,
		MaxRetryWait:     e.opts.MaxRetryWait,
		MaxAPIRetries:    max(e.opts.APIRetries, 0),
		Monitor:          run,
	})
	exit := run.Wait(parser.Parse)
	out := parser.Close()
	_ = ws.RemoveAll(context.WithoutCancel(ctx), SystemPromptFile)

	res := out.Result(prep.sessionID, exit.Started)
	res.Notices = append(res.Notices, exit.Notices...)
	res.Timings = out.Timings
	res.Timings.Started = exit.Started
	log.Debug("claude done", "exit", exit.Code, "results", out.Results, "subtype", out.Subtype,
		"turns", res.Usage.Turns, "cost_usd", res.Usage.CostUSD, "tasks", out.Tasks, "tasks_left", out.TasksLeft,
		"lines", out.Lines, "skipped", out.Skipped, "dropped", out.Dropped, "unknown", out.Unknown,
		"discarded_bytes", out.Discarded, "killed", exit.Killed, "idle", exit.Idle)

	if xe := exit.Failure(agentcli.Parsed{GotResult: out.GotResult, Err: out.Err, NoResult: func(string) (string, string) {
		// The CLI reports the model API's last failure; without a result
		// it is the likeliest reason.
		if out.APIErrorStatus == 0 {
			return chat.ErrExecutor, ""
		}
		return errorCode("", out.APIErrorStatus, ""), fmt.Sprintf("the model API last answered HTTP %d", out.APIErrorStatus)
	}}); xe != nil {
		return res, xe
	}
	return res, nil
}

// parserOptions are a run's parser options.
func (e *Executor) parserOptions(maxTurns int, sk []*skills.Skill) ParserOptions {
	names := make([]string, 0, len(sk))
	for _, s := range sk {
		names = append(names, s.Name)
	}
	return ParserOptions{MaxTurns: maxTurns, Skills: names, MaxRetryWait: e.opts.MaxRetryWait, MaxAPIRetries: max(e.opts.APIRetries, 0)}
}
