package connector

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// TestConnectorFieldsWhitelist: a connector's own settings reach the body
// only through its type's whitelist, or its supported_params (clamped);
// host, key, capabilities and protocols never do.
func TestConnectorFieldsWhitelist(t *testing.T) {
	t.Parallel()
	lo, hi := 0.0, 1.0
	tests := []struct {
		name   string
		typ    string
		extra  map[string]any
		params map[string]ParamSpec
		want   map[string]any // fields that must be in the body (nil value: absent)
	}{
		{"openai", TypeOpenAI,
			map[string]any{"temperature": 0.2, "thinking": map[string]any{"type": "enabled"}, "enable_thinking": true,
				"capabilities": map[string]any{"tool_calls": true}, "protocols": []any{"openai"}, "host": "https://x", "key": "k", "top_k": 3},
			nil,
			map[string]any{"temperature": 0.2, "enable_thinking": true, "capabilities": nil, "protocols": nil, "host": nil, "key": nil, "top_k": nil}},
		{"anthropic", TypeAnthropic,
			map[string]any{"top_k": 3.0, "reasoning_effort": "high", "capabilities": map[string]any{}},
			nil,
			map[string]any{"top_k": 3.0, "reasoning_effort": nil, "capabilities": nil}},
		{"supported params", TypeOpenAI,
			map[string]any{"temperature": 1.7, "top_p": 0.5, "reasoning_effort": "extreme"},
			map[string]ParamSpec{"temperature": {Min: &lo, Max: &hi}, "reasoning_effort": {AllowedValues: []any{"low", "high"}}},
			map[string]any{"temperature": 1.0, "reasoning_effort": "low", "top_p": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events := concat(oaText("x"), oaFinish("stop"), "[DONE]")
			if tt.typ == TypeAnthropic {
				events = concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "x"), anStop(0), anEnd("end_turn"))
			}
			f := newFake(t, reply{events: events})
			c, _ := newTestClient(t, tt.typ, f, func(c *Config) { c.Extra, c.Params = tt.extra, tt.params })
			if _, err := c.Stream(context.Background(), &Request{Messages: []chat.Message{{Role: "user", Content: "q"}}}, nil); err != nil {
				t.Fatal(err)
			}
			body := f.requests()[0].body
			for k, want := range tt.want {
				got, ok := body[k]
				switch {
				case want == nil && ok:
					t.Errorf("%s reached the body: %v", k, got)
				case want != nil && !ok:
					t.Errorf("%s is missing from the body %v", k, body)
				case want != nil && fmtAny(got) != fmtAny(want):
					t.Errorf("%s = %v, want %v", k, got, want)
				}
			}
		})
	}
}

func fmtAny(v any) string {
	switch n := v.(type) {
	case int:
		return fmtAny(float64(n))
	}
	return chatJSON(v)
}

func chatJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAuthModeAndVersion: auth_mode picks the header the key goes in; an
// anthropic connector's version is its anthropic-version header.
func TestAuthModeAndVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ, mode, version string
		header, value      string
	}{
		{TypeOpenAI, "", "", "Authorization", "Bearer " + testKey},
		{TypeOpenAI, AuthAPIKey, "", "Api-Key", testKey},
		{TypeOpenAI, AuthXAPIKey, "", "X-Api-Key", testKey},
		{TypeAnthropic, "", "", "X-Api-Key", testKey},
		{TypeAnthropic, AuthBearer, "2024-10-22", "Authorization", "Bearer " + testKey},
	}
	for _, tt := range tests {
		events := concat(oaText("x"), oaFinish("stop"), "[DONE]")
		if tt.typ == TypeAnthropic {
			events = concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "x"), anStop(0), anEnd("end_turn"))
		}
		f := newFake(t, reply{events: events})
		c, _ := newTestClient(t, tt.typ, f, func(c *Config) { c.AuthMode, c.APIVersion = tt.mode, tt.version })
		if _, err := c.Stream(context.Background(), &Request{Messages: []chat.Message{{Role: "user", Content: "q"}}}, nil); err != nil {
			t.Fatal(err)
		}
		h := f.requests()[0].header
		if got := h.Get(tt.header); got != tt.value {
			t.Errorf("%s %q: %s = %q, want %q", tt.typ, tt.mode, tt.header, got, tt.value)
		}
		for _, other := range []string{"Authorization", "Api-Key", "X-Api-Key"} {
			if other != tt.header && h.Get(other) != "" {
				t.Errorf("%s %q: the key is also in %s", tt.typ, tt.mode, other)
			}
		}
		if tt.typ == TypeAnthropic {
			want := AnthropicVersion
			if tt.version != "" {
				want = tt.version
			}
			if got := h.Get("Anthropic-Version"); got != want {
				t.Errorf("Anthropic-Version = %q, want %q", got, want)
			}
		}
	}
}

func TestEndpointExported(t *testing.T) {
	t.Parallel()
	if u, _ := Endpoint(TypeOpenAI, ""); u != "https://api.openai.com/v1/chat/completions" {
		t.Errorf("openai default = %q", u)
	}
	if u, _ := Endpoint(TypeAnthropic, "http://127.0.0.1:9/"); u != "http://127.0.0.1:9/messages" {
		t.Errorf("anthropic with slash = %q", u)
	}
	if _, err := Endpoint(TypeScripted, ""); err == nil {
		t.Error("scripted has no endpoint")
	}
}
