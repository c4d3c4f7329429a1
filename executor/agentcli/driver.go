package agentcli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// This file is the driver: the one sequence every coding-agent CLI's turn
// goes through (checks, the chat's CLI state, the CLI's own preparation,
// the start through the bridge, the parse, the wait with its watchdogs,
// the exit classified, the CLI kept or its session recorded). A CLI fills
// it with what is its own (CLI): its command and configuration files
// (Prepare), its stream format (NewParser) and a Profile.

// CLI is what one coding-agent CLI brings to the driver. Its methods are
// called for many turns at once.
type CLI interface {
	// Profile describes the CLI; it is read once, by New.
	Profile() Profile
	// Prepare checks the request's arguments (an error made with
	// Invalid, or another *chat.Error, for one the CLI cannot honour),
	// writes the run's configuration into the workspace (into the homes
	// the driver emptied) and returns how to start the CLI.
	Prepare(ctx context.Context, p *Prepared) (*Plan, error)
	// NewParser returns the parser of one turn's output: its events go to
	// emit, what it learns of the CLI's state to m.
	NewParser(emit chat.EmitFunc, plan *Plan, m Monitor) Parser
}

// Profile is what the driver knows of a CLI besides its preparation and
// its parser.
type Profile struct {
	// Name is the sandbox command the executor serves ("claude");
	// Program names the CLI in messages ("cursor-agent"; Name when
	// empty).
	Name, Program string
	// ErrorID is the id of the error events the driver emits itself and
	// the prefix of the ids of its notices.
	ErrorID string
	// State returns the workspace folder of an assistant's CLI state in
	// the chat (StateDir(Name, assistantID) when nil). The driver makes
	// it, and every folder of it from StateRoot down, the sandbox user's
	// alone.
	State func(assistantID string) string
	// Homes are the folders of the state folder the CLI reads its
	// configuration from (its home, its config dir; the first is
	// Prepared.Home): emptied before every run but for what their Keep
	// patterns name (ResetHome), so that what Prepare writes is all that
	// configures the run.
	Homes []Home
	// Sessions makes the driver record the session a run reports in the
	// state folder and hand it to the chat's next run (Prepared.Resume).
	// Off for a CLI that finds its session itself.
	Sessions bool
	// Hide names what the CLI reads from the workspace whatever its
	// switches say (executor.Hider); RunFiles the files a run writes into
	// the workspace and removes (executor.RunFiles).
	Hide, RunFiles []string
	// Lines are how the driver reads the CLI's output for its parser.
	Lines LineOptions
	// Primes makes the executor an executor.Primer (prime.go): the CLI,
	// a Keeper, opens its session with a message that names the
	// session's folder, so it can be started in a pooled sandbox before
	// the chat's workspace is attached.
	Primes bool
}

// Home is a CLI home of the state folder (Profile.Homes).
type Home struct {
	// Dir is the folder, relative to the state folder.
	Dir string
	// Keep are the ResetHome patterns of the files the CLI's sessions
	// are in: all a run resumes. Whatever else is there anyone may have
	// written, so it goes before every run.
	Keep []string
}

// Prepared is what the driver gives a CLI's Prepare: the request and the
// chat's state.
type Prepared struct {
	*executor.Request
	// State is the assistant's state folder (Profile.State), created.
	State string
	// Home is the CLI's first home (Profile.Homes), emptied but for its
	// sessions; "" when the profile has none.
	Home string
	// Resume is the session to resume (Profile.Sessions; "" for a new
	// chat: the history then belongs in the prompt, see Prompt).
	Resume string
	// Model is the turn's model: the arguments' or the connector's.
	Model string
	// Keep reports that the CLI is started to be kept for the chat's
	// next turns (a Keeper's, when the request asks): Prepare starts it
	// to take its messages on stdin, or clears it to run the CLI for the
	// turn alone (a mode its keeping mode cannot run). Prepare may also
	// set it to run the turn in its keeping mode (its protocol) when the
	// request does not keep the CLI: the driver closes it when the turn
	// ends.
	Keep bool
}

