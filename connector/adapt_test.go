package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// TestResolveCapabilities: declared capabilities, else the model's known
// ones (the most specific pattern), else the type's fallback, with gou's
// openai rule that a model without reasoning has an adjustable
// temperature.
func TestResolveCapabilities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ, model string
		declared   map[string]any
		want       string
	}{
		// openai: known models; o1 reasons with a fixed temperature.
		{TypeOpenAI, "gpt-4o-mini", nil, "vision=openai tools=true reasoning=false temp=true out=0"},
		{TypeOpenAI, "o1-preview", nil, "vision=openai tools=true reasoning=true temp=false out=0"},
		{TypeOpenAI, "deepseek-r1:7b", nil, "vision= tools=false reasoning=true temp=false out=0"},
		// the longest pattern: gpt-5-mini, not gpt-5 (which has audio).
		{TypeOpenAI, "GPT-5-mini-2025", nil, "vision=openai tools=true reasoning=false temp=true out=0 audio=false"},
		// unknown: no tools, no images, temperature adjustable.
		{TypeOpenAI, "llama3.3", nil, "vision= tools=false reasoning=false temp=true out=0"},
		// declared: what is absent is false; openai makes temperature
		// adjustable for a model that does not reason.
		{TypeOpenAI, "o1", map[string]any{"tool_calls": true}, "vision= tools=true reasoning=false temp=true out=0"},
		{TypeOpenAI, "x", map[string]any{"reasoning": true, "vision": true, "max_output_tokens": 100.0}, "vision=default tools=false reasoning=true temp=false out=100"},
		// anthropic: known models have no adjustable temperature (Yao's
		// table says none), and their output bound.
		{TypeAnthropic, "claude-sonnet-4-5", nil, "vision=claude tools=true reasoning=false temp=false out=16384"},
		{TypeAnthropic, "claude-opus-4-1", nil, "vision=claude tools=true reasoning=true temp=false out=32768"},
		// anthropic unknown: the generous fallback.
		{TypeAnthropic, "some-gateway-model", nil, "vision=claude tools=true reasoning=false temp=true out=0"},
		// anthropic declared without temperature_adjustable: fixed.
		{TypeAnthropic, "claude-x", map[string]any{"tool_calls": true, "vision": "claude"}, "vision=claude tools=true reasoning=false temp=false out=0"},
	}
	for _, tt := range tests {
		c := ResolveCapabilities(tt.typ, tt.model, tt.declared)
		got := fmt.Sprintf("vision=%s tools=%v reasoning=%v temp=%v out=%d", c.Vision, c.ToolCalls, c.Reasoning, c.TemperatureAdjustable, c.MaxOutputTokens)
		want, audio, _ := strings.Cut(tt.want, " audio=")
		if got != want || (audio != "" && fmt.Sprint(c.Audio) != audio) {
			t.Errorf("%s %q %v: %s (audio %v), want %s", tt.typ, tt.model, tt.declared, got, c.Audio, tt.want)
		}
	}
}

