package connector

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
)

// Failure is what a failed Stream call tells beyond its *chat.Error. Stream
// fails with a *chat.Error whose code is one of chat.ErrTimeout,
// chat.ErrRateLimit, chat.ErrAuth, chat.ErrNetwork, chat.ErrInvalidRequest,
// chat.ErrUpstream and chat.ErrCanceled, and whose message says what
// happened and what to do (never with the API key); its cause is a
// *Failure (errors.As finds it) with the provider's details.
type Failure struct {
	// Status is the HTTP status of the provider's answer (0 when there was
	// none).
	Status int
	// Retryable reports whether the same request may succeed later. It is
	// false once output was emitted, since a retry would repeat it.
	Retryable bool
	// RetryAfter is the wait the provider asked for (Retry-After), if any.
	RetryAfter time.Duration
	// RequestID is the provider's request id, for its support.
	RequestID string
	// Err is the underlying cause, if any.
	Err error
}

// Error describes the cause: the underlying error, or the provider's
// status and request id.
func (f *Failure) Error() string {
	if f.Err != nil {
		return f.Err.Error()
	}
	s := "provider call failed"
	if f.Status != 0 {
		s = fmt.Sprintf("HTTP %d", f.Status)
	}
	if f.RequestID != "" {
		s += " [request id " + f.RequestID + "]"
	}
	return s
}

// Unwrap returns the underlying cause.
func (f *Failure) Unwrap() error { return f.Err }

// fail is a failed call: code and message for the client, f its cause
// (nil when the call was refused before it was sent).
func fail(code, message string, f *Failure) *chat.Error {
	if f == nil {
		return &chat.Error{Code: code, Message: message}
	}
	return &chat.Error{Code: code, Message: message, Err: f}
}

// failureOf returns the details of an error made by fail (empty ones for
// any other).
func failureOf(e *chat.Error) *Failure {
	if f, ok := e.Err.(*Failure); ok {
		return f
	}
	return &Failure{}
}

// Sentinel causes of timeouts the client imposes itself.
var (
	errTotalTimeout = errors.New("connector timeout")
	errFirstByte    = errors.New("first byte timeout")
	errIdle         = errors.New("idle timeout")
)

// errStreamCut is the cause of a stream that ended without its end marker.
var errStreamCut = errors.New("stream ended before completion")

// hints say what to do, by class.
var hints = map[string]string{
	chat.ErrAuth:           "check the connector's API key and that it may use this model",
	chat.ErrRateLimit:      "wait and retry, or lower the request rate",
	chat.ErrInvalidRequest: "check the connector's model and host and the assistant's options",
	chat.ErrUpstream:       "the provider had a problem; retry later",
	chat.ErrNetwork:        "check that the host is right and reachable from this server",
	chat.ErrTimeout:        "retry, or raise the connector's timeout",
}

