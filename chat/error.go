package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Error codes carried by error events, the done event's error and the
// error bodies of the HTTP API.
const (
	ErrTimeout        = "timeout"
	ErrRateLimit      = "rate_limit"
	ErrAuth           = "auth"
	ErrNetwork        = "network"
	ErrInvalidRequest = "invalid_request"
	ErrUpstream       = "upstream"
	ErrSandbox        = "sandbox"
	ErrExecutor       = "executor"
	ErrHook           = "hook"
	ErrCanceled       = "canceled"
	ErrInternal       = "internal"
	ErrMaxTurns       = "max_turns"

	// Limits and protections of the server (issue 17). Errors with these
	// codes usually carry RetryAfter.

	// ErrTooManyTurns: the user already runs as many turns and terminals
	// as allowed at once (limits.turns_per_user), or has as many terminals
	// open as allowed (limits.terminals_per_user).
	ErrTooManyTurns = "too_many_turns"
	// ErrChatBusy: another turn runs on the chat and this one could not
	// wait for it (the chat's queue is full, or the wait passed).
	ErrChatBusy = "chat_busy"
	// ErrChatAssistant: the chat belongs to another assistant than the
	// one the request names.
	ErrChatAssistant = "chat_assistant"
	// ErrServerBusy: the server runs as many sandboxes as allowed and none
	// became free within the wait (limits.sandboxes).
	ErrServerBusy = "server_busy"
	// ErrCircuitOpen: the connector's upstream failed repeatedly; calls
	// fail fast until a probe succeeds.
	ErrCircuitOpen = "circuit_open"
	// ErrShuttingDown: the server is shutting down and takes no new turns.
	ErrShuttingDown = "shutting_down"
	// ErrQuota: the user's workspaces are at a bound
	// (limits.workspaces_per_user, limits.disk_per_user), or an upload does
	// not fit in its workspace (sandbox.max_disk).
	ErrQuota = "quota_exceeded"
	// ErrTooManyUploads: the user already sends as many uploads at once as
	// allowed (limits.uploads_per_user).
	ErrTooManyUploads = "too_many_uploads"

	// ErrUnavailable: the assistant's definition has errors, so it does
	// not run (the app serves its other assistants); the message names
	// the first error with its file and position.
	ErrUnavailable = "assistant_unavailable"

	// ErrSkillConflict: a skill proposal's state does not allow the
	// request: it is already approved or rejected, a test of it runs, or
	// the assistant's own skills (which win a name clash) have its name.
	ErrSkillConflict = "skill_conflict"
)

// Error is a failure with a code a client can act on. It is made once,
// where the failure is understood (the connector classifies a provider's
// answer, a CLI executor the end of its run, the pipeline its own checks),
// and passed on as it is, never re-wrapped: what the client sees is Code
// and Message, and only the HTTP server turns the code into a status.
type Error struct {
	// Code is one of the Err* codes (the HTTP server adds a few of its
	// own).
	Code string
	// Message says what happened and, where it can, what to do. It is
	// shown to clients, so it never holds secrets or internal details.
	Message string
	// Err is the cause, for the log and for errors.Is and errors.As; it is
	// never shown to clients.
	Err error
	// RetryAfter, when positive, is how long the client should wait before
	// it tries again (the HTTP server sends it as Retry-After).
	RetryAfter time.Duration `json:",omitempty"`
}

// Error renders "code: message", and the cause when the message does not
// already tell it.
func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Err != nil {
		if c := e.Err.Error(); c != "" && !strings.Contains(e.Message, c) {
			s += ": " + c
		}
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message, without a
// cause.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error. An *Error (or an error wrapping one)
// is returned as it is; a context cancellation is ErrCanceled and a
// passed deadline ErrTimeout; anything else is ErrInternal with the
// message "internal error", its details kept in Err for the log. AsError
// of nil is nil. It is the one place a failure nobody classified gets its
// code.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.Canceled):
		return &Error{Code: ErrCanceled, Message: "the request was canceled", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: ErrTimeout, Message: "the request timed out", Err: err}
	}
	return &Error{Code: ErrInternal, Message: "internal error", Err: err}
}