// Plan is how a CLI runs one turn, as its Prepare made it.
type Plan struct {
	Argv []string
	// Env is the CLI's environment (secrets go here only); the driver
	// adds GitEnv and the MCP servers' variables.
	Env map[string]string
	// Input is written to the CLI's standard input (nil: none); with
	// HoldInput it stays open until the CLI's work is done (Spec).
	Input     []byte
	HoldInput bool
	// MCP are the run's MCP servers (their variables, the session event,
	// the secrets to redact).
	MCP *MCPConfig
	// Skills are the skill names delivered to the workspace.
	Skills []string
	// Remove are workspace files the run removes when it ends (kept, when
	// the CLI is kept).
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
	// SessionID is the session the result reports when the CLI reports
	// none (Prepared.Resume when empty).
	SessionID string
	// FailureThreshold is the assistant's repeated_tool_failure threshold
	// (executor.FailureThreshold), set by the driver for the parser.
	FailureThreshold int
	// Approve is the turn's executor.Request.Approve (nil: nothing asks),
	// set by the driver for every turn the process takes, for the parser
	// of a CLI that asks before its tools run (see Ask).
	Approve executor.Approver
	// Protocol is the CLI's own state of a protocol conversation with the
	// process (the client of a CLI that speaks JSON-RPC on stdio: its
	// request ids, its session): Prepare makes it, NewParser and a
	// Keeper's NextMessage read it from the Plan, for every turn the
	// process takes.
	Protocol any
}

// Parser reads one turn of a CLI's output (a Chat underneath, or a
// parser of its own).
type Parser interface {
	// Line handles the next line of output; the driver calls it from one
	// goroutine, in order.
	Line(line Line)
	// Finish ends the messages still open (the output was cut short, or
	// the turn is over) and returns what the turn amounts to.
	Finish() Finished
}

// Finished is a parser's outcome as the driver reads it. Every outcome
// embeds Outcome, which has both methods.
type Finished interface {
	// Common is the outcome every CLI's parser has.
	Common() *Outcome
	// NoResult gives a turn that ended without a result its error code,
	// from the CLI's stderr tail, and a note for its message ("" for
	// none).
	NoResult(stderrTail string) (code, note string)
}

// StderrReader is a Parser that also reads the CLI's stderr tail
// (redacted), and its Plan.LogFile, once the run ended, before Finish:
// for what a CLI reports only there, such as an MCP server that did not
// start.
type StderrReader interface {
	Stderr(tail string)
}

// MaxLogFile caps what a run reads of a CLI's Plan.LogFile.
const MaxLogFile = 4 << 20

// Executor runs the turns of one CLI: an executor.Executor made of a CLI
// and the driver. It is safe for concurrent use.
type Executor struct {
	cli  CLI
	prof Profile
	opts Options
}

var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Hider    = (*Executor)(nil)
	_ executor.RunFiles = (*Executor)(nil)
)

// New returns the executor of cli; opts' zero fields have their defaults
// (Options.WithDefaults). It has no side effects.
func New(cli CLI, opts Options) *Executor {
	prof := cli.Profile()
	if prof.Program == "" {
		prof.Program = prof.Name
	}
	if prof.State == nil {
		prof.State = func(id string) string { return StateDir(prof.Name, id) }
	}
	return &Executor{cli: cli, prof: prof, opts: opts.WithDefaults(prof.Name)}
}

// Name is the sandbox command the executor serves.
func (x *Executor) Name() string { return x.prof.Name }

// Hide implements executor.Hider.
func (x *Executor) Hide() []string { return x.prof.Hide }

// RunFiles implements executor.RunFiles.
func (x *Executor) RunFiles() []string { return x.prof.RunFiles }

