package connector

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/scripted"
)

// fastRetry keeps scripted retry tests quick.
var fastRetry = RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}

func newScriptedClient(t *testing.T, script string, mod func(*Config)) Client {
	t.Helper()
	cfg := Config{Type: TypeScripted, Script: "testdata/" + script, Retry: fastRetry}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestScripted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		script    string
		cfg       func(*Config)
		class     string // "" = success
		retryable bool
		contains  string
		attempts  int
		content   string
		events    []string
	}{
		{
			name: "answer with thinking", script: "answer.yaml", attempts: 1,
			content: "Hello! How can I help you today?",
		},
		{
			name: "500 529 429 then success", script: "errors-then-answer.yaml",
			cfg: func(c *Config) { c.Retry.MaxAttempts = 4 }, attempts: 4, content: "Sorry for the wait.",
		},
		{
			name: "500 529 429 with three attempts", script: "errors-then-answer.yaml",
			class: chat.ErrRateLimit, retryable: true, contains: "(HTTP 429): Rate limited, slow down; wait and retry, or lower the request rate (gave up after 3 attempts)",
		},
		{
			name: "cut after output is not retried", script: "cut.yaml",
			class: chat.ErrUpstream, contains: "stream ended before completion",
			events: []string{"start 1 text", "delta 1 text This answer is cut off ", "delta 1 text in the middle of the ", "end 1 text"},
		},
		{
			name: "stall then retry", script: "stall.yaml",
			// Generous: the retry must answer within it on a loaded machine.
			cfg:      func(c *Config) { c.FirstByteTimeout = 500 * time.Millisecond },
			attempts: 2, content: "Back again.",
		},
		{
			name: "stall without retry is a first byte timeout", script: "stall.yaml",
			cfg:   func(c *Config) { c.FirstByteTimeout = 100 * time.Millisecond; c.Retry.MaxAttempts = 1 },
			class: chat.ErrTimeout, retryable: true, contains: "first byte timeout",
		},
		{
			name: "tool call surfaced", script: "tool.yaml", attempts: 1, content: "Let me look that up.",
			events: []string{"start 1 text", "delta 1 text Let me look that up.", "end 1 text",
				`start 2 tool_call lookup toolu_lookup1 {"query":"weather in Paris"}`, "end 2 tool_call"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newScriptedClient(t, tt.script, tt.cfg)
			var ev chattest.Recorder
			resp, err := c.Stream(context.Background(), &Request{System: "Be kind.", Messages: userMsg("hello")}, ev.Emit)
			got := compact(t, ev.Events())
			if tt.events != nil && !reflect.DeepEqual(got, tt.events) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.events, "\n"))
			}
			if tt.class != "" {
				var ce *chat.Error
				if !errors.As(err, &ce) || ce.Code != tt.class || failureOf(ce).Retryable != tt.retryable || !strings.Contains(ce.Message, tt.contains) {
					t.Fatalf("err = %v (%+v), want class %s retryable %v containing %q", err, ce, tt.class, tt.retryable, tt.contains)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != tt.content || resp.Attempts != tt.attempts {
				t.Errorf("response = %+v", resp)
			}
		})
	}
}

func TestScriptedAnswerDetails(t *testing.T) {
	t.Parallel()
	c := newScriptedClient(t, "answer.yaml", nil)
	if c.Type() != TypeScripted || c.Model() != "llmtest" {
		t.Errorf("Type/Model = %s/%s", c.Type(), c.Model())
	}
	for i := range 2 { // each call replays the script from its start
		var ev chattest.Recorder
		resp, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if resp.Thinking != "The user greets me; answer briefly." || resp.FinishReason != "end_turn" {
			t.Errorf("call %d: response = %+v", i, resp)
		}
		if resp.Usage.InputTokens != 12 || resp.Usage.OutputTokens != 9 || resp.Usage.Turns != 1 {
			t.Errorf("call %d: usage = %+v", i, resp.Usage)
		}
		got := compact(t, ev.Events())
		if len(got) < 4 || got[0] != "start 1 thinking" || !slicesContain(got, "start 2 text") {
			t.Errorf("call %d: events = %v", i, got)
		}
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestStartScripted(t *testing.T) {
	t.Parallel()
	if _, err := StartScripted("testdata/missing.yaml"); err == nil {
		t.Fatal("StartScripted(missing) succeeded")
	}
	srv, err := StartScripted("testdata/answer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q", srv.URL)
	}
	// The same server speaks both APIs; drive it with the OpenAI client.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := New(Config{Type: TypeOpenAI, Host: srv.URL + "/v1", Model: "m", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	var ev chattest.Recorder
	resp, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hello! How can I help you today?" || resp.Thinking == "" || resp.Usage.OutputTokens != 9 {
		t.Errorf("response = %+v", resp)
	}
	compact(t, ev.Events())
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("requests = %+v", reqs)
	}
}

// TestProvidersAgainstScripted runs the OpenAI and Anthropic clients against
// a scripted model server: retried errors, then a tool call, then a cut stream.
func TestProvidersAgainstScripted(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{TypeOpenAI, TypeAnthropic} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
				{Error: &scripted.HTTPError{Status: 500}},
				{Error: &scripted.HTTPError{Status: 529}},
				{Thinking: "Need a tool.", Text: "Checking.", ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "lookup", Input: map[string]any{"q": "x"}}}},
				{Text: "This one breaks after a few chunks of text, mid-answer, for good.", CutAfter: 4},
				{Text: "never"},
			}})
			t.Cleanup(srv.Close)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			c, err := New(Config{Type: typ, Host: srv.URL, Key: testKey, Model: "m", HTTPClient: &http.Client{Transport: tr}, Retry: fastRetry})
			if err != nil {
				t.Fatal(err)
			}
			var ev chattest.Recorder
			resp, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Attempts != 3 || resp.Content != "Checking." || resp.Thinking != "Need a tool." || len(resp.ToolCalls) != 1 {
				t.Errorf("response = %+v", resp)
			}
			if tc := resp.ToolCalls[0]; tc.Name != "lookup" || tc.ID != "call_1" || string(tc.Input) != `{"q":"x"}` {
				t.Errorf("tool call = %+v (input %s)", tc, tc.Input)
			}
			compact(t, ev.Events())

			var ev2 chattest.Recorder
			_, err = c.Stream(context.Background(), &Request{Messages: userMsg("again")}, ev2.Emit)
			var ce *chat.Error
			if !errors.As(err, &ce) || ce.Code != chat.ErrUpstream || failureOf(ce).Retryable {
				t.Fatalf("cut stream: err = %v", err)
			}
			compact(t, ev2.Events())
			if n := srv.Remaining(); n != 1 {
				t.Errorf("Remaining() = %d, want 1 (the cut stream must not be retried)", n)
			}
			for _, r := range srv.Requests() {
				if typ == TypeAnthropic && r.Header.Get("X-Api-Key") != testKey {
					t.Errorf("x-api-key header missing")
				}
			}
		})
	}
}