// TestYaoOptions: an assistant's options as Yao's providers send them to
// a model, and the client's refused where Yao would change them.
func TestYaoOptions(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	n, seed := 2, int64(1)
	o := chat.ModelOptions{Temperature: f(0.2), N: &n, Seed: &seed, User: "u", ReasoningEffort: "low",
		Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`), ToolChoice: json.RawMessage(`"auto"`),
		ResponseFormat: json.RawMessage(`{"type":"json_object"}`)}

	// A model that can do it all keeps them all (openai).
	all := Capabilities{ToolCalls: true, Reasoning: true, TemperatureAdjustable: true}
	if got, adj := YaoOptions(TypeOpenAI, all, o); len(adj) != 0 || *got.Temperature != 0.2 || got.ReasoningEffort != "low" || len(got.Tools) == 0 {
		t.Errorf("openai, capable: %+v %v", got, adj)
	}
	// No tools, no reasoning, a fixed temperature.
	none := Capabilities{}
	got, adj := YaoOptions(TypeOpenAI, none, o)
	if len(got.Tools) != 0 || len(got.ToolChoice) != 0 || got.ReasoningEffort != "" || *got.Temperature != 1 || *got.N != 2 || len(adj) != 4 {
		t.Errorf("openai, not capable: %+v %v", got, adj)
	}
	if s := fmt.Sprint(adj); !strings.Contains(s, "temperature 0.2 is sent as 1: the model's temperature is fixed at 1") || !strings.Contains(s, "tools is not sent: the model takes no tool calls") {
		t.Errorf("adjustments: %s", s)
	}
	// anthropic leaves out what the Messages API has no counterpart for.
	got, adj = YaoOptions(TypeAnthropic, all, o)
	if got.N != nil || got.Seed != nil || got.User != "" || len(got.ResponseFormat) != 0 || got.ReasoningEffort != "" || *got.Temperature != 0.2 || len(got.Tools) == 0 || len(adj) != 5 {
		t.Errorf("anthropic: %+v %v", got, adj)
	}

	// A client's options are refused, naming the field.
	for _, tt := range []struct {
		opts chat.ModelOptions
		caps Capabilities
		want string
	}{
		{chat.ModelOptions{Tools: o.Tools}, none, "tools: the model takes no tool calls"},
		{chat.ModelOptions{ToolChoice: o.ToolChoice}, none, "tool_choice: the model takes no tool calls"},
		{chat.ModelOptions{Temperature: f(0.5)}, none, "temperature: the model's temperature is fixed at 1"},
		{chat.ModelOptions{Temperature: f(1)}, none, ""},
		{chat.ModelOptions{ReasoningEffort: "high"}, Capabilities{TemperatureAdjustable: true}, "reasoning_effort: the model does not reason"},
		{o, all, ""},
	} {
		err := CheckOptions(TypeOpenAI, tt.caps, tt.opts)
		var fe *chat.FieldError
		if (err == nil) != (tt.want == "") || (err != nil && (!errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tt.want))) {
			t.Errorf("CheckOptions(%+v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
}

// TestTokenLimitAsYao: OpenAI gets the limit as max_completion_tokens,
// Anthropic as max_tokens (its own name first), both lowered to the
// model's max_output_tokens.
func TestTokenLimitAsYao(t *testing.T) {
	t.Parallel()
	ptr := func(v int) *int { return &v }
	tests := []struct {
		typ   string
		model string
		caps  *Capabilities
		extra map[string]any
		opts  chat.ModelOptions
		want  string
	}{
		{TypeOpenAI, "gpt-4o", nil, nil, chat.ModelOptions{MaxTokens: ptr(300)}, "max_completion_tokens=300"},
		{TypeOpenAI, "gpt-4o", nil, nil, chat.ModelOptions{MaxTokens: ptr(300), MaxCompletionTokens: ptr(200)}, "max_completion_tokens=200"},
		{TypeOpenAI, "m", &Capabilities{MaxOutputTokens: 100}, nil, chat.ModelOptions{MaxTokens: ptr(300)}, "max_completion_tokens=100"},
		{TypeOpenAI, "m", nil, map[string]any{"max_tokens": 50.0}, chat.ModelOptions{}, "max_tokens=50"},
		{TypeAnthropic, "claude-sonnet-4-5", nil, nil, chat.ModelOptions{MaxTokens: ptr(64000)}, "max_tokens=16384"},
		{TypeAnthropic, "claude-haiku-4-5", nil, nil, chat.ModelOptions{}, "max_tokens=4096"},
		{TypeAnthropic, "m", nil, nil, chat.ModelOptions{MaxTokens: ptr(300), MaxCompletionTokens: ptr(200)}, "max_tokens=300"},
		{TypeAnthropic, "m", nil, map[string]any{"max_tokens": 1000.0}, chat.ModelOptions{}, "max_tokens=1000"},
		{TypeAnthropic, "m", nil, map[string]any{"max_tokens": 1000.0}, chat.ModelOptions{MaxCompletionTokens: ptr(20)}, "max_tokens=20"},
	}
	for _, tt := range tests {
		var f *fake
		if tt.typ == TypeOpenAI {
			f = newFake(t, reply{events: concat(oaText("x"), oaFinish("stop"), "[DONE]")})
		} else {
			f = newFake(t, reply{events: concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "x"), anStop(0), anEnd("end_turn"))})
		}
		c, _ := newTestClient(t, tt.typ, f, func(c *Config) { c.Model, c.Capabilities, c.Extra = tt.model, tt.caps, tt.extra })
		if _, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi"), Options: tt.opts}, nil); err != nil {
			t.Fatal(err)
		}
		b := f.requests()[0].body
		var got []string
		for _, k := range []string{"max_tokens", "max_completion_tokens"} {
			if v, ok := b[k]; ok {
				got = append(got, fmt.Sprintf("%s=%v", k, v))
			}
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s %s %+v: %v, want %s", tt.typ, tt.model, tt.opts, got, tt.want)
		}
	}
}
