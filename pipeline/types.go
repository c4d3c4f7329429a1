// Package pipeline runs a chat turn from request to done. Pipeline.Chat
// (pipeline.go) starts a turn (turn.go), whose phases run in this order,
// each in the file of its name:
//
//   - admit: the request's checks, its connector, the app's limits
//     (the user's turns, the chat's line, the chat's assistant);
//   - assemble: the conversation (stored history or the client's), the
//     options, the hooks and their context;
//   - acquire: a sandboxed assistant's sandbox, the chat's kept one or a
//     new one with its bridge session (bridge.go) and prepare steps
//     (prepare.go), before Create: the hook may use it;
//   - create: the Create hook (which may delegate the turn to another
//     assistant, agents.go), then the prompts, connector and MCP
//     servers;
//   - execute: the coding-agent CLI's run in the sandbox, or a direct
//     connector call, both giving one execution;
//   - next: the Next hook;
//   - persist: the chat's history.
//
// finish.go then sends the done event and records usage, the audit line
// and the trace; after it the sandbox is removed (or kept for the chat's
// next turn, keptturn.go) and the chat released.
package pipeline

import (
	"errors"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
)

// Request is one chat turn as the server (or an embedder) hands it over.
type Request struct {
	// UserID is the authenticated user; ChatID names the conversation.
	// Both are validated before they touch a path.
	UserID      string
	ChatID      string
	AssistantID string
	// TeamID is the user's team when the caller's authentication names
	// one: it owns the hooks' ctx.memory.team ("" leaves it unavailable).
	TeamID string
	// Messages are what the client sent. Trailing user messages (or, for
	// a direct assistant, the tool messages answering its model's tool
	// calls) are the turn's input. When nothing comes before them they
	// continue the stored history of (user, chat); otherwise the messages
	// are the whole conversation and replace what is stored, unless
	// Continue is set.
	Messages []chat.Message
	// Continue appends Messages to the stored history whatever their
	// number (the Responses API continuing a conversation with several
	// new items: tool outputs, then a user message).
	Continue bool
	// Edit names the turn (from 1, in the order of the chat's user
	// messages) whose message this request's message replaces: the chat
	// first goes back to the state that turn started from (files, CLI
	// session, hook memory, history), the turns from it on staying on
	// another branch (Pipeline.Branches), and the turn runs from there.
	// It needs the chat's checkpoints, and Messages holding only the new
	// message.
	Edit int
	// ResponseID names the Responses API response the turn answers: the
	// turn's checkpoint records it, so that a request continuing from
	// that response later can branch from the chat's state then.
	ResponseID string
	// Ephemeral leaves the chat history as it was: the turn is answered
	// but not stored (the Responses API's store: false).
	Ephemeral bool
	Locale    string
	Metadata  map[string]any
	// Client is where the request came from, as Yao's hooks see it
	// (ctx.client, ctx.referer, ctx.accept, ctx.theme, ctx.route); the
	// server fills it from the HTTP request.
	Client jsapi.Client
	// Options override the assistant's model options for this turn (the
	// request's "options"; the sandbox is not the caller's to choose).
	// Only the options the assistant lets requests change may be set
	// (assistant.Overridable); any other is refused with a
	// chat.ErrInvalidRequest error whose cause is a *chat.FieldError
	// naming it.
	Options chat.ModelOptions
	// Connector, when set, is the connector the caller chose: allowed only
	// when the assistant's connector_options let a user choose (optional
	// is not false) and list it, or list none and it has the capabilities
	// the filters name.
	Connector string
}

// Response is a finished turn.
type Response struct {
	// Content is the answer text (a Next hook's replacement when it gave one).
	Content   string
	SessionID string
	Usage     chat.Usage
	// Data is what a Next hook returned as {data}.
	Data any
	// FinishReason says why the answer ended (chat.FinishStop, ...):
	// chat.FinishToolCalls when a direct assistant's model waits for the
	// client's tool results.
	FinishReason string
	// ToolCalls are the client's functions the model asked to run (direct
	// assistants; the tool_call events with props client: true).
	ToolCalls []chat.ToolCall
}

// ErrUnknownAssistant is the cause of the error a turn for an assistant
// the app does not have fails with (code chat.ErrInvalidRequest); the HTTP
// server answers it with 404.
var ErrUnknownAssistant = errors.New("unknown assistant")

// ErrClosed is the cause of the error a turn started after Close fails
// with (code chat.ErrShuttingDown); the HTTP server answers it with 503.
var ErrClosed = errors.New("pipeline closed")

// badRequest is a chat.ErrInvalidRequest error: the request is wrong.
func badRequest(format string, args ...any) *chat.Error {
	return chat.Errorf(chat.ErrInvalidRequest, format, args...)
}
