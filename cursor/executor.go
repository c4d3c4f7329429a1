// Package cursor runs chat turns with the Cursor CLI (cursor-agent) inside
// a chat's sandbox: it prepares the workspace (.cursor/mcp.json, the
// assistant's skills and rules, a per-chat config dir and session file),
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
	"io"
	"log/slog"
	"sync"
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
	// drainWait bounds how long the run waits for the output streams to end
	// after the process exited or was killed.
	drainWait = 5 * time.Second
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
	// LookupEnv resolves $ENV.NAME in MCP definitions (os.LookupEnv when
	// nil).
	LookupEnv func(string) (string, bool)
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
	if opts.LookupEnv == nil {
		opts.LookupEnv = osLookup
	}
	return &Executor{opts: opts}
}

// Name returns "cursor".
func (e *Executor) Name() string { return "cursor" }

// Run executes one turn (see executor.Executor). Events go to req.Emit
// from the run only: Run never emits after it returns.
func (e *Executor) Run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	emit, closeEmit := agentcli.SerialEmit(req.Emit)
	defer closeEmit()
	fail := func(code, msg string, err error) (*executor.Result, error) {
		chat.ErrorEvent(emit, "cu-error", code, msg)
		return nil, &executor.Error{Code: code, Message: msg, Err: err}
	}
	if req.Sandbox == nil || req.Sandbox.Workspace() == nil {
		return fail(chat.ErrInternal, "cursor executor: request has no sandbox", nil)
	}
	if req.Assistant == nil {
		return fail(chat.ErrInternal, "cursor executor: request has no assistant", nil)
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
	}
	prep, err := prepare(ws, in, e.opts.LookupEnv)
	if err != nil {
		var ae *argError
		if errors.As(err, &ae) {
			return fail(chat.ErrInvalidRequest, err.Error(), err)
		}
		return fail(chat.ErrSandbox, "prepare workspace: "+err.Error(), err)
	}
	defer func() { _ = ws.RemoveAll(PromptFile) }()
	cmd := e.buildCommand(req, prep, mode, model)
	argv := cmd.argv
	if req.WrapArgv != nil {
		argv = req.WrapArgv(argv)
	}
	log := e.opts.Logger.With("assistant", req.Assistant.ID, "chat", req.ChatID)
	log.Debug("cursor run", "resume", prep.resume, "mode", mode, "model", model,
		"mcp_servers", prep.mcp.Servers, "prompt_file", prep.promptFile, "max_turns_ignored", args.MaxTurns)
	if len(prep.mcp.Limited) > 0 {
		log.Warn("cursor-agent exposes every tool of an MCP server; the tool lists of these servers are not enforced", "servers", prep.mcp.Limited)
	}

	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	started := time.Now()
	proc, err := req.Sandbox.Start(runCtx, sandbox.ExecRequest{Argv: argv, Env: cmd.env})
	if err != nil {
		if code, msg, ok := ctxFailure(ctx, runCtx, req.Timeout); ok {
			return fail(code, msg, err)
		}
		return fail(chat.ErrSandbox, "start cursor-agent: "+err.Error(), err)
	}

	skillNames := make([]string, 0, len(req.Assistant.Skills))
	for _, s := range req.Assistant.Skills {
		skillNames = append(skillNames, s.Name)
	}
	resultSeen := make(chan struct{})
	var resultOnce sync.Once
	parser := NewParser(emit, ParserOptions{
		Skills:     skillNames,
		MCPServers: prep.mcp.Servers,
		OnResult:   func() { resultOnce.Do(func() { close(resultSeen) }) },
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
			// will not exit, a background command) must not hold the request.
			log.Debug("cursor-agent still running after its result; stopping it")
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

	res := &executor.Result{
		Content:   out.Content,
		SessionID: out.SessionID,
		Usage:     out.Usage,
		ToolCalls: out.ToolCalls,
		Notices:   out.Notices,
	}
	if res.SessionID == "" {
		res.SessionID = prep.resume
	}
	if res.Usage.DurationMS == 0 {
		res.Usage.DurationMS = time.Since(started).Milliseconds()
	}
	log.Debug("cursor done", "exit", wr.code, "result", out.GotResult, "subtype", out.Subtype,
		"lines", out.Lines, "skipped", out.Skipped, "repeated_bytes", out.RepeatedBytes, "killed", killed)

	tail := agentcli.Redact(stderr.String(), secretsOf(req, prep))
	var runErr *executor.Error
	switch {
	case out.Err != nil:
		// The CLI reported the failure itself; its error event is out.
		out.Err.StderrTail = tail
		runErr = out.Err
	case wr.err != nil && !(killed && out.GotResult):
		code, msg := chat.ErrSandbox, "cursor-agent: "+wr.err.Error()
		if c, m, ok := ctxFailure(ctx, runCtx, req.Timeout); ok {
			code, msg = c, m
		} else if errors.Is(wr.err, sandbox.ErrExecTimeout) {
			code, msg = chat.ErrTimeout, fmt.Sprintf("cursor-agent ran longer than its timeout (%s) and was stopped", req.Timeout)
		}
		runErr = &executor.Error{Code: code, Message: msg, StderrTail: tail, Err: wr.err}
	case !out.GotResult:
		// The documented failure shape: a non-zero exit, the stream cut
		// short without a result, the reason on stderr.
		msg := fmt.Sprintf("cursor-agent exited with code %d without a result", wr.code)
		if parseErr != nil {
			msg += " (" + parseErr.Error() + ")"
		}
		code := chat.ErrExecutor
		if tail != "" {
			msg += ": " + agentcli.LastLine(tail)
			code = classify(tail)
		}
		runErr = &executor.Error{Code: code, Message: msg, StderrTail: tail}
	case wr.code != 0 && !killed:
		msg := fmt.Sprintf("cursor-agent exited with code %d after its result", wr.code)
		if tail != "" {
			msg += ": " + agentcli.LastLine(tail)
		}
		runErr = &executor.Error{Code: chat.ErrExecutor, Message: msg, StderrTail: tail}
	}
	if runErr != nil {
		if runErr != out.Err {
			chat.ErrorEvent(emit, "cu-error", runErr.Code, runErr.Message)
		}
		return res, runErr
	}
	if out.SessionID != "" {
		if err := writeSession(ws, session{AssistantID: req.Assistant.ID, ChatID: req.ChatID, SessionID: out.SessionID}); err != nil {
			// The answer stands; the next turn starts a new chat with the
			// history in its prompt instead of resuming.
			log.Warn("cursor session not saved", "err", err)
		}
	}
	return res, nil
}

// ctxFailure classifies a run stopped by its contexts.
func ctxFailure(parent, run context.Context, timeout time.Duration) (code, msg string, ok bool) {
	switch {
	case parent.Err() != nil:
		if errors.Is(parent.Err(), context.DeadlineExceeded) {
			return chat.ErrTimeout, "the request deadline passed; cursor-agent was stopped", true
		}
		return chat.ErrCanceled, "the request was canceled; cursor-agent was stopped", true
	case run.Err() != nil:
		return chat.ErrTimeout, fmt.Sprintf("cursor-agent ran longer than the sandbox timeout (%s) and was stopped", timeout), true
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
