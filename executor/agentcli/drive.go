package agentcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// This file runs one turn of a CLI whose executor only says how to start
// it and how to read its stream (Codex, Gemini CLI, opencode): the checks,
// the chat's CLI state in the workspace (StateDir, the session to resume),
// the start through the bridge, the watchdogs and the outcome.

// StateRoot holds the CLI state of every chat of a workspace, one folder
// per CLI and assistant (StateDir).
const StateRoot = ".agentbox"

// StateDir returns the workspace folder (relative to the workspace root)
// of an assistant's state for cli: its CLI home (HomeDir) and the session
// file. One assistant's sessions never reach another's run.
func StateDir(cli, assistantID string) string {
	return StateRoot + "/" + cli + "/assistants/" + FolderName(assistantID)
}

// HomeDir is the CLI's home in the assistant's state folder: its
// sessions, kept across turns, and the run's configuration, written on
// every run after everything but the sessions was removed (CLI.Keep).
func HomeDir(state string) string { return state + "/home" }

var safeFolder = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// folderNamespace seeds the folder names of ids that are not safe ones.
var folderNamespace = uuid.MustParse("8f0e4a52-61b3-4c1e-9a77-2f5d9c0b3e18")

// FolderName is id when it is a safe folder name, else a UUID v5 of it.
func FolderName(id string) string {
	if safeFolder.MatchString(id) {
		return id
	}
	return "id-" + uuid.NewSHA1(folderNamespace, []byte(id)).String()
}

// sessionPattern is what a session id read back from the workspace (which
// the agent can write) must look like to reach a command line.
var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// sessionFile is the content of a state folder's session.json.
type sessionFile struct {
	ChatID    string `json:"chat_id"`
	SessionID string `json:"session_id"`
}

// Plan is how a CLI runs one turn, as its executor prepared it.
type Plan struct {
	Argv []string
	Env  map[string]string
	// Input is written to the CLI's standard input (nil: none).
	Input []byte
	// MCP are the run's MCP servers (for the log, the session event and
	// the secrets to redact).
	MCP *MCPConfig
	// Skills are the skill names delivered to the workspace.
	Skills []string
	// Remove are workspace files the run removes when it ends.
	Remove []string
	// LogFile, when set, is a workspace file the CLI writes its log to:
	// read (its first MaxLogFile bytes) when the run ends and handed to a
	// StderrReader parser after the stderr tail; removed with Remove.
	LogFile string
	// MaxTurns is the turn limit the parser enforces (0: the CLI does).
	MaxTurns int
	// Model is the turn's model, for the session event.
	Model string
	// PermissionMode is the turn's permission_mode, for the parser's
	// messages about refused calls.
	PermissionMode string
}

// Prepared is what Drive gives an executor's Prepare: the request and the
// chat's state.
type Prepared struct {
	*executor.Request
	// State is the assistant's state folder (StateDir), created.
	State string
	// Home is the CLI's home (HomeDir): emptied but for the CLI's
	// sessions (CLI.Keep) before Prepare, which writes the run's
	// configuration into it.
	Home string
	// Resume is the session to resume ("" for a new chat: the history
	// then belongs in the prompt, see Prompt).
	Resume string
	// Model is the turn's model: the arguments' or the connector's.
	Model string
}

// StreamParser reads a CLI's stream (a Chat underneath).
type StreamParser interface {
	Parse(r io.Reader) error
	Close() *StreamOutcome
}

// StderrReader is a StreamParser that also reads the CLI's stderr tail
// (redacted), and its Plan.LogFile, once the run ended, before Close: for
// what a CLI reports only there, such as an MCP server that did not
// start.
type StderrReader interface {
	Stderr(tail string)
}

// MaxLogFile caps what a run reads of a CLI's Plan.LogFile.
const MaxLogFile = 4 << 20

// CLI is one coding-agent CLI as Drive runs it.
type CLI struct {
	// Name is the sandbox command ("codex"); ErrorID the prefix of the
	// ids of error events the run raises itself.
	Name, ErrorID string
	// Prepare checks the request's arguments (an *chat.Error with
	// chat.ErrInvalidRequest for one the CLI cannot honour), writes the
	// turn's files into the workspace and returns the plan.
	Prepare func(ctx context.Context, p *Prepared) (*Plan, error)
	// NewParser returns the stream parser of one run.
	NewParser func(emit chat.EmitFunc, plan *Plan, m Monitor) StreamParser
	// Keep are the files of the CLI's home its sessions are in (ResetHome
	// patterns): all the run resumes. Whatever else is there, anyone
	// may have written, so it goes before every run.
	Keep []string
	// GracePeriod, IdleTimeout: see Spec.
	GracePeriod, IdleTimeout time.Duration
	Logger                   *slog.Logger
}

