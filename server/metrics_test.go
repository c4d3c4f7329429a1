package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

const tokenOperator = "tok-operator-5555555555"

// TestMetricsAuth: /metrics takes the operator's token, not a user's; with
// none configured it is refused, except in development mode.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), func(c *Config) { c.MetricsToken = tokenOperator })
	for _, tc := range []struct {
		token string
		code  int
	}{{"", 401}, {tokenAlice, 401}, {"nope", 401}, {tokenOperator, 200}} {
		resp, body := do(t, ts, "GET", "/metrics", tc.token, "")
		if resp.StatusCode != tc.code {
			t.Errorf("token %q: %d %s, want %d", tc.token, resp.StatusCode, body, tc.code)
		}
		if tc.code == 200 && (!strings.Contains(body, "# TYPE agentbox_errors_total counter") || !strings.Contains(body, "go_goroutines")) {
			t.Errorf("metrics body:\n%s", body)
		}
	}
	ts = startServer(t, newFake(t), nil)
	if resp, body := do(t, ts, "GET", "/metrics", tokenAlice, ""); resp.StatusCode != 403 || !strings.Contains(body, "auth.metrics_token") {
		t.Errorf("no metrics token: %d %s", resp.StatusCode, body)
	}
	ts = startServer(t, newFake(t), func(c *Config) { c.Tokens = nil })
	if resp, _ := do(t, ts, "GET", "/metrics", "", ""); resp.StatusCode != 200 {
		t.Errorf("development mode: %d", resp.StatusCode)
	}
	if _, err := New(Config{Backend: newFake(t), Tokens: testTokens, MetricsToken: tokenAlice}); err == nil {
		t.Error("a user's token was taken as the metrics token")
	}
}

// TestErrorsAreCounted: every request that ends in an error counts once
// under its code, on every route, and a refused turn's Retry-After reaches
// the client.
func TestErrorsAreCounted(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		if req.ChatID == "late" { // fails after the stream started
			emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "a"})
			return nil, chat.Errorf(chat.ErrUpstream, "cut")
		}
		return nil, &chat.Error{Code: chat.ErrTooManyTurns, Message: "4 turns already", RetryAfter: 10 * time.Second}
	}
	ts := startServer(t, fb, func(c *Config) { c.MetricsToken = tokenOperator })
	resp, _ := do(t, ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"message":"x"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "10" {
		t.Errorf("native: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, _ = do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","messages":[{"role":"user","content":"x"}],"stream":true}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "10" {
		t.Errorf("openai: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, body := do(t, ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"chat_id":"late","message":"x"}`); resp.StatusCode != 200 || !strings.Contains(body, `"code":"upstream"`) {
		t.Errorf("in-stream failure: %d %s", resp.StatusCode, body)
	}
	do(t, ts, "GET", "/v1/models", "bad-token", "")
	do(t, ts, "GET", "/health", "", "")
	_, body := do(t, ts, "GET", "/metrics", tokenOperator, "")
	for _, want := range []string{
		`agentbox_errors_total{code="too_many_turns"} 2`,
		`agentbox_errors_total{code="upstream"} 1`,
		`agentbox_errors_total{code="auth"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(body, "agentbox_errors_total"))
		}
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// breakerBackend is the fake with circuit breakers to report.
type breakerBackend struct {
	*fakeBackend
	statuses []breaker.Status
}

func (b breakerBackend) Breakers() []breaker.Status { return b.statuses }

// TestHealthShowsBreakers: /health names the connectors whose breakers are
// not closed, without authentication and without anything secret.
func TestHealthShowsBreakers(t *testing.T) {
	t.Parallel()
	fb := breakerBackend{fakeBackend: newFake(t), statuses: []breaker.Status{
		{Name: "anthropic.sonnet", State: breaker.Open, RetryAfter: 12500 * time.Millisecond},
		{Name: "openai.gpt", State: breaker.Closed},
	}}
	s, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/health", nil))
	var got healthBody
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "ok" || len(got.Breakers) != 1 || got.Breakers[0] != (breakerHealth{Connector: "anthropic.sonnet", State: "open", RetryAfter: 13}) {
		t.Errorf("health = %+v", got)
	}
}

// TestServeAbort: a second signal (Abort) ends the drain at once: the
// running turn is canceled long before the drain timeout, and Serve
// returns once it cleaned up; /health says shutting_down meanwhile.
func TestServeAbort(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	started := make(chan struct{})
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "a"})
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger(), DrainTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	go func() {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/api/assistants/qa/chat", strings.NewReader(`{"message":"x"}`))
		req.Header.Set("Authorization", "Bearer "+tokenAlice)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			_, _ = bufio.NewReader(resp.Body).WriteTo(&strings.Builder{})
			resp.Body.Close()
		}
	}()
	<-started
	stop()
	time.Sleep(100 * time.Millisecond)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/health", nil))
	if w.Code != 503 || !strings.Contains(w.Body.String(), "shutting_down") {
		t.Errorf("health while draining: %d %s", w.Code, w.Body)
	}
	t0 := time.Now()
	s.Abort()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still draining after Abort")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("abort took %s", d)
	}
}
