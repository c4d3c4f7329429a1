// Package claude runs chat turns with the Claude Code CLI inside a chat's
// sandbox: it prepares the workspace (.mcp.json, .claude/skills, a per-chat
// config dir that keeps sessions), starts `claude -p` with stream-json input
// and output, and maps every line the CLI prints to chat events.
//
// The stream parser (Parser) is independent of the executor and works on
// any io.Reader, so recorded transcripts can be replayed through it.
package claude

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
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
	DefaultGracePeriod = 3 * time.Second
	// drainWait bounds how long the run waits for the output streams to end
	// after the process exited or was killed.
	drainWait = 5 * time.Second
)

// Options configure an Executor. The zero value is usable.
type Options struct {
	// Binary is the CLI inside the sandbox ("claude", found on PATH).
	Binary string
	// DefaultMaxTurns applies when the assistant sets no max_turns.
	DefaultMaxTurns int
	// GracePeriod is how long the CLI may keep running after it printed
	// its result before it is killed.
	GracePeriod time.Duration
	// Env is added to the CLI's environment (CLAUDECODE and CLAUDE_CODE_*
	// entries are dropped).
	Env map[string]string
	// NoEnvFilter turns off the removal of CLAUDECODE and CLAUDE_CODE_*
	// variables the sandbox itself carries (done by starting the CLI
	// through /bin/sh and sed; turn it off for sandboxes without them).
	NoEnvFilter bool
	// Logger receives run diagnostics (never secrets). Nil: slog.Default.
	Logger *slog.Logger
	// LookupEnv resolves $ENV.NAME in MCP definitions (os.LookupEnv when
	// nil).
	LookupEnv func(string) (string, bool)
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
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = osLookup
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
}

