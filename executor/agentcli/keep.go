package agentcli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// Keeper is the keep-alive extension point: the CLI of an executor that
// implements it takes a chat's next message on the standard input of the
// process that answered the last one, so the driver keeps that process
// running between the chat's turns (Request.KeepAlive, the assistant's
// sandbox.keep_alive) instead of starting the CLI, loading its session and
// connecting its MCP servers again. The driver does the rest: it starts
// the process on a context of its own with its input held open, hands
// each turn's output to a parser of that turn (CLI.NewParser) until the
// parser reports the turn's work done (Monitor.Settled), runs the same
// watchdogs and exit classification as for a CLI started for one turn,
// checks that a kept CLI still reads its input (Options.AckWait), and
// starts a new CLI (which resumes the session) when the request no longer
// matches what the kept one was started with (the system prompt, MCP
// servers, arguments, connector, skills) or the kept one died or hung.
//
// A CLI fills it in three places:
//   - Prepare, when Prepared.Keep is set, starts the CLI in a mode that
//     reads messages from stdin and stays up after answering one, and
//     puts the first message in Plan.Input;
//   - NextMessage encodes each later turn's message the way that mode
//     reads it;
//   - its parser reports the end of each turn's work with Monitor.Settled
//     (a Chat does on Result).
//
// Claude Code does it with --input-format stream-json: a message is a
// stream-json user line, the turn's result line settles it, and the CLI
// prints its init line on reading a message (the liveness check). The
// Gemini CLI and opencode speak a request-response protocol on stdio
// instead (the Agent Client Protocol's JSON-RPC, package acp): Prepare
// starts that server with the initialize request as Plan.Input and the
// client's state of the conversation as Plan.Protocol; the parser sends
// the requests that follow each response (the session, the prompt) and
// its answers to the CLI's own requests through the Run (Sender), and
// settles the turn on the prompt's response; NextMessage is a prompt
// request of the session. Such a CLI prints nothing on reading a
// request, so its executor leaves Options.AckWait unset; its parser can
// cancel a turn without ending the CLI (Canceler), so a canceled or
// timed-out turn leaves it kept.
type Keeper interface {
	// NextMessage is what the kept CLI reads on stdin as the turn's
	// message.
	NextMessage(next Next) ([]byte, error)
}

// Next is a turn of a kept CLI as its Keeper encodes the message.
type Next struct {
	// Input is the turn's new messages.
	Input []chat.Message
	// Vision is executor.Request.Vision: the model takes images.
	Vision bool
	// Session is the session the CLI's last turn reported
	// (Outcome.SessionID, else Plan.SessionID).
	Session string
	// Turn counts the turns the process took before this one (1 for its
	// second): a sequence for request ids.
	Turn int
	// Plan is how the process was started.
	Plan *Plan
}

// kept is a CLI process the driver kept running after a turn for the
// chat's next one (executor.Warm).
type kept struct {
	*Run
	owner *Executor
	// key is what the process was started for (keepKey): a turn that
	// would start it differently starts a new one.
	key     string
	plan    *Plan
	secrets []string
	session string
	turns   int
	// primed: started ahead of any chat (Prime), and how; nil once a
	// chat's turn took it.
	primed *primedStart
}

var _ executor.Warm = (*kept)(nil)

// keepKey identifies what a kept CLI was started for, besides the
// assistant (a changed assistant restarts the chat's sandbox): the system
// prompt, the MCP servers, the arguments (the model, turn limit and
// permission mode among them), the connection, the relay, the skills
// and whether its tools ask (Request.Approve).
func keepKey(req *executor.Request) string {
	prints := make([]string, 0, len(req.Assistant.Skills))
	for _, s := range req.Assistant.Skills {
		prints = append(prints, s.Fingerprint())
	}
	b, _ := json.Marshal(struct {
		System    string
		MCP       map[string]assistant.MCPServer
		Args      chat.Arguments
		Connector executor.Connection
		Relay     string
		Skills    []string
		Asks      bool // started to ask before its tools run
	}{req.System, req.MCPServers, req.Arguments, req.Connector, req.Relay, prints, req.Approve != nil})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// next runs a turn on the chat's kept CLI. ErrHung: it did not take the
// message, nothing was emitted, and a new CLI takes the turn.
func (x *Executor) next(ctx context.Context, req *executor.Request, k *kept, keeper Keeper, log *slog.Logger) (*executor.Result, error) {
	k.turns++
	msg, err := keeper.NextMessage(Next{Input: req.Input, Vision: req.Vision, Session: k.session, Turn: k.turns, Plan: k.plan})
	if err != nil {
		k.Close()
		chat.ErrorEvent(req.Emit, x.prof.ErrorID, chat.ErrInvalidRequest, err.Error())
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	k.plan.Approve = req.Approve
	return x.turnOn(ctx, req, k, msg, k.session, log)
}

// turnOn runs req's turn on the running CLI k: msg is its message, resume
// the session it resumed. ErrHung: it did not take the message, nothing
// was emitted.
func (x *Executor) turnOn(ctx context.Context, req *executor.Request, k *kept, msg []byte, resume string, log *slog.Logger) (*executor.Result, error) {
	parser := x.cli.NewParser(req.Emit, k.plan, k.Run)
	cancelable(k.Run, parser)
	if err := k.Next(ctx, req.Emit, req.Timeout, msg, parser.Line, x.opts.AckWait); err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) {
			chat.ErrorEvent(req.Emit, x.prof.ErrorID, ce.Code, ce.Message)
			return nil, ce
		}
		return nil, err
	}
	detach := k.talk(req.Talk, parser)
	exit := k.Wait(parser.Line)
	detach()
	return x.finish(ctx, req, k.Run, k, k.plan, resume, parser, exit, k.secrets, log)
}