// statusError classifies a non-200 answer from the provider.
func statusError(provider string, status int, h http.Header, body []byte, key string) *chat.Error {
	e := &Failure{Status: status, RequestID: requestID(h), RetryAfter: retryAfter(h, time.Now())}
	class := ""
	pmsg, ptype, pcode := providerError(body)
	what := ""
	switch {
	case status == http.StatusUnauthorized:
		class, what = chat.ErrAuth, "rejected the API key"
	case status == http.StatusForbidden:
		class, what = chat.ErrAuth, "refused access"
	case status == http.StatusRequestTimeout:
		class, what, e.Retryable = chat.ErrTimeout, "timed out reading the request", true
	case status == http.StatusConflict:
		class, what, e.Retryable = chat.ErrUpstream, "reported a conflict", true
	case status == http.StatusTooManyRequests:
		class, what, e.Retryable = chat.ErrRateLimit, "is rate limiting requests", true
	case status == http.StatusNotFound:
		class, what = chat.ErrInvalidRequest, "has no such model or endpoint"
	case status == http.StatusRequestEntityTooLarge:
		class, what = chat.ErrInvalidRequest, "refused the request as too large"
	case status == 529:
		class, what, e.Retryable = chat.ErrUpstream, "is overloaded", true
	case status == http.StatusGatewayTimeout:
		class, what, e.Retryable = chat.ErrTimeout, "timed out (gateway timeout)", true
	case status >= 500:
		class, what, e.Retryable = chat.ErrUpstream, "failed", true
	case status >= 400:
		class, what = chat.ErrInvalidRequest, "rejected the request"
	default:
		class, what = chat.ErrUpstream, "answered with an unexpected status"
	}
	// The provider's error type refines the class where the status is
	// ambiguous (OpenAI reports exhausted quota as 429).
	hint := hints[class]
	switch t := ptype + " " + pcode; {
	case strings.Contains(t, "insufficient_quota") || strings.Contains(t, "billing"):
		class, e.Retryable, what = chat.ErrRateLimit, false, "reports the account's quota is used up"
		hint = "add credit or raise the plan's limits with the provider"
	case strings.Contains(t, "context_length_exceeded"):
		class, e.Retryable = chat.ErrInvalidRequest, false
		hint = "shorten the conversation or lower max_tokens"
	case strings.Contains(t, "overloaded"):
		class, e.Retryable = chat.ErrUpstream, true
	}
	// Anthropic's SDKs obey x-should-retry; so do we.
	switch h.Get("X-Should-Retry") {
	case "true":
		e.Retryable = true
	case "false":
		e.Retryable = false
	}
	if class == chat.ErrRateLimit && e.RetryAfter > 0 {
		hint = fmt.Sprintf("the provider asks to retry after %s; %s", e.RetryAfter.Round(time.Second), hint)
	}
	return fail(class, compose(fmt.Sprintf("%s API %s (HTTP %d)", provider, what, status), e.RequestID, pmsg, key, hint), e)
}

// streamError classifies an error event inside a 200 stream (Anthropic
// "error" events, OpenAI chunks with an "error" object).
func streamError(provider string, data []byte, reqID, key string) *chat.Error {
	pmsg, ptype, pcode := providerError(data)
	e := &Failure{RequestID: reqID, Retryable: true}
	class := chat.ErrUpstream
	what := "sent an error in the stream"
	t := ptype + " " + pcode
	switch {
	case strings.Contains(t, "overloaded"):
		what = "is overloaded"
	case strings.Contains(t, "rate_limit"):
		class = chat.ErrRateLimit
		what = "is rate limiting requests"
	case strings.Contains(t, "authentication") || strings.Contains(t, "permission"):
		class, e.Retryable = chat.ErrAuth, false
	case strings.Contains(t, "invalid_request") || strings.Contains(t, "not_found") || strings.Contains(t, "too_large"):
		class, e.Retryable = chat.ErrInvalidRequest, false
	}
	return fail(class, compose(provider+" API "+what, reqID, pmsg, key, hints[class]), e)
}

// compose builds an error message: what happened, the request id, the
// provider's own words (redacted), and what to do.
func compose(what, reqID, pmsg, key, hint string) string {
	var b strings.Builder
	b.WriteString(what)
	if reqID != "" {
		b.WriteString(" [request id ")
		b.WriteString(reqID)
		b.WriteString("]")
	}
	if pmsg = strings.TrimSpace(redact(pmsg, key)); pmsg != "" {
		b.WriteString(": ")
		b.WriteString(strings.TrimRight(pmsg, "."))
	}
	if hint != "" {
		b.WriteString("; ")
		b.WriteString(hint)
	}
	return b.String()
}

// providerError extracts message, type and code from an error body in the
// OpenAI ({"error":{"message","type","code"}}) or Anthropic
// ({"type":"error","error":{"type","message"}}) shape, or a bare
// {"message"}/{"detail"}/{"error":"..."}; a body that is not JSON is used as
// text, shortened.
func providerError(body []byte) (msg, typ, code string) {
	const maxText = 500
	if !gjson.ValidBytes(body) {
		s := strings.Join(strings.Fields(string(body)), " ")
		if len(s) > maxText {
			s = s[:maxText] + "…"
		}
		if strings.HasPrefix(s, "<") { // an HTML error page says nothing useful
			s = ""
		}
		return s, "", ""
	}
	r := gjson.ParseBytes(body)
	e := r.Get("error")
	switch {
	case e.IsObject():
		msg, typ, code = e.Get("message").String(), e.Get("type").String(), e.Get("code").String()
	case e.Type == gjson.String:
		msg = e.String()
	default:
		msg = r.Get("message").String()
		if msg == "" {
			msg = r.Get("detail").String()
		}
	}
	if len(msg) > 4*maxText {
		msg = msg[:4*maxText] + "…"
	}
	return msg, typ, code
}

