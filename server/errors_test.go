package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
