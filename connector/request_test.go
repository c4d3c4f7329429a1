package connector

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// toolLoop is a conversation with a function call and its result.
var toolLoop = []chat.Message{
	{Role: "user", Content: "Weather in Paris?"},
	{Role: "assistant", Content: "Let me look.", Reasoning: "The weather needs a lookup.", ToolCalls: []chat.ToolCall{
		{ID: "call_1", Name: "get_weather", Input: chat.RawJSON(`{"city":"Paris"}`)},
		{ID: "call_2", Name: "get_time", Input: chat.RawJSON(`{}`)},
	}},
	{Role: "tool", ToolCallID: "call_1", Content: "18C"},
	{Role: "tool", ToolCallID: "call_2", Content: "noon"},
	{Role: "tool", Name: "orphan", Content: "no call"},
	{Role: "user", Content: "Thanks, and tomorrow?"},
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOpenAIToolMessages(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{events: concat(oaText("x"), oaFinish("stop"), "[DONE]")})
	c, _ := newTestClient(t, TypeOpenAI, f, nil)
	parallel := false
	opts := chat.ModelOptions{Tools: json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`),
		ToolChoice: json.RawMessage(`"required"`), ParallelToolCalls: &parallel}
	if _, err := c.Stream(context.Background(), &Request{Messages: toolLoop, Options: opts}, nil); err != nil {
		t.Fatal(err)
	}
	b := f.requests()[0].body
	want := `[{"content":"Weather in Paris?","role":"user"},` +
		`{"content":"Let me look.","reasoning_content":"The weather needs a lookup.","role":"assistant","tool_calls":[` +
		`{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"call_1","type":"function"},` +
		`{"function":{"arguments":"{}","name":"get_time"},"id":"call_2","type":"function"}]},` +
		`{"content":"18C","role":"tool","tool_call_id":"call_1"},` +
		`{"content":"noon","role":"tool","tool_call_id":"call_2"},` +
		`{"content":"Tool result (orphan):\nno call","role":"user"},` +
		`{"content":"Thanks, and tomorrow?","role":"user"}]`
	if got := asJSON(t, b["messages"]); got != want {
		t.Errorf("messages:\n%s\nwant:\n%s", got, want)
	}
	if b["tool_choice"] != "required" || b["parallel_tool_calls"] != false || asJSON(t, b["tools"]) != `[{"function":{"name":"get_weather","parameters":{"type":"object"}},"type":"function"}]` {
		t.Errorf("tool options = %v %v %v", b["tool_choice"], b["parallel_tool_calls"], b["tools"])
	}

	// An assistant message that only calls tools has content "" (Yao's
	// provider sends the answer's text as it is).
	msgs := []chat.Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c", Name: "f", Input: chat.RawJSON(`"not json"`)}}},
		{Role: "tool", ToolCallID: "c", Content: "r"}}
	if _, err := c.Stream(context.Background(), &Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	got := asJSON(t, f.requests()[1].body["messages"].([]any)[1])
	if want := `{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":"not json","name":"f"},"id":"c","type":"function"}]}`; got != want {
		t.Errorf("tool-only assistant message = %s, want %s", got, want)
	}
}

func TestAnthropicToolMessages(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{events: concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "x"), anStop(0), anEnd("end_turn"))})
	c, _ := newTestClient(t, TypeAnthropic, f, nil)
	if _, err := c.Stream(context.Background(), &Request{Messages: toolLoop}, nil); err != nil {
		t.Fatal(err)
	}
	want := `[{"content":"Weather in Paris?","role":"user"},` +
		`{"content":[{"text":"Let me look.","type":"text"},` +
		`{"id":"call_1","input":{"city":"Paris"},"name":"get_weather","type":"tool_use"},` +
		`{"id":"call_2","input":{},"name":"get_time","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"content":"18C","tool_use_id":"call_1","type":"tool_result"}],"role":"user"},` +
		`{"content":[{"content":"noon","tool_use_id":"call_2","type":"tool_result"}],"role":"user"},` +
		`{"content":"Tool result (orphan):\nno call","role":"user"},{"content":"Thanks, and tomorrow?","role":"user"}]`
	if got := asJSON(t, f.requests()[0].body["messages"]); got != want {
		t.Errorf("messages:\n%s\nwant:\n%s", got, want)
	}
}