// requestID returns the provider's request id header, if any.
func requestID(h http.Header) string {
	for _, k := range []string{"Request-Id", "X-Request-Id"} {
		if v := h.Get(k); v != "" && len(v) <= 200 {
			return v
		}
	}
	return ""
}

// retryAfter reads retry-after-ms, or Retry-After in seconds or as an HTTP
// date. Nonsense and negative values are ignored.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// transportError classifies an error of sending a request or reading a
// response. ctx is the caller's context (with the Stream timeout), actx the
// attempt's context (with the first-byte and idle watchdog).
func transportError(provider, host string, ctx, actx context.Context, err error, cfg *Config) *chat.Error {
	// The caller's context first: a cancellation or deadline there explains
	// whatever error the transport saw.
	if ctx.Err() != nil {
		return contextError(provider, ctx, cfg)
	}
	switch context.Cause(actx) {
	case errFirstByte:
		return fail(chat.ErrTimeout, fmt.Sprintf(
			"%s API sent no output within %s of the request (first byte timeout); the provider may be overloaded: retry, or raise the connector's first byte timeout",
			provider, cfg.FirstByteTimeout), &Failure{Retryable: true, Err: err})
	case errIdle:
		return fail(chat.ErrTimeout, fmt.Sprintf(
			"%s API stopped sending output for %s in the middle of the answer (idle timeout); retry, or raise the connector's idle timeout",
			provider, cfg.IdleTimeout), &Failure{Retryable: true, Err: err})
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr):
		return fail(chat.ErrNetwork, fmt.Sprintf(
			"%s API at %s presented a TLS certificate this server does not trust (%s); check the host, or install the CA that signed it",
			provider, host, rootCause(err)), &Failure{Err: err})
	case errors.As(err, &dnsErr):
		return fail(chat.ErrNetwork, fmt.Sprintf(
			"cannot resolve the %s API host %s (%s); check the connector's host and this server's DNS",
			provider, host, rootCause(err)), &Failure{Retryable: !dnsErr.IsNotFound, Err: err})
	case errors.Is(err, errStreamCut):
		return fail(chat.ErrUpstream, fmt.Sprintf(
			"%s API stream ended before completion; the answer is incomplete: retry", provider), &Failure{Retryable: true, Err: err})
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fail(chat.ErrTimeout, fmt.Sprintf(
			"%s API at %s timed out (%s); %s", provider, host, rootCause(err), hints[chat.ErrTimeout]), &Failure{Retryable: true, Err: err})
	}
	return fail(chat.ErrNetwork, fmt.Sprintf(
		"cannot talk to the %s API at %s (%s); %s", provider, host, rootCause(err), hints[chat.ErrNetwork]), &Failure{Retryable: true, Err: err})
}

// contextError describes why the caller's context ended.
func contextError(provider string, ctx context.Context, cfg *Config) *chat.Error {
	cause := context.Cause(ctx)
	switch {
	case cause == errTotalTimeout:
		return fail(chat.ErrTimeout, fmt.Sprintf(
			"%s API did not finish the answer within the connector's timeout of %s; ask for a shorter answer or raise the timeout",
			provider, cfg.Timeout), &Failure{Err: context.DeadlineExceeded})
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail(chat.ErrTimeout, fmt.Sprintf(
			"the request's deadline passed before the %s API finished the answer", provider), &Failure{Err: cause})
	default:
		return fail(chat.ErrCanceled, fmt.Sprintf(
			"the %s request was canceled (%v)", provider, cause), &Failure{Err: cause})
	}
}

// rootCause returns the innermost error's text, which for net/http errors
// is the useful part ("connection refused" rather than the whole chain with
// the URL).
func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		if _, ok := u.(interface{ Unwrap() []error }); ok {
			return u.Error()
		}
		err = u
	}
}

// keyLike matches API-key-shaped tokens a provider may echo back, masked or
// not ("sk-proj-****abcd", "sk-ant-api03-...").
var keyLike = regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_\-*.]{4,}`)

// redact removes the key, and anything that looks like a key, from s.
func redact(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}