// Run executes one turn (see executor.Executor). Events go to req.Emit from
// the calling goroutine's run only: Run never emits after it returns.
func (e *Executor) Run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	emit, closeEmit := agentcli.SerialEmit(req.Emit)
	defer closeEmit()
	fail := func(code, msg string, err error) (*executor.Result, error) {
		chat.ErrorEvent(emit, "cc-error", code, msg)
		return nil, &executor.Error{Code: code, Message: msg, Err: err}
	}
	if req.Sandbox == nil || req.Sandbox.Workspace() == nil {
		return fail(chat.ErrInternal, "claude executor: request has no sandbox", nil)
	}
	if req.Assistant == nil {
		return fail(chat.ErrInternal, "claude executor: request has no assistant", nil)
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

	ws := req.Sandbox.Workspace()
	in := &runInput{
		assistant: req.Assistant,
		extraMCP:  req.MCPServers,
		skills:    req.Assistant.Skills,
		system:    req.System,
		history:   req.History,
		sessionID: SessionID(req.Assistant.ID, req.UserID, req.ChatID),
	}
	prep, err := prepare(ws, in, e.opts.LookupEnv)
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

	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	argv := cmd.argv
	if req.WrapArgv != nil {
		argv = req.WrapArgv(argv)
	}
	started := time.Now()
	proc, err := req.Sandbox.Start(runCtx, sandbox.ExecRequest{
		Argv:  argv,
		Env:   cmd.env,
		Stdin: bytes.NewReader(cmd.stdin),
	})
	if err != nil {
		if code, msg, ok := ctxFailure(ctx, runCtx, req.Timeout); ok {
			return fail(code, msg, err)
		}
		return fail(chat.ErrSandbox, "start claude: "+err.Error(), err)
	}

	skillNames := make([]string, 0, len(in.skills))
	for _, s := range in.skills {
		skillNames = append(skillNames, s.Name)
	}
	resultSeen := make(chan struct{})
	var resultOnce sync.Once
	parser := NewParser(emit, ParserOptions{
		MaxTurns: maxTurns,
		Skills:   skillNames,
		OnResult: func() { resultOnce.Do(func() { close(resultSeen) }) },
	})
	parseDone := make(chan error, 1)
	go func() { parseDone <- parser.Parse(proc.Stdout()) }()
	stderr := agentcli.NewRing(agentcli.StderrTail)
	stderrDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(stderr, proc.Stderr())
		close(stderrDone)
	}()
	type waitRes struct {
		code int
		err  error
	}
	waitDone := make(chan waitRes, 1)
	go func() {
		c, err := proc.Wait(runCtx)
		waitDone <- waitRes{c, err}
	}()

	var (
		wr     waitRes
		killed bool
	)
	grace := (<-chan time.Time)(nil)
	for done := false; !done; {
		select {
		case wr = <-waitDone:
			done = true
		case <-resultSeen:
			resultSeen = nil
			t := time.NewTimer(e.opts.GracePeriod)
			defer t.Stop()
			grace = t.C
		case <-grace:
			// The answer is complete; a CLI that lingers (an MCP server that
			// will not exit, a stuck hook) must not hold the request.
			log.Debug("claude still running after its result; stopping it")
			killed = true
			_ = proc.Kill()
			grace = nil
		}
	}
	// Wait for the parser to see the end of the output, bounded: a process
	// left behind by the CLI could hold the pipe open.
	parseErr := error(nil)
	select {
	case parseErr = <-parseDone:
	case <-time.After(drainWait):
		_ = proc.Kill()
		parseErr = errors.New("output did not end after the process exited")
	}
	select {
	case <-stderrDone:
	case <-time.After(200 * time.Millisecond):
	}
	out := parser.Close()
	_ = ws.RemoveAll(SystemPromptFile)

	res := &executor.Result{
		Content:   out.Content,
		SessionID: out.SessionID,
		Usage:     out.Usage,
		ToolCalls: out.ToolCalls,
		Notices:   out.Notices,
	}
	if res.SessionID == "" {
		res.SessionID = prep.sessionID
	}
	if res.Usage.DurationMS == 0 {
		res.Usage.DurationMS = time.Since(started).Milliseconds()
	}
	log.Debug("claude done", "exit", wr.code, "result", out.GotResult, "subtype", out.Subtype,
		"turns", res.Usage.Turns, "lines", out.Lines, "skipped", out.Skipped, "killed", killed)

	tail := agentcli.Redact(stderr.String(), secretsOf(req, prep))
	switch {
	case out.Err != nil:
		// The CLI reported the failure itself; its error event is out.
		out.Err.StderrTail = tail
		return res, out.Err
	case wr.err != nil && !(killed && out.GotResult):
		if code, msg, ok := ctxFailure(ctx, runCtx, req.Timeout); ok {
			chat.ErrorEvent(emit, "cc-error", code, msg)
			return res, &executor.Error{Code: code, Message: msg, StderrTail: tail, Err: wr.err}
		}
		if errors.Is(wr.err, sandbox.ErrExecTimeout) {
			msg := fmt.Sprintf("claude ran longer than its timeout (%s) and was stopped", req.Timeout)
			chat.ErrorEvent(emit, "cc-error", chat.ErrTimeout, msg)
			return res, &executor.Error{Code: chat.ErrTimeout, Message: msg, StderrTail: tail, Err: wr.err}
		}
		msg := "claude: " + wr.err.Error()
		chat.ErrorEvent(emit, "cc-error", chat.ErrSandbox, msg)
		return res, &executor.Error{Code: chat.ErrSandbox, Message: msg, StderrTail: tail, Err: wr.err}
	case !out.GotResult:
		msg := fmt.Sprintf("claude exited with code %d without a result", wr.code)
		if parseErr != nil {
			msg += " (" + parseErr.Error() + ")"
		}
		code := chat.ErrExecutor
		if out.APIErrorStatus != 0 {
			code = errorCode("", out.APIErrorStatus)
			msg += fmt.Sprintf("; the model API last answered HTTP %d", out.APIErrorStatus)
		}
		if tail != "" {
			msg += ": " + agentcli.LastLine(tail)
		}
		chat.ErrorEvent(emit, "cc-error", code, msg)
		return res, &executor.Error{Code: code, Message: msg, StderrTail: tail}
	case wr.code != 0 && !killed:
		msg := fmt.Sprintf("claude exited with code %d after its result", wr.code)
		if tail != "" {
			msg += ": " + agentcli.LastLine(tail)
		}
		chat.ErrorEvent(emit, "cc-error", chat.ErrExecutor, msg)
		return res, &executor.Error{Code: chat.ErrExecutor, Message: msg, StderrTail: tail}
	}
	return res, nil
}

// ctxFailure classifies a run stopped by its contexts.
func ctxFailure(parent, run context.Context, timeout time.Duration) (code, msg string, ok bool) {
	switch {
	case parent.Err() != nil:
		if errors.Is(parent.Err(), context.DeadlineExceeded) {
			return chat.ErrTimeout, "the request deadline passed; claude was stopped", true
		}
		return chat.ErrCanceled, "the request was canceled; claude was stopped", true
	case run.Err() != nil:
		return chat.ErrTimeout, fmt.Sprintf("claude ran longer than the sandbox timeout (%s) and was stopped", timeout), true
	}
	return "", "", false
}

// secretsOf lists the values that must never appear in events or errors.
func secretsOf(req *executor.Request, p *prepared) []string {
	var out []string
	if len(req.Connector.Key) >= 4 {
		out = append(out, req.Connector.Key)
	}
	for _, v := range p.mcp.Env {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	return out
}
