package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/scripted"
)

// TestRequestOptionsPolicy: a request changes only what the assistant lets
// it; anything else fails before the model is called, naming the option.
func TestRequestOptionsPolicy(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}}, "")
	limit := 1000
	e.app.Assistants["qa"].Options.MaxTokens = &limit
	// A model Yao does not know, that declares nothing: no tool calls.
	e.app.Connectors["plain.llm"] = &assistant.Connector{ID: "plain.llm", Type: "openai", Options: assistant.ConnectorOptions{Host: e.llm.URL, Key: "k", Model: "llama3.3"}}
	e.app.Assistants["plain"] = &assistant.Assistant{ID: "plain", Connector: "plain.llm", Overridable: assistant.DefaultOverridable(false)}
	tools := json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`)
	tests := []struct {
		assistant string
		opts      string
		msgs      []chat.Message
		field     string
		problem   string
	}{
		{"qa", `{"model": "gpt-5"}`, nil, "model", `assistant "qa" does not let requests change it`},
		{"qa", `{"max_tokens": 2000}`, nil, "max_tokens", "requests may lower it, not raise it"},
		{"qa", `{"reasoning_effort": "high"}`, nil, "reasoning_effort", "does not let requests change it"},
		{"coder", `{"temperature": 0.2}`, nil, "temperature", "chooses its own sampling"},
		{"plain", `{"tools": ` + string(tools) + `}`, nil, "tools", "the model takes no tool calls"},
		{"coder", `{"tools": ` + string(tools) + `}`, nil, "tools", "a client's functions cannot be offered to it"},
		{"coder", `{}`, []chat.Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c", Name: "f"}}},
			{Role: "tool", ToolCallID: "c", Content: "r"}}, "messages[1]", "tool results and tool calls cannot be sent to it"},
	}
	for _, tt := range tests {
		opts, err := chat.DecodeModelOptions("", []byte(tt.opts))
		if err != nil {
			t.Fatal(err)
		}
		msgs := tt.msgs
		if msgs == nil {
			msgs = user("hi")
		}
		var rec chattest.Recorder
		_, err = e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: tt.assistant, Messages: msgs, Options: opts}, rec.Emit)
		var ce *chat.Error
		var fe *chat.FieldError
		if !errors.As(err, &ce) || ce.Code != chat.ErrInvalidRequest || !errors.As(err, &fe) || fe.Path != tt.field || !strings.Contains(ce.Message, tt.problem) {
			t.Errorf("%s %s: err = %v, want invalid_request naming %s: %s", tt.assistant, tt.opts, err, tt.field, tt.problem)
		}
		if d := rec.Last(); d.Event != chat.Done || d.Final.Error != chat.ErrInvalidRequest {
			t.Errorf("%s %s: last event %+v", tt.assistant, tt.opts, d)
		}
	}
	if n := len(e.llm.Requests()); n != 0 {
		t.Errorf("the model got %d requests for refused ones", n)
	}
	if n := e.rt.Created(); n != 0 {
		t.Errorf("%d sandboxes created for refused requests", n)
	}
	// What is allowed goes through.
	temp := 0.5
	lower := 200
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("hi"),
		Options: chat.ModelOptions{Temperature: &temp, MaxCompletionTokens: &lower, Tools: tools}}, nil); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.Unmarshal(e.llm.TurnRequests()[0].Body, &body)
	if _, both := body["max_tokens"]; both || body["max_completion_tokens"] != 200.0 || body["temperature"] != 0.5 {
		t.Errorf("model request = %v: the request's max_completion_tokens must replace the assistant's max_tokens", body)
	}
}

// TestClientToolLoop: a direct assistant's model asks for the client's
// function; the turn ends with finish reason tool_calls and the call,
// stored with the answer; the client's next request with the tool result
// continues, over the OpenAI and the Anthropic connector alike.
func TestClientToolLoop(t *testing.T) {
	for _, typ := range []string{"openai", "anthropic"} {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{
				{Text: "Let me check.", ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "get_weather", Input: map[string]any{"city": "Paris"}}}},
				{When: &scripted.Match{AfterToolResult: "get_weather"}, Text: "It is 18C in Paris."},
			}}, "")
			e.app.Connectors["test.llm"].Type = typ
			tools := json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)
			ctx := context.Background()
			var rec chattest.Recorder
			resp, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("Weather in Paris?"),
				Options: chat.ModelOptions{Tools: tools}}, rec.Emit)
			if err != nil {
				t.Fatal(err)
			}
			call := chat.ToolCall{ID: "call_1", Name: "get_weather", Input: chat.RawJSON(`{"city":"Paris"}`)}
			if resp.FinishReason != chat.FinishToolCalls || !reflect.DeepEqual(resp.ToolCalls, []chat.ToolCall{call}) || resp.Content != "Let me check." {
				t.Fatalf("response = %+v", resp)
			}
			if d := rec.Last(); d.Final.FinishReason != chat.FinishToolCalls {
				t.Errorf("done = %+v", d.Final)
			}
			h, _ := e.p.cfg.History.History(ctx, "u", "c")
			if len(h) != 2 || !reflect.DeepEqual(h[1].ToolCalls, []chat.ToolCall{call}) {
				t.Fatalf("history = %+v", h)
			}
			// The client sends the whole conversation back with the result.
			msgs := []chat.Message{h[0], h[1], {Role: "tool", ToolCallID: "call_1", Content: "18C"}}
			resp, err = e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: msgs, Options: chat.ModelOptions{Tools: tools}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "It is 18C in Paris." || resp.FinishReason != chat.FinishStop {
				t.Fatalf("second response = %+v", resp)
			}
			reqs := e.llm.TurnRequests()
			if got := reqs[1].ToolResults(); len(got) != 1 || got[0].Tool != "get_weather" || got[0].ContentText() != "18C" {
				t.Errorf("tool results the model got: %+v", got)
			}
			if names := reqs[0].ToolNames(); len(names) != 1 || names[0] != "get_weather" {
				t.Errorf("tools the model got: %v", names)
			}
		})
	}
}

// TestContinueAndEphemeral: Continue appends several new messages to the
// stored history; Ephemeral answers without storing.
func TestContinueAndEphemeral(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "f"}}},
		{Text: "two"},
		{Text: "three"},
	}}, "")
	ctx := context.Background()
	if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("one"),
		Options: chat.ModelOptions{Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`)}}, nil); err != nil {
		t.Fatal(err)
	}
	next := []chat.Message{{Role: "tool", ToolCallID: "c1", Content: "r"}, {Role: "user", Content: "and?"}}
	if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: next, Continue: true}, nil); err != nil {
		t.Fatal(err)
	}
	h, _ := e.p.cfg.History.History(ctx, "u", "c")
	var roles []string
	for _, m := range h {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, " ") != "user assistant tool user assistant" || h[4].Content != "two" {
		t.Fatalf("history = %+v", h)
	}
	if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("off the record"), Ephemeral: true}, nil); err != nil {
		t.Fatal(err)
	}
	if h2, _ := e.p.cfg.History.History(ctx, "u", "c"); len(h2) != len(h) {
		t.Errorf("an ephemeral turn was stored: %d messages, had %d", len(h2), len(h))
	}
	if body := string(e.llm.TurnRequests()[2].Body); !strings.Contains(body, "and?") {
		t.Errorf("the ephemeral turn did not see the history: %s", body)
	}
}

// TestSandboxModelChoice: a model the assistant lets requests choose runs
// the CLI.
func TestSandboxModelChoice(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	a := e.app.Assistants["coder"]
	a.Overridable = &assistant.Overridable{Explicit: true, Rules: map[string]assistant.Bound{"model": {Values: []any{"claude-haiku-4-5"}}}}
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go"),
		Options: chat.ModelOptions{Model: "claude-haiku-4-5"}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.ex.reqs[0].Arguments.Model; got != "claude-haiku-4-5" {
		t.Errorf("CLI model = %q", got)
	}
}
