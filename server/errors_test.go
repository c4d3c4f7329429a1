package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

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
	}
	for _, tc := range cases {
		e := asAPIError(tc.err)
		if e.Status != tc.status || e.Err.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, e.Status, e.Err.Code, tc.status, tc.code)
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
