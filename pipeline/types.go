// Package pipeline runs a chat turn from request to done: it resolves the
// assistant, assembles messages, creates the sandbox for sandboxed
// assistants, runs the Create hook, executes (a direct connector call or a
// coding-agent CLI executor), runs the Next hook, always removes the
// sandbox, and records history, usage and an audit line.
package pipeline

import (
	"errors"

	"github.com/agentbox/agentbox/chat"
)

// Request is one chat turn as the server (or an embedder) hands it over.
type Request struct {
	// UserID is the authenticated user; ChatID names the conversation.
	// Both are validated before they touch a path.
	UserID      string
	ChatID      string
	AssistantID string
	// Messages are what the client sent. One user message continues the
	// stored history of (user, chat); several messages are taken as the
	// whole conversation and replace what is stored.
	Messages []chat.Message
	Locale   string
	Metadata map[string]any
	// Options override the assistant's model options for this turn (the
	// request's "options"; the connector and the sandbox are not the
	// caller's to choose).
	Options chat.ModelOptions
}

// Response is a finished turn.
type Response struct {
	// Content is the answer text (a Next hook's replacement when it gave one).
	Content   string
	SessionID string
	Usage     chat.Usage
	// Data is what a Next hook returned as {data}.
	Data any
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