// Run executes one turn (see executor.Executor): on the CLI the chat's
// previous turn kept when it can take it (Keeper), else on a CLI started
// for it. Events go to req.Emit, which must be safe for concurrent use;
// none is emitted once Run returned.
func (x *Executor) Run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	fail := func(code, message string, err error) (*executor.Result, error) {
		chat.ErrorEvent(req.Emit, x.prof.ErrorID, code, message)
		return nil, &chat.Error{Code: code, Message: message, Err: err}
	}
	switch {
	case req.Sandbox == nil || req.Sandbox.Workspace() == nil:
		return fail(chat.ErrInternal, x.prof.Name+" executor: request has no sandbox", nil)
	case req.Assistant == nil:
		return fail(chat.ErrInternal, x.prof.Name+" executor: request has no assistant", nil)
	case len(req.Input) == 0:
		return fail(chat.ErrInvalidRequest, "no input message: a turn needs at least one user message", nil)
	}
	log := x.opts.Logger.With("assistant", req.Assistant.ID, "chat", req.ChatID, "cli", x.prof.Name)
	keeper, canKeep := x.cli.(Keeper)
	var primed *kept
	if k, ok := req.Warm.(*kept); ok && k.primed != nil {
		// Started ahead of the chat (Prime): used below once the turn's
		// own preparation shows it was started as the turn would start it.
		primed = k
	} else if req.Warm != nil {
		k, ok := req.Warm.(*kept)
		same := ok && k.owner == x && k.key == keepKey(req)
		if same && k.Alive() {
			res, err := x.next(ctx, req, k, keeper, log)
			if !errors.Is(err, ErrHung) {
				return res, err
			}
			// Hung (and closed): a new CLI resumes the session and takes
			// the turn, which emitted nothing.
			log.Warn(x.prof.Name + " kept for the chat is hung and restarted")
		} else {
			log.Info(x.prof.Name+" kept for the chat is restarted", "alive", req.Warm.Alive(), "changed", !same)
			// Closed before the new one starts: it ends its session (a
			// transcript the new one resumes).
			req.Warm.Close()
		}
	}

	ws := req.Sandbox.Workspace()
	// A primed CLI runs in its keeping mode: the turn is prepared for it,
	// and a CLI the request does not keep is closed when the turn ends.
	p := &Prepared{Request: req, State: x.prof.State(req.Assistant.ID), Model: cmp.Or(req.Arguments.Model, req.Connector.Model),
		Keep: canKeep && (req.KeepAlive || primed != nil)}
	plan, err := x.prepare(ctx, p)
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) {
			return fail(ce.Code, ce.Message, err)
		}
		return fail(chat.ErrSandbox, "prepare workspace: "+err.Error(), err)
	}
	argv, env, secrets := x.command(req, plan)
	if primed != nil {
		if why := primed.misfit(x, req, p, argv, env); why != "" {
			log.Info(x.prof.Name + " started ahead of the chat is not used: " + why + "; a new one is started")
			primed.Close()
		} else {
			res, err := x.first(ctx, req, primed, plan, secrets, log)
			if !errors.Is(err, ErrHung) {
				return res, err
			}
			// It did not take the message, and nothing was emitted: a
			// new CLI takes the turn.
			log.Warn(x.prof.Name + " started ahead of the chat did not take its first message; a new one is started")
		}
	}
	keep := false
	defer func() {
		if keep {
			return // the kept CLI may read them again
		}
		for _, f := range append(plan.Remove, plan.LogFile) {
			if f != "" {
				_ = ws.RemoveAll(context.WithoutCancel(ctx), f)
			}
		}
	}()
	log.Debug(x.prof.Name+" run", "resume", p.Resume, "model", p.Model, "mcp_servers", plan.MCP.Names(),
		"max_turns", plan.MaxTurns, "keep", p.Keep, "input_bytes", len(plan.Input))
	run, xe := Start(ctx, Spec{
		CLI: x.prof.Program, ErrorID: x.prof.ErrorID, Emit: req.Emit,
		Sandbox: req.Sandbox,
		Exec:    sandbox.ExecRequest{Argv: argv, Env: env},
		Input:   plan.Input, HoldInput: plan.HoldInput, Keep: p.Keep,
		Timeout: req.Timeout, GracePeriod: x.opts.GracePeriod, IdleTimeout: max(x.opts.IdleTimeout, 0),
		Secrets: secrets, Logger: log, Lines: x.prof.Lines,
	})
	if xe != nil {
		return fail(xe.Code, xe.Message, xe.Err)
	}
	var k *kept
	if p.Keep {
		k = &kept{Run: run, owner: x, key: keepKey(req), plan: plan, secrets: secrets}
	}
	parser := x.cli.NewParser(req.Emit, plan, run)
	cancelable(run, parser)
	detach := func() {}
	if k != nil {
		detach = run.talk(req.Talk, parser)
	}
	exit := run.Wait(parser.Line)
	detach()
	res, err := x.finish(ctx, req, run, k, plan, p.Resume, parser, exit, secrets, log)
	keep = res != nil && res.Warm != nil
	return res, err
}

// prepare empties the CLI's homes, reads the session to resume and has
// the CLI prepare its run (p.Keep as the CLI left it).
func (x *Executor) prepare(ctx context.Context, p *Prepared) (*Plan, error) {
	if err := x.reset(ctx, p.Sandbox.Workspace(), p); err != nil {
		return nil, err
	}
	plan, err := x.cli.Prepare(ctx, p)
	if err != nil {
		return nil, err
	}
	if plan.SessionID == "" {
		plan.SessionID = p.Resume
	}
	plan.FailureThreshold = executor.FailureThreshold(p.Assistant)
	plan.Approve = p.Approve
	return plan, nil
}

// command is how the CLI of plan starts for req: its command line (in
// the bridge's wrapper), its environment (Git's, the MCP servers', the
// plan's), and the values no event or error may show.
func (x *Executor) command(req *executor.Request, plan *Plan) (argv []string, env map[string]string, secrets []string) {
	argv = plan.Argv
	if req.WrapArgv != nil {
		argv = req.WrapArgv(argv)
	}
	var mcpEnv map[string]string
	if plan.MCP != nil {
		mcpEnv = plan.MCP.Env
	}
	env = GitEnv()
	for k, v := range mcpEnv {
		env[k] = v
	}
	for k, v := range plan.Env {
		env[k] = v
	}
	return argv, env, Secrets(req.Connector.Key, mcpEnv)
}