// Drive runs one turn of cli (see executor.Executor.Run).
func Drive(ctx context.Context, req *executor.Request, cli CLI) (*executor.Result, error) {
	turn := NewTurn(req.Emit, cli.ErrorID)
	defer turn.End()
	emit, fail := turn.Emit, turn.Fail
	if err := turn.Check(req, cli.Name+" executor"); err != nil {
		return nil, err
	}
	if len(req.Input) == 0 {
		return fail(chat.ErrInvalidRequest, "no input message: a turn needs at least one user message", nil)
	}
	log := cli.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("assistant", req.Assistant.ID, "chat", req.ChatID, "cli", cli.Name)
	ws := req.Sandbox.Workspace()
	p := &Prepared{Request: req, State: StateDir(cli.Name, req.Assistant.ID), Model: req.Arguments.Model}
	p.Home = HomeDir(p.State)
	if p.Model == "" {
		p.Model = req.Connector.Model
	}
	// The home is in the state folder: this makes both.
	if err := ResetHome(ctx, ws, p.Home, cli.Keep...); err != nil {
		return fail(chat.ErrSandbox, "prepare workspace: "+err.Error(), err)
	}
	p.Resume = readSession(ctx, ws, p.State, req.ChatID)
	plan, err := cli.Prepare(ctx, p)
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) {
			return fail(ce.Code, ce.Message, err)
		}
		return fail(chat.ErrSandbox, "prepare workspace: "+err.Error(), err)
	}
	defer func() {
		for _, f := range append(plan.Remove, plan.LogFile) {
			if f == "" {
				continue
			}
			_ = ws.RemoveAll(context.WithoutCancel(ctx), f)
		}
	}()
	argv := plan.Argv
	if req.WrapArgv != nil {
		argv = req.WrapArgv(argv)
	}
	var mcpEnv map[string]string
	var servers []string
	if plan.MCP != nil {
		mcpEnv, servers = plan.MCP.Env, plan.MCP.Names()
	}
	env := GitEnv()
	for k, v := range mcpEnv {
		env[k] = v
	}
	for k, v := range plan.Env {
		env[k] = v
	}
	log.Debug(cli.Name+" run", "resume", p.Resume, "model", p.Model, "mcp_servers", servers, "max_turns", plan.MaxTurns)
	run, xe := Start(ctx, Spec{
		CLI: cli.Name, ErrorID: cli.ErrorID, Emit: emit,
		Sandbox: req.Sandbox,
		Exec:    sandbox.ExecRequest{Argv: argv, Env: env},
		Input:   plan.Input,
		Timeout: req.Timeout, GracePeriod: cli.GracePeriod, IdleTimeout: cli.IdleTimeout,
		Secrets: Secrets(req.Connector.Key, mcpEnv), Logger: log,
		FailureThreshold: executor.FailureThreshold(req.Assistant),
	})
	if xe != nil {
		return fail(xe.Code, xe.Message, xe.Err)
	}
	parser := cli.NewParser(emit, plan, run)
	exit := run.Wait(parser.Parse)
	if sr, ok := parser.(StderrReader); ok {
		text := exit.Stderr
		if plan.LogFile != "" {
			if f, err := ws.Open(context.WithoutCancel(ctx), plan.LogFile); err == nil {
				b, _ := io.ReadAll(io.LimitReader(f, MaxLogFile))
				f.Close()
				text += "\n" + Redact(string(b), Secrets(req.Connector.Key, mcpEnv))
			}
		}
		sr.Stderr(text)
	}
	out := parser.Close()
	if sr, ok := parser.(StderrReader); ok {
		sr.Stderr(exit.Stderr)
	}
	res := out.Result(p.Resume, exit.Started)
	res.Notices = append(res.Notices, exit.Notices...)
	log.Debug(cli.Name+" done", "exit", exit.Code, "result", out.GotResult, "subtype", out.Subtype,
		"lines", out.Lines, "skipped", out.Skipped, "killed", exit.Killed, "idle", exit.Idle)
	if xe := exit.Failure(Parsed{GotResult: out.GotResult, Err: out.Err, NoResult: func(tail string) (string, string) {
		if tail == "" {
			return chat.ErrExecutor, ""
		}
		return Classify(tail), ""
	}}); xe != nil {
		return res, xe
	}
	if out.SessionID != "" && out.SessionID != p.Resume {
		if err := writeSession(context.WithoutCancel(ctx), ws, p.State, req.ChatID, out.SessionID); err != nil {
			// The answer stands; the next turn starts a new session with
			// the history in its prompt.
			log.Warn(cli.Name+" session not saved", "err", err)
		}
	}
	return res, nil
}

