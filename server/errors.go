package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/store"
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
	// CodeConflict: the request contradicts the stored state (a
	// previous_response_id that is not its conversation's newest).
	CodeConflict = "conflict"
)

// errorBody is the OpenAI error envelope every endpoint uses:
// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}.
// param names the request field that is wrong (null when none is), code
// is one of the chat.Err* codes or the server's own.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
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

// httpError is the one HTTP error type (caddy's HandlerError): the status
// the server answers with and the error the client sees. Handlers make one
// where they know a status the code does not tell (401, 403, 415, 503);
// everything else is a *chat.Error whose status statusOf gives. It is never
// re-wrapped.
type httpError struct {
	Status int
	Err    *chat.Error
}

func (e *httpError) Error() string { return e.Err.Error() }
func (e *httpError) Unwrap() error { return e.Err }

// errorf returns an *httpError with status, code and a formatted message.
func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{Status: status, Err: chat.Errorf(code, format, args...)}
}

// badRequest is a 400 invalid_request error.
func badRequest(format string, args ...any) *chat.Error {
	return chat.Errorf(chat.ErrInvalidRequest, format, args...)
}

func notFound(format string, args ...any) *chat.Error {
	return chat.Errorf(CodeNotFound, format, args...)
}

// statuses are the HTTP statuses of the error codes: what the code tells a
// client, in HTTP's words. A code not listed is a 500.
var statuses = map[string]int{
	chat.ErrInvalidRequest: http.StatusBadRequest,
	chat.ErrHook:           http.StatusBadRequest, // the assistant's hook refused or failed the request
	chat.ErrRateLimit:      http.StatusTooManyRequests,
	chat.ErrTimeout:        http.StatusGatewayTimeout,
	chat.ErrCanceled:       499, // nginx's "client closed request"
	chat.ErrSandbox:        http.StatusServiceUnavailable,
	chat.ErrAuth:           http.StatusBadGateway, // the model's credentials: the client's own are 401s
	chat.ErrNetwork:        http.StatusBadGateway,
	chat.ErrUpstream:       http.StatusBadGateway,
	chat.ErrExecutor:       http.StatusBadGateway,
	chat.ErrMaxTurns:       http.StatusBadGateway,
	chat.ErrInternal:       http.StatusInternalServerError,
	chat.ErrTooManyTurns:   http.StatusTooManyRequests, // the server's own limit, with Retry-After
	chat.ErrChatBusy:       http.StatusConflict,
	chat.ErrChatAssistant:  http.StatusConflict,
	chat.ErrServerBusy:     http.StatusServiceUnavailable,
	chat.ErrCircuitOpen:    http.StatusServiceUnavailable,
	chat.ErrShuttingDown:   http.StatusServiceUnavailable,
	chat.ErrQuota:          http.StatusInsufficientStorage,
	chat.ErrTooManyUploads: http.StatusTooManyRequests,
	chat.ErrSkillConflict:  http.StatusConflict,
	chat.ErrUnavailable:    http.StatusServiceUnavailable, // until its files are fixed; no Retry-After
	CodeNotFound:           http.StatusNotFound,
	CodeMethodNotAllowed:   http.StatusMethodNotAllowed,
	CodeBodyTooLarge:       http.StatusRequestEntityTooLarge,
	CodeConflict:           http.StatusConflict,
}

// refusal are the codes of the server protecting itself or its upstreams:
// expected under load, so not logged as errors (the metrics count them).
var refusal = map[string]bool{
	chat.ErrServerBusy: true, chat.ErrCircuitOpen: true, chat.ErrShuttingDown: true, chat.ErrQuota: true,
}

// statusOf is the HTTP status of e: its code's, except for the causes that
// say more (what does not exist is a 404, a closing server a 503).
func statusOf(e *chat.Error) int {
	switch {
	case e.Code == chat.ErrInvalidRequest && (errors.Is(e, pipeline.ErrUnknownAssistant) || errors.Is(e, sandbox.ErrNotFound) || errors.Is(e, store.ErrNotFound)):
		return http.StatusNotFound
	case errors.Is(e, pipeline.ErrClosed):
		return http.StatusServiceUnavailable
	}
	if s, ok := statuses[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// asAPIError turns any error into the one HTTP error type: an *httpError
// passes unchanged, a *chat.Error gets its status, the sandbox's sentinels
// (from the files API) theirs; anything else is classified by
// chat.AsError: an internal error whose details stay in the log.
func asAPIError(err error) *httpError {
	var he *httpError
	var ce *chat.Error
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &ce):
	case errors.Is(err, sandbox.ErrInvalidID), errors.Is(err, sandbox.ErrPathOutside):
		ce = &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	case errors.Is(err, sandbox.ErrNotFound):
		ce = &chat.Error{Code: CodeNotFound, Message: err.Error(), Err: err}
	default:
		ce = chat.AsError(err)
	}
	return &httpError{Status: statusOf(ce), Err: ce}
}

func errorJSON(e *httpError) errorBody {
	d := errorDetail{Message: e.Err.Message, Type: openAIType(e.Status), Code: e.Err.Code}
	var fe *chat.FieldError
	if errors.As(e.Err, &fe) && fe.Path != "" {
		d.Param = &fe.Path
	}
	return errorBody{Error: d}
}

// fieldErr is a 400 invalid_request error about the request field path
// (the error's param).
func fieldErr(path, format string, args ...any) *chat.Error {
	fe := &chat.FieldError{Path: path, Problem: fmt.Sprintf(format, args...)}
	return &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
}

// renameParam returns err with the field a refusal names renamed by
// rename, for an endpoint whose request names it otherwise than the
// pipeline's model options do ("" from rename: unchanged).
func renameParam(err error, rename func(path string) string) error {
	ce := chat.AsError(err)
	var fe *chat.FieldError
	if ce.Code != chat.ErrInvalidRequest || !errors.As(ce, &fe) {
		return err
	}
	name := rename(fe.Path)
	if name == "" || name == fe.Path {
		return err
	}
	renamed := &chat.FieldError{Path: name, Problem: fe.Problem}
	return &chat.Error{Code: ce.Code, Message: renamed.Error(), Err: renamed}
}

// optionsError is the 400 for options that did not decode, naming the
// field when the decoder did.
func optionsError(err error) *chat.Error {
	var fe *chat.FieldError
	if errors.As(err, &fe) {
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
	}
	return badRequest("%v", err)
}

// writeError writes err as a JSON error response. Internal errors are
// logged with their cause; the client sees only the public message. An
// error with a RetryAfter gets a Retry-After header (whole seconds, at
// least 1).
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	e := asAPIError(err)
	if e.Status >= 500 && !refusal[e.Err.Code] && log != nil {
		log.Error("request failed", "code", e.Err.Code, "err", err)
	}
	noteError(w, e.Err.Code)
	if ra := e.Err.RetryAfter; ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ra.Seconds()))))
	}
	status := e.Status
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	if status == http.StatusUnauthorized {
		hdr := `Bearer realm="agentbox"`
		if e.Err.Code == chat.ErrAuth && e.Err.Message != msgMissingToken {
			hdr += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", hdr)
	}
	writeJSON(w, status, errorJSON(e))
}

// writeRawJSON writes b, already JSON, as the response body with status.
func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON writes v as the JSON response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
