// Package executor is the contract between the pipeline and the coding-agent
// CLI executors (claude, codex, gemini, opencode, cursor): what a run is given and what it returns.
package executor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// Executor runs one chat turn with a coding-agent CLI inside a sandbox.
// Implementations are safe for concurrent use by many requests.
type Executor interface {
	// Name is the sandbox command it serves: "claude", "codex", "gemini", "opencode" or "cursor".
	Name() string
	// Run executes the turn, streaming events through req.Emit as they
	// happen. It returns when the CLI has exited (or was stopped). A failed
	// run returns a *chat.Error (and has already emitted an error event);
	// when the CLI wrote to stderr, a *Stderr in its causes holds the end
	// of it.
	Run(ctx context.Context, req *Request) (*Result, error)
}

// Request is everything one run needs. The pipeline fills it; executors
// never read configuration from elsewhere.
type Request struct {
	Assistant *assistant.Assistant
	UserID    string
	ChatID    string
	// ForkedFrom names the chats this chat was forked from, its parent
	// first: its workspace holds their CLI sessions as they were at the
	// fork. A chat with no session of its own goes on from the nearest
	// one's: a fork of it where the CLI has one (Claude Code's
	// --fork-session), else the copy in its workspace resumed.
	ForkedFrom []string
	// System is the system prompt: the assistant's prompts and whatever a
	// Create hook changed. It goes to a file, never argv.
	System string
	// History is the conversation before this turn (user and assistant
	// messages), oldest first.
	History []chat.Message
	// Input is this turn's new user message(s). A message with images has
	// them in Parts, and its Content names the files in the workspace they
	// were written to (the pipeline's attachments), for a CLI to read.
	Input []chat.Message
	// Images are the workspace paths (relative to its root) of the files
	// the input's images were written to, in order: for a CLI that takes
	// image files (Codex --image, opencode --file) when Vision is set.
	Images []string
	// Vision is set when the model takes images: a CLI that takes them
	// inline (Claude Code) gets those of the last user message too
	// (vision.ForCLI).
	Vision bool
	// Connector is the resolved connector (secrets included: they go into
	// the sandbox environment only).
	Connector Connection
	// Arguments are the sandbox arguments after hook overrides.
	Arguments chat.Arguments
	// Sandbox is the live sandbox; the executor never removes it.
	Sandbox sandbox.Sandbox
	// Timeout bounds the run (the sandbox block's timeout).
	Timeout time.Duration
	// MCPServers are extra MCP servers (for example the host-tools bridge)
	// to add to the assistant's own, by name.
	MCPServers map[string]assistant.MCPServer
	// Relay is the agentbox binary inside the sandbox, which runs the
	// in-sandbox relays (`agentbox bridge mcp-filter`, which enforces an MCP
	// server's tool list); "" when the sandbox has none (then an MCP
	// reference that lists tools is an error).
	Relay string
	// MCPServerEnv maps variables every stdio MCP server must get to the
	// variables of the CLI's environment they are copied from: the egress
	// proxy's and its CA's (bridge.Session.MCPServerEnv), which a server
	// needs to reach a secret's host. The executor puts them into each
	// server's configuration (agentcli.ResolveMCP).
	MCPServerEnv map[string]string
	// WrapArgv, when set, is applied to the CLI's argv just before it is
	// started: the model bridge prefixes it with `agentbox bridge run ...
	// --`, which serves the model proxy on the sandbox's loopback for the
	// CLI's lifetime (bridge.Session.WrapCommand).
	WrapArgv func(argv []string) []string
	// PermissionPromptTool is the MCP tool (mcp__SERVER__TOOL) the CLI
	// asks before a tool its permission rules would ask about: the
	// pipeline's approval prompt on the bridge ("": the CLI asks nobody
	// and runs unattended). Only Claude Code asks this way.
	PermissionPromptTool string
	// PermissionAsk are rules (Claude Code's syntax) the CLI asks the
	// prompt tool (or Approve) about even where it would run the tool
	// unasked (a read-only command, an edit in acceptEdits mode).
	PermissionAsk []string
	// Approve, when set, decides the agent's tool calls under the
	// assistant's approval policy: a CLI that can ask before its tools
	// run (Codex's app server, the Agent Client Protocol of the Gemini
	// CLI and opencode) is started so that it asks, and each of its
	// requests is answered with Approve's verdict. It blocks until the
	// policy, or the chat's user, decided (or the turn ended: a denial);
	// the pipeline sends the approval events. Claude Code asks through
	// PermissionPromptTool instead.
	Approve Approver
	// Emit receives the run's events. It must be safe for concurrent use
	// (the pipeline's turn serializes a turn's events: it owns their
	// order); Run emits nothing once it returned. The pipeline's Watch
	// reads them for
	// the failure patterns in typed fields: a tool_result's start carries
	// its chat.ToolResult (Event.Result, made with chat.WholeToolResult),
	// a refused call's permission_denied notice its chat.Denial
	// (Event.Denial, chat.WholeDenial), or its result a refusal text (see
	// IsDenial).
	Emit chat.EmitFunc
	// KeepAlive asks the executor to leave its CLI running after the turn
	// for the chat's next one (sandbox.keep_alive), when it can: the
	// result's Warm is then set. Executors that cannot ignore it.
	KeepAlive bool
	// Warm is the CLI the chat's previous turn left running in Sandbox
	// (nil: none). The executor sends the turn's input to it when it
	// is alive and was started as this turn would start it; otherwise it
	// closes it and starts a new CLI.
	Warm Warm
	// Talk is the turn's line from its user to its CLI (a message sent
	// while it runs, an interrupt): an executor that can take them
	// attaches the CLI while the turn runs. Nil: none.
	Talk *Talk
}