func readSession(ctx context.Context, ws *sandbox.Workspace, state, chatID string) string {
	b, err := ws.ReadFile(ctx, state+"/session.json", 64<<10)
	if err != nil {
		return ""
	}
	var s sessionFile
	if json.Unmarshal(b, &s) != nil || s.ChatID != chatID || !sessionPattern.MatchString(s.SessionID) {
		return ""
	}
	return s.SessionID
}

func writeSession(ctx context.Context, ws *sandbox.Workspace, state, chatID, id string) error {
	if !sessionPattern.MatchString(id) {
		return fmt.Errorf("session id %q is not one to keep", id)
	}
	b, _ := json.Marshal(sessionFile{ChatID: chatID, SessionID: id})
	return ws.WriteFile(ctx, state+"/session.json", b, 0o644)
}

// Prompt is the turn's prompt: the input messages, preceded by the
// conversation so far when there is no session to resume (history not
// empty), so a chat whose CLI state was lost keeps its context.
func Prompt(history, input []chat.Message, resume string) string {
	var in []string
	for _, m := range input {
		if m.Content != "" {
			in = append(in, m.Content)
		}
	}
	text := strings.Join(in, "\n\n")
	if resume != "" || len(history) == 0 {
		return text
	}
	var sb strings.Builder
	sb.WriteString("The conversation so far:\n\n")
	for _, m := range history {
		fmt.Fprintf(&sb, "<%s>\n%s\n</%s>\n\n", m.Role, m.Content, m.Role)
	}
	sb.WriteString("The new message:\n\n")
	sb.WriteString(text)
	return sb.String()
}

// Classify gives a CLI's error message its chat error code by its words
// (CLIs report no status codes on stderr).
func Classify(msg string) string {
	m := strings.ToLower(msg)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(m, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("unauthorized", "unauthenticated", "authentication", "invalid api key", "api key not valid",
		"permission denied", " 401", " 403", "status 401", "status 403"):
		return chat.ErrAuth
	case has("rate limit", "rate_limit", "too many requests", "quota", " 429", "status 429"):
		return chat.ErrRateLimit
	case has("enotfound", "econnrefused", "econnreset", "etimedout", "network error", "could not connect",
		"connection refused", "unable to connect", "error sending request", "stream disconnected"):
		return chat.ErrNetwork
	case has("max turns", "max_turns", "max session turns", "maximum session turns", "maximum number of turns", "step limit"):
		return chat.ErrMaxTurns
	case has("model") && has("not found", "not available", "unknown", "invalid"):
		return chat.ErrInvalidRequest
	case has(" 500", " 502", " 503", " 504", "internal server error", "overloaded", "status 5"):
		return chat.ErrUpstream
	}
	return chat.ErrExecutor
}

// StatusCode is the chat error code of a model API failure with HTTP
// status (0: unknown, the message decides).
func StatusCode(status int, msg string) string {
	switch {
	case status == 401 || status == 403:
		return chat.ErrAuth
	case status == 429:
		return chat.ErrRateLimit
	case status == 400 || status == 404 || status == 413:
		return chat.ErrInvalidRequest
	case status >= 500:
		return chat.ErrUpstream
	}
	return Classify(msg)
}

// Invalid is the error a Prepare returns for a request the CLI cannot
// honour.
func Invalid(format string, args ...any) error {
	return &chat.Error{Code: chat.ErrInvalidRequest, Message: fmt.Sprintf(format, args...)}
}