func TestAnthropicOptions(t *testing.T) {
	t.Parallel()
	ptr := func(v int) *int { return &v }
	f64 := func(v float64) *float64 { return &v }
	no := false
	tests := []struct {
		name  string
		opts  chat.ModelOptions
		extra map[string]any
		want  map[string]string // field -> JSON
		field string            // the FieldError's path, for a refused option
	}{
		{
			name: "function tools, choice and parallel calls",
			opts: chat.ModelOptions{
				Tools: json.RawMessage(`[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}},` +
					`{"type":"function","function":{"name":"g"}}]`),
				ToolChoice: json.RawMessage(`{"type":"function","function":{"name":"f"}}`), ParallelToolCalls: &no,
			},
			want: map[string]string{
				"tools": `[{"description":"d","input_schema":{"properties":{"a":{"type":"string"}},"type":"object"},"name":"f","strict":true},` +
					`{"input_schema":{"properties":{},"type":"object"},"name":"g"}]`,
				"tool_choice": `{"disable_parallel_tool_use":true,"name":"f","type":"tool"}`,
			},
		},
		{name: "required", opts: chat.ModelOptions{ToolChoice: json.RawMessage(`"required"`)}, want: map[string]string{"tool_choice": `{"type":"any"}`}},
		{name: "no parallel alone", opts: chat.ModelOptions{ParallelToolCalls: &no}, want: map[string]string{"tool_choice": `{"disable_parallel_tool_use":true,"type":"auto"}`}},
		{
			name: "stop, user, sampling, schema",
			opts: chat.ModelOptions{Stop: chat.Stop{"END"}, User: "u1", Temperature: f64(0.2), TopP: f64(0.9),
				ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}`)},
			want: map[string]string{"stop_sequences": `["END"]`, "metadata": `{"user_id":"u1"}`, "temperature": `0.2`, "top_p": `0.9`,
				"output_config": `{"format":{"schema":{"type":"object"},"type":"json_schema"}}`},
		},
		{
			name:  "the request's max_completion_tokens replaces the connector's max_tokens",
			opts:  chat.ModelOptions{MaxCompletionTokens: ptr(77)},
			extra: map[string]any{"max_tokens": 999},
			want:  map[string]string{"max_tokens": `77`, "max_completion_tokens": `null`},
		},
		{name: "seed", opts: chat.ModelOptions{Seed: new(int64)}, field: "seed"},
		{name: "penalty", opts: chat.ModelOptions{PresencePenalty: f64(1)}, field: "presence_penalty"},
		{name: "n", opts: chat.ModelOptions{N: ptr(2)}, field: "n"},
		{name: "json mode", opts: chat.ModelOptions{ResponseFormat: json.RawMessage(`{"type":"json_object"}`)}, field: "response_format"},
		{name: "hosted tool", opts: chat.ModelOptions{Tools: json.RawMessage(`[{"type":"web_search"}]`)}, field: "tools[0].type"},
		{name: "effort", opts: chat.ModelOptions{ReasoningEffort: "high"}, field: "reasoning_effort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{events: concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "x"), anStop(0), anEnd("end_turn"))})
			c, _ := newTestClient(t, TypeAnthropic, f, func(c *Config) { c.Extra = tt.extra })
			_, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi"), Options: tt.opts}, nil)
			if tt.field != "" {
				var fe *chat.FieldError
				var ce *chat.Error
				if !errors.As(err, &ce) || ce.Code != chat.ErrInvalidRequest || !errors.As(err, &fe) || fe.Path != tt.field {
					t.Fatalf("err = %v (%#v), want invalid_request naming %s", err, fe, tt.field)
				}
				if !strings.Contains(ce.Message, tt.field) {
					t.Errorf("message %q does not name %s", ce.Message, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := f.requests()[0].body
			for k, want := range tt.want {
				if got := asJSON(t, b[k]); got != want {
					t.Errorf("%s = %s, want %s", k, got, want)
				}
			}
			for _, k := range []string{"stop", "user", "response_format", "parallel_tool_calls"} {
				if _, ok := b[k]; ok {
					t.Errorf("OpenAI field %s sent to Anthropic: %v", k, b)
				}
			}
		})
	}
}

func TestTokenLimitNames(t *testing.T) {
	t.Parallel()
	ptr := func(v int) *int { return &v }
	tests := []struct {
		name  string
		extra map[string]any
		opts  chat.ModelOptions
		want  map[string]any
	}{
		{"options' newer name replaces the connector's", map[string]any{"max_tokens": 500.0}, chat.ModelOptions{MaxCompletionTokens: ptr(64)},
			map[string]any{"max_completion_tokens": 64.0}},
		{"both in options: the newer name alone", nil, chat.ModelOptions{MaxTokens: ptr(10), MaxCompletionTokens: ptr(20)},
			map[string]any{"max_completion_tokens": 20.0}},
		{"both in the connector: the newer name alone", map[string]any{"max_tokens": 1.0, "max_completion_tokens": 2.0}, chat.ModelOptions{},
			map[string]any{"max_completion_tokens": 2.0}},
		{"options' older name goes as the newer one, replacing the connector's", map[string]any{"max_completion_tokens": 9.0}, chat.ModelOptions{MaxTokens: ptr(8)},
			map[string]any{"max_completion_tokens": 8.0}},
		{"the connector's own max_tokens goes as it is, when the options set none", map[string]any{"max_tokens": 300.0}, chat.ModelOptions{},
			map[string]any{"max_tokens": 300.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{events: concat(oaText("x"), oaFinish("stop"), "[DONE]")})
			c, _ := newTestClient(t, TypeOpenAI, f, func(c *Config) { c.Extra = tt.extra })
			if _, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi"), Options: tt.opts}, nil); err != nil {
				t.Fatal(err)
			}
			b := f.requests()[0].body
			got := map[string]any{}
			for _, k := range []string{"max_tokens", "max_completion_tokens"} {
				if v, ok := b[k]; ok {
					got[k] = v
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("limits = %v, want %v", got, tt.want)
			}
		})
	}
}

// imageMsgs is a conversation whose last message has text and two
// images, one a data: URL and one an address.
var imageMsgs = []chat.Message{{Role: "user", Content: "What is this?", Parts: []chat.Part{
	{Type: chat.PartText, Text: "What is this?"},
	{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: "data:image/png;base64,iVBORw0K", Detail: "low"}},
	{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: "https://cdn.example.com/b.png"}},
}}}

// TestImageMessages: images go as Yao's providers send them: OpenAI's
// image_url parts as they are, or Anthropic's image blocks (base64 for a
// data: URL, by address otherwise) for an Anthropic model and for an
// openai connector whose vision format is claude or base64 (Yao's
// VisionAdapter).
func TestImageMessages(t *testing.T) {
	t.Parallel()
	blocks := `[{"text":"What is this?","type":"text"},` +
		`{"source":{"data":"iVBORw0K","media_type":"image/png","type":"base64"},"type":"image"},` +
		`{"source":{"type":"url","url":"https://cdn.example.com/b.png"},"type":"image"}]`
	for _, tc := range []struct {
		typ    string
		vision string
		want   string
	}{
		{TypeOpenAI, VisionOpenAI, `[{"text":"What is this?","type":"text"},` +
			`{"image_url":{"detail":"low","url":"data:image/png;base64,iVBORw0K"},"type":"image_url"},` +
			`{"image_url":{"url":"https://cdn.example.com/b.png"},"type":"image_url"}]`},
		{TypeOpenAI, VisionClaude, blocks},
		{TypeOpenAI, VisionBase64, blocks},
		{TypeAnthropic, VisionClaude, blocks},
	} {
		events := concat(oaText("x"), oaFinish("stop"), "[DONE]")
		if tc.typ == TypeAnthropic {
			events = concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "x"), anStop(0), anEnd("end_turn"))
		}
		f := newFake(t, reply{events: events})
		c, _ := newTestClient(t, tc.typ, f, func(c *Config) { c.Capabilities = &Capabilities{Vision: tc.vision} })
		if _, err := c.Stream(context.Background(), &Request{Messages: imageMsgs}, nil); err != nil {
			t.Fatal(err)
		}
		got := asJSON(t, f.requests()[0].body["messages"].([]any)[0].(map[string]any)["content"])
		if got != tc.want {
			t.Errorf("%s vision %s: content\n%s\nwant\n%s", tc.typ, tc.vision, got, tc.want)
		}
	}
}
