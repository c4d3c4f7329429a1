package bridge

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// api is a model API the proxy serves: it decides which headers pass and
// the shape of the proxy's own errors, so a CLI reports them as it reports
// its provider's.
type api int

const (
	apiAnthropic api = iota // Messages, count_tokens, models
	apiOpenAI               // Responses
	apiGemini               // generateContent, streamGenerateContent, countTokens
)

// apiOf guesses the API of a request the route table has not matched yet
// (a bad token, a path of no route), by its path.
func apiOf(path string) api {
	switch {
	case strings.HasPrefix(path, "/v1beta/"):
		return apiGemini
	case strings.HasPrefix(path, "/v1/responses"), strings.HasPrefix(path, "/v1/chat/"):
		return apiOpenAI
	}
	return apiAnthropic
}

// Error types of refusals, by the Anthropic API's names; the other APIs'
// shapes map them (writeRefusal).
const (
	errInvalid    = "invalid_request_error"
	errAuth       = "authentication_error"
	errPermission = "permission_error"
	errNotFound   = "not_found_error"
	errTooLarge   = "request_too_large"
	errRateLimit  = "rate_limit_error"
	errTimeout    = "timeout_error"
	errAPI        = "api_error"
)

// Reasons of the refusals an operator hears of (Refusal.Reason).
const (
	// RefusedField: the request carried a field, a tool or a header value
	// the proxy does not forward (Refusal.Field names it).
	RefusedField = "field"
	// RefusedCalls: the turn made all the model calls Limits.Calls allows.
	RefusedCalls = "calls"
	// RefusedConnections: the sandbox held all the connections it may.
	RefusedConnections = "connections"
	// RefusedMemory: the request bodies held at once reached their bound
	// (the session's or the server's, ServerLimits).
	RefusedMemory = "memory"
	// RefusedSlow: the request body did not arrive in time.
	RefusedSlow = "slow_body"
	// RefusedTooLarge: the request body exceeds the API's limit.
	RefusedTooLarge = "too_large"
)

// Refusal is a model request the proxy answered itself instead of
// forwarding it, as Options.OnRefuse hears of it.
type Refusal struct {
	// Reason is one of the Refused* codes.
	Reason string
	// Field is the request field or header it is about (RefusedField),
	// as a path: "tools[2].type", "mcp_servers", "anthropic-beta".
	Field string
	// Message is what the CLI was told.
	Message string
}

// refusal is an answer the proxy gives in place of the upstream's: the
// status, the error's type, the message for the CLI; reason, when set,
// makes it a Refusal the operator hears of.
type refusal struct {
	status int
	typ    string
	msg    string
	field  string
	reason string
	// allow is the Allow header of a 405; retryAfter, in seconds, the
	// Retry-After of a 429; noRetry tells the CLI not to retry.
	allow      string
	retryAfter int
	noRetry    bool
	// close ends the connection after the answer (its request was not
	// read whole, or it is one too many).
	close bool
}

// writeRefusal answers with f in the error shape of a: the Anthropic
// API's {"type":"error","error":{type,message}}, the OpenAI API's
// {"error":{message,type,param,code}}, the Gemini API's
// {"error":{code,message,status}}.
func writeRefusal(w http.ResponseWriter, a api, f *refusal) {
	msg := "agentbox bridge: " + f.msg
	var body any
	switch a {
	case apiOpenAI:
		var param any
		if f.field != "" {
			param = f.field
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": f.typ, "param": param, "code": f.reason}}
	case apiGemini:
		body = map[string]any{"error": map[string]any{"code": f.status, "message": msg, "status": grpcStatus(f.status)}}
	default:
		body = map[string]any{"type": "error", "error": map[string]string{"type": f.typ, "message": msg}}
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	if f.allow != "" {
		h.Set("Allow", f.allow)
	}
	if f.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(f.retryAfter))
	}
	if f.noRetry {
		h.Set("X-Should-Retry", "false")
	}
	if f.close {
		h.Set("Connection", "close")
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(f.status)
	_, _ = w.Write(b)
}

// grpcStatus is the Gemini API's status name for an HTTP status.
func grpcStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusMethodNotAllowed:
		return "UNIMPLEMENTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	return "INTERNAL"
}