// cancelable makes a kept run ask parser to stop a canceled turn when it
// can (Canceler).
func cancelable(run *Run, parser Parser) {
	if c, ok := parser.(Canceler); ok {
		run.SetCanceler(c.Cancel)
	} else {
		run.SetCanceler(nil)
	}
}

// reset makes the state folder and the homes, the sandbox user's alone,
// empties the homes but for their sessions, and reads the session to
// resume.
func (x *Executor) reset(ctx context.Context, ws *sandbox.Workspace, p *Prepared) error {
	for i, h := range x.prof.Homes {
		dir := p.State + "/" + h.Dir
		if i == 0 {
			p.Home = dir
		}
		// The home is in the state folder: this makes both.
		if err := ResetHome(ctx, ws, dir, h.Keep...); err != nil {
			return err
		}
		if err := ws.Chmod(ctx, dir, 0o700); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
	}
	if err := ws.MkdirAll(ctx, p.State); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	// Only the sandbox user (the owner) may read the chat's CLI state.
	for d := p.State; ; d = d[:strings.LastIndexByte(d, '/')] {
		if err := ws.Chmod(ctx, d, 0o700); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		if d == StateRoot || !strings.Contains(d, "/") {
			break
		}
	}
	if x.prof.Sessions {
		p.Resume = ReadSession(ctx, ws, p.State, p.Assistant.ID, p.ChatID)
		for _, from := range p.ForkedFrom {
			if p.Resume != "" {
				break
			}
			// A fork: its workspace's copy of the parent's session is
			// the fork's own from now on.
			if p.Resume = ReadSession(ctx, ws, p.State, p.Assistant.ID, from); p.Resume != "" {
				if err := WriteSession(ctx, ws, p.State, p.Assistant.ID, p.ChatID, p.Resume); err != nil {
					return fmt.Errorf("fork's session: %w", err)
				}
			}
		}
	}
	return nil
}

// finish reads what the turn amounts to, classifies its end, and keeps
// the CLI for the chat's next turn or records its session.
func (x *Executor) finish(ctx context.Context, req *executor.Request, run *Run, k *kept, plan *Plan, resume string,
	parser Parser, exit *Exit, secrets []string, log *slog.Logger) (*executor.Result, error) {
	ws := req.Sandbox.Workspace()
	if sr, ok := parser.(StderrReader); ok {
		text := exit.Stderr
		if plan.LogFile != "" {
			if f, err := ws.Open(context.WithoutCancel(ctx), plan.LogFile); err == nil {
				b, _ := io.ReadAll(io.LimitReader(f, MaxLogFile))
				f.Close()
				text += "\n" + Redact(string(b), secrets)
			}
		}
		sr.Stderr(text)
	}
	fin := parser.Finish()
	out := fin.Common()
	res := out.Result(plan.SessionID, exit.Began)
	res.Timings.Started = exit.Started
	res.Notices = append(res.Notices, exit.Notices...)
	res.Said = run.said()
	log.Debug(x.prof.Name+" done", "exit", exit.Code, "killed", exit.Killed, "idle", exit.Idle, "alive", exit.Alive, "outcome", fin)
	xe := exit.Failure(Parsed{GotResult: out.GotResult, Err: out.Err, NoResult: fin.NoResult})
	// A turn canceled (or timed out) that the CLI stopped and settled
	// leaves it usable (Canceler).
	if k != nil && exit.Alive && req.KeepAlive && (xe == nil || xe == out.Err || exit.ctxStopped) {
		k.session = res.SessionID
		res.Warm = k
	} else if k != nil {
		run.Close()
	}
	if xe != nil {
		return res, xe
	}
	if x.prof.Sessions && out.SessionID != "" && out.SessionID != resume {
		state := x.prof.State(req.Assistant.ID)
		if err := WriteSession(context.WithoutCancel(ctx), ws, state, req.Assistant.ID, req.ChatID, out.SessionID); err != nil {
			// The answer stands; the next turn starts a new session with
			// the history in its prompt.
			log.Warn(x.prof.Name+" session not saved", "err", err)
		}
	}
	return res, nil
}

// ImageFiles are the paths in the sandbox of the input's image files
// (executor.Request.Images) for a CLI that attaches image files to its
// prompt (Codex --image, opencode --file), when the model takes images
// (Request.Vision); none otherwise. The prompt names the files either way.
func ImageFiles(req *executor.Request) []string {
	if !req.Vision {
		return nil
	}
	out := make([]string, len(req.Images))
	for i, p := range req.Images {
		out[i] = sandbox.Workdir + "/" + p
	}
	return out
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