// Approver decides a tool call of the agent: tool and input as the
// approval rules name them (Bash {"command"}, Edit and Write
// {"file_path"}, mcp__server__tool, or the CLI's own tool name), id the
// agent's id of the call. allow false comes with the reason the agent is
// told.
type Approver func(tool string, input json.RawMessage, id string) (allow bool, reason string)

// Warm is a coding-agent CLI an executor left running in its sandbox
// after a turn (Request.KeepAlive). Its methods are safe for concurrent
// use.
type Warm interface {
	// Alive reports whether the CLI still runs and can take a turn.
	Alive() bool
	// Close stops the CLI and waits, bounded, for it to end. It is
	// idempotent.
	Close()
}

// Primer is an executor that can start its CLI in a sandbox before any
// chat has it: a warm pool's sandbox waits with its CLI started, and the
// new chat that claims it hands the primed CLI to Run as Request.Warm.
// Run sends the turn to it only when the CLI was started exactly as the
// turn would start it (its command line, environment and configuration,
// with the turn's own workspace in place); otherwise it closes it and
// starts one for the turn, as it does for a kept CLI that changed.
type Primer interface {
	// Prime starts the CLI req would start, in req.Sandbox, without a
	// message: req is a turn of the assistant with no chat (no Input,
	// UserID, ChatID or History). ErrNotPrimed when the CLI cannot wait
	// for its first message (its executor, or this request's
	// configuration, has no such mode).
	Prime(ctx context.Context, req *Request) (Warm, error)
}

// ErrNotPrimed is Prime's error for a CLI that cannot be started ahead of
// its first message.
var ErrNotPrimed = errors.New("the CLI cannot be started ahead of its first message")

// Connection is a connector with $ENV references resolved.
type Connection struct {
	Type  string
	Host  string
	Key   string
	Model string
}

// String never prints the key.
func (c Connection) String() string {
	k := ""
	if c.Key != "" {
		k = " key=[redacted]"
	}
	return c.Type + " " + c.Host + " model=" + c.Model + k
}

// Result is a finished run.
type Result struct {
	// Content is the final answer text.
	Content   string
	SessionID string
	Usage     chat.Usage
	// ToolCalls lists the tools the agent called, in order.
	ToolCalls []ToolCall
	// Notices are the notice codes raised (failure patterns, denials).
	Notices []string
	// Timings are when the run's steps happened (zero when not seen).
	Timings Timings
	// Warm is the CLI left running for the chat's next turn (nil: it
	// ended). It is set only when the request asked (KeepAlive) and the
	// turn ended cleanly.
	Warm Warm
	// Said are the messages its user sent into the turn (Request.Talk),
	// in order.
	Said []chat.Said
}

// Timings are the moments of a run the pipeline reports (chat.Timings,
// trace spans). A zero time was not seen.
type Timings struct {
	// Started is when the CLI process was started (zero when the turn
	// ran on a CLI already running); Init when it printed its first
	// line.
	Started, Init time.Time
	// FirstByte is when the model's answer began to stream (the first
	// event of a model response), FirstText when the answer's first text
	// arrived.
	FirstByte, FirstText time.Time
}

// ToolCall is one tool the agent called and its outcome.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Server and Tool are the MCP server (as the assistant names it) and
	// the tool's own name, when the call's name is not "mcp__server__tool"
	// (the server's tool loop names them Yao's way, "server__tool").
	Server  string       `json:"-"`
	Tool    string       `json:"-"`
	Input   chat.RawJSON `json:"input,omitempty"`
	Result  string       `json:"result,omitempty"`
	IsError bool         `json:"is_error,omitempty"`
	// Started is when the model called the tool, Ended when its result
	// came (zero when it did not).
	Started time.Time `json:"-"`
	Ended   time.Time `json:"-"`
}

// Stderr is the end of a failed CLI's stderr. It is in the causes of the
// run's *chat.Error (errors.As finds it), for the log: clients see only the
// error's message.
type Stderr struct {
	// Tail is the end of the CLI's stderr, secrets redacted.
	Tail string
	// Err is the cause it wraps, if any.
	Err error
}

func (s *Stderr) Error() string {
	if s.Err != nil {
		return s.Err.Error() + " (stderr: " + s.Tail + ")"
	}
	return "stderr: " + s.Tail
}

func (s *Stderr) Unwrap() error { return s.Err }

// RunFiles is implemented by an executor that writes files into the chat's
// workspace for one run and removes them when the run ends (a system
// prompt, a large input). A server that crashed mid-run leaves them; the
// next one removes them from the workspaces nobody uses when it starts
// (sandbox.Workspaces.CleanRunFiles).
type RunFiles interface {
	// RunFiles lists those files, relative to the workspace.
	RunFiles() []string
}

// Hider is implemented by an executor whose CLI reads configuration from
// folders or files of the workspace that none of its switches turns off
// (settings that start MCP servers, plugins and hooks, .env files,
// skills, agents): the sandboxes of its command show them empty and
// read-only (sandbox.Spec.Hide), so nothing the agent writes there
// configures a later run. The host's files there are kept.
type Hider interface {
	// Hide names those folders (ending in "/") and files, at the
	// workspace's root (sandbox.Spec.Hide).
	Hide() []string
}
