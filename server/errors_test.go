package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

// TestStatusOf: the server alone turns error codes (and the causes that say
// more) into HTTP statuses.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"unknown assistant", &chat.Error{Code: chat.ErrInvalidRequest, Message: "unknown assistant", Err: pipeline.ErrUnknownAssistant}, 404, chat.ErrInvalidRequest},
		{"no workspace", &chat.Error{Code: chat.ErrInvalidRequest, Message: "no workspace", Err: fmt.Errorf("x: %w", sandbox.ErrNotFound)}, 404, chat.ErrInvalidRequest},
		{"bad input", chat.Errorf(chat.ErrInvalidRequest, "bad"), 400, chat.ErrInvalidRequest},
		{"hook", chat.Errorf(chat.ErrHook, "Create hook: no"), 400, chat.ErrHook},
		{"canceled", chat.Errorf(chat.ErrCanceled, "gone"), 499, chat.ErrCanceled},
		{"closing", &chat.Error{Code: chat.ErrInternal, Message: "server is shutting down", Err: pipeline.ErrClosed}, 503, chat.ErrInternal},
		{"rate limit", chat.Errorf(chat.ErrRateLimit, "slow down"), 429, chat.ErrRateLimit},
		{"timeout", chat.Errorf(chat.ErrTimeout, "late"), 504, chat.ErrTimeout},
		{"upstream", chat.Errorf(chat.ErrUpstream, "down"), 502, chat.ErrUpstream},
		{"model key", chat.Errorf(chat.ErrAuth, "key rejected"), 502, chat.ErrAuth},
		{"sandbox", chat.Errorf(chat.ErrSandbox, "engine down"), 503, chat.ErrSandbox},
		{"unknown code", chat.Errorf("novel", "?"), 500, "novel"},
		{"http error", errorf(http.StatusUnauthorized, chat.ErrAuth, "no token"), 401, chat.ErrAuth},
		{"wrapped", fmt.Errorf("ctx: %w", chat.Errorf(chat.ErrRateLimit, "x")), 429, chat.ErrRateLimit},
		{"sandbox sentinel", fmt.Errorf("open: %w", sandbox.ErrPathOutside), 400, chat.ErrInvalidRequest},
		{"deadline", context.DeadlineExceeded, 504, chat.ErrTimeout},
		{"plain", errors.New("db is on fire"), 500, chat.ErrInternal},
		{"user limit", chat.Errorf(chat.ErrTooManyTurns, "4 turns"), 429, chat.ErrTooManyTurns},
		{"chat busy", chat.Errorf(chat.ErrChatBusy, "busy"), 409, chat.ErrChatBusy},
		{"other assistant", chat.Errorf(chat.ErrChatAssistant, "coder's"), 409, chat.ErrChatAssistant},
		{"no sandbox slot", chat.Errorf(chat.ErrServerBusy, "full"), 503, chat.ErrServerBusy},
		{"breaker", chat.Errorf(chat.ErrCircuitOpen, "failing"), 503, chat.ErrCircuitOpen},
		{"shutting down", chat.Errorf(chat.ErrShuttingDown, "bye"), 503, chat.ErrShuttingDown},
	}
	for _, tc := range cases {
		e := asAPIError(tc.err)
		if e.Status != tc.status || e.Err.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, e.Status, e.Err.Code, tc.status, tc.code)
		}
	}
}

// TestRetryAfter: an error that says when to come back gets Retry-After, in
// whole seconds rounded up.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ra   time.Duration
		want string
	}{{0, ""}, {300 * time.Millisecond, "1"}, {5 * time.Second, "5"}, {90*time.Second + time.Millisecond, "91"}} {
		w := httptest.NewRecorder()
		writeError(w, nil, &chat.Error{Code: chat.ErrTooManyTurns, Message: "slow down", RetryAfter: tc.ra})
		if got := w.Header().Get("Retry-After"); got != tc.want || w.Code != 429 {
			t.Errorf("RetryAfter %s: %d Retry-After %q, want 429 %q", tc.ra, w.Code, got, tc.want)
		}
	}
}

// TestBadOptions: request options are decoded strictly, and a problem is a
// 400 that names the field.
func TestBadOptions(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	for _, tc := range []struct{ path, body, want string }{
		{"/api/assistants/qa/chat", `{"message":"x","options":{"max_turns":3}}`, `options.max_turns: unknown field`},
		{"/api/assistants/qa/chat", `{"message":"x","options":{"temperature":"hot"}}`, `options.temperature: want a number, got a string`},
		{"/api/assistants/qa/chat", `{"message":"x","options":{"connector":"other"}}`, `options.connector: unknown field`},
		{"/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, `temperature: want a number, got a string`},
		{"/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":"x"}],"stop":3}`, `stop: want a string or a list of strings, got a number`},
	} {
		resp, out := do(t, ts, "POST", tc.path, tokenAlice, tc.body)
		if resp.StatusCode != 400 || !strings.Contains(out, tc.want) {
			t.Errorf("%s %s = %d %s, want 400 %q", tc.path, tc.body, resp.StatusCode, out, tc.want)
		}
	}
	if n := fb.numCalls(); n != 0 {
		t.Errorf("%d turns ran", n)
	}
}
