package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

// Error codes the server itself produces, beside the chat.Err* codes the
// pipeline uses.
const (
	// CodeNotFound: an unknown assistant, chat, file or route.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed: the route exists but not for this method.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeBodyTooLarge: the request body is over the server's limit.
	CodeBodyTooLarge = "body_too_large"
)

// errorBody is the OpenAI-style error envelope every endpoint uses:
// {"error": {"message": ..., "type": ..., "code": ...}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

// openAIType maps an HTTP status to the error "type" OpenAI clients know.
func openAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func notFound(format string, args ...any) *pipeline.Error {
	return pipeline.Errorf(http.StatusNotFound, CodeNotFound, format, args...)
}

// asAPIError turns any error into the one HTTP error type. A
// *pipeline.Error passes unchanged; sandbox sentinels get their status;
// anything else is an internal error whose details stay in the log.
func asAPIError(err error) *pipeline.Error {
	var pe *pipeline.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, sandbox.ErrInvalidID):
		return &pipeline.Error{Status: http.StatusBadRequest, Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	case errors.Is(err, sandbox.ErrPathOutside):
		return &pipeline.Error{Status: http.StatusBadRequest, Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	case errors.Is(err, sandbox.ErrNotFound):
		return &pipeline.Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error(), Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &pipeline.Error{Status: http.StatusGatewayTimeout, Code: chat.ErrTimeout, Message: "the request timed out", Err: err}
	case errors.Is(err, context.Canceled):
		return &pipeline.Error{Status: 499, Code: chat.ErrCanceled, Message: "the request was canceled", Err: err}
	default:
		return &pipeline.Error{Status: http.StatusInternalServerError, Code: chat.ErrInternal, Message: "internal error", Err: err}
	}
}

func errorJSON(e *pipeline.Error) errorBody {
	return errorBody{Error: errorDetail{Message: e.Message, Type: openAIType(e.Status), Code: e.Code}}
}

// writeError writes err as a JSON error response. Internal errors are
// logged with their cause; the client sees only the public message.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	e := asAPIError(err)
	if e.Status >= 500 && log != nil {
		log.Error("request failed", "code", e.Code, "err", err)
	}
	status := e.Status
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	if status == http.StatusUnauthorized {
		hdr := `Bearer realm="agentbox"`
		if e.Code == chat.ErrAuth && e.Message != msgMissingToken {
			hdr += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", hdr)
	}
	writeJSON(w, status, errorJSON(e))
}

// writeJSON writes v as the JSON response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"internal error","type":"server_error","code":"internal"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
