// Package pipeline runs a chat turn from request to done: it resolves the
// assistant, assembles messages, creates the sandbox for sandboxed
// assistants, runs the Create hook, executes (a direct connector call or a
// coding-agent CLI executor), runs the Next hook, always removes the
// sandbox, and records history, usage and an audit line.
package pipeline

import (
	"fmt"
	"net/http"

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
	// Options override the assistant's model options for this turn.
	Options map[string]any
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

// Error is a failed turn with the HTTP status and chat error code a
// client should see. It is created once where the failure is understood
// and never re-wrapped.
type Error struct {
	Status  int
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Err.Error() != e.Message {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 invalid_request error.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, chat.ErrInvalidRequest, format, args...)
}
