package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

func TestTypes(t *testing.T) {
	t.Parallel()
	got := Types()
	if want := []string{"anthropic", "openai", "scripted"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Types() = %v, want %v", got, want)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown type", Config{Type: "gemini"}, `connector type "gemini" is unknown (want one of anthropic, openai, scripted)`},
		{"empty type", Config{}, `connector type "" is unknown`},
		{"bad scheme", Config{Type: "openai", Host: "ftp://x"}, "is not an http(s) URL"},
		{"no host", Config{Type: "anthropic", Host: "http://"}, "is not an http(s) URL"},
		{"credentials", Config{Type: "openai", Host: "https://me:sk-123456@api.x"}, "carries credentials"},
		{"query", Config{Type: "openai", Host: "https://api.x/v1?key=1"}, "query or fragment"},
		{"negative timeout", Config{Type: "openai", Timeout: -time.Second}, "timeout is negative"},
		{"negative attempts", Config{Type: "openai", Retry: RetryPolicy{MaxAttempts: -1}}, "max attempts is negative"},
		{"scripted no script", Config{Type: "scripted"}, "no script file"},
		{"scripted missing script", Config{Type: "scripted", Script: "testdata/nope.yaml"}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New() error = %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sk-123456") {
				t.Errorf("error leaks the credentials: %v", err)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ, host, want string
	}{
		{TypeOpenAI, "", "https://api.openai.com/v1/chat/completions"},
		{TypeOpenAI, "https://api.deepseek.com", "https://api.deepseek.com/v1/chat/completions"},
		{TypeOpenAI, "https://api.deepseek.com/", "https://api.deepseek.com/chat/completions"},
		{TypeOpenAI, "https://ark.example/api/v3/", "https://ark.example/api/v3/chat/completions"},
		{TypeOpenAI, "https://ark.example/api/v3", "https://ark.example/api/v3/v1/chat/completions"},
		{TypeOpenAI, "http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1/chat/completions"},
		{TypeOpenAI, "http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1/chat/completions"},
		{TypeOpenAI, "https://gw.example/openai/v1/chat/completions", "https://gw.example/openai/v1/chat/completions"},
		{TypeOpenAI, "https://gw.example/api", "https://gw.example/api/v1/chat/completions"},
		{TypeAnthropic, "", "https://api.anthropic.com/v1/messages"},
		{TypeAnthropic, "https://api.anthropic.com/v1", "https://api.anthropic.com/v1/messages"},
		{TypeAnthropic, "http://127.0.0.1:8080", "http://127.0.0.1:8080/v1/messages"},
	}
	for _, tt := range tests {
		c, err := New(Config{Type: tt.typ, Host: tt.host, Model: "m"})
		if err != nil {
			t.Errorf("New(%s, %q): %v", tt.typ, tt.host, err)
			continue
		}
		if got := c.(*client).url; got != tt.want {
			t.Errorf("%s host %q: url = %q, want %q", tt.typ, tt.host, got, tt.want)
		}
	}
}

func TestConfigStringRedactsKey(t *testing.T) {
	t.Parallel()
	s := Config{Type: "openai", Host: "https://h", Key: testKey, Model: "m"}.String()
	if strings.Contains(s, testKey) || !strings.Contains(s, "[redacted]") {
		t.Errorf("Config.String() = %q", s)
	}
}

func TestOpenAIStream(t *testing.T) {
	t.Parallel()
	tool := func(i int, id, name, args string) string {
		idPart := ""
		if id != "" {
			idPart = `"id":"` + id + `","type":"function",`
		}
		return `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":` + string(rune('0'+i)) + `,` + idPart +
			`"function":{"name":"` + name + `","arguments":` + quote(args) + `}}]},"finish_reason":null}]}`
	}
	tests := []struct {
		name       string
		events     []string
		want       []string
		content    string
		thinking   string
		finish     string
		usage      chat.Usage
		toolInputs []string
	}{
		{
			name:   "reasoning then text",
			events: concat(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, oaReason("Let me "), oaReason("think."), oaText("Hel"), oaText("lo!"), oaFinish("stop"), oaUsage, "[DONE]"),
			want: []string{
				"start 1 thinking", "delta 1 thinking Let me ", "delta 1 thinking think.", "end 1 thinking",
				"start 2 text", "delta 2 text Hel", "delta 2 text lo!", "end 2 text",
			},
			content: "Hello!", thinking: "Let me think.", finish: "stop",
			usage: chat.Usage{InputTokens: 20, OutputTokens: 7, CacheReadTokens: 10, Turns: 1},
		},
		{
			name: "tool calls are surfaced whole",
			events: concat(oaText("Checking."), tool(0, "call_a", "lookup", `{"q":`), tool(0, "", "", `"x"}`),
				tool(1, "call_b", "now", ""), oaFinish("tool_calls"), "[DONE]"),
			want: []string{
				"start 1 text", "delta 1 text Checking.", "end 1 text",
				`start 2 tool_call lookup call_a {"q":"x"}`, "end 2 tool_call",
				`start 3 tool_call now call_b {}`, "end 3 tool_call",
			},
			content: "Checking.", finish: "tool_calls", usage: chat.Usage{Turns: 1},
			toolInputs: []string{`{"q":"x"}`, `{}`},
		},
		{
			name:    "length gets a notice",
			events:  concat(oaText("cut"), oaFinish("length"), "[DONE]"),
			want:    []string{"start 1 text", "delta 1 text cut", "end 1 text", "start 2 notice max_tokens", "end 2 notice"},
			content: "cut", finish: "length", usage: chat.Usage{Turns: 1},
		},
		{
			name:    "reasoning field of other servers, no DONE after finish",
			events:  concat(`{"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}`, oaText("ok"), oaFinish("stop")),
			want:    []string{"start 1 thinking", "delta 1 thinking hmm", "end 1 thinking", "start 2 text", "delta 2 text ok", "end 2 text"},
			content: "ok", thinking: "hmm", finish: "stop", usage: chat.Usage{Turns: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{events: tt.events})
			c, _ := newTestClient(t, TypeOpenAI, f, nil)
			var ev chattest.Recorder
			resp, err := c.Stream(context.Background(), &Request{System: "Be brief.", Messages: userMsg("hi")}, ev.Emit)
			if err != nil {
				t.Fatal(err)
			}
			if got := compact(t, ev.Events()); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if resp.Content != tt.content || resp.Thinking != tt.thinking || resp.FinishReason != tt.finish {
				t.Errorf("response = %+v", resp)
			}
			resp.Usage.DurationMS = 0
			if !reflect.DeepEqual(resp.Usage, tt.usage) {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.usage)
			}
			var inputs []string
			for _, tc := range resp.ToolCalls {
				inputs = append(inputs, string(tc.Input))
			}
			if !reflect.DeepEqual(inputs, tt.toolInputs) {
				t.Errorf("tool inputs = %v, want %v", inputs, tt.toolInputs)
			}
			if resp.Attempts != 1 {
				t.Errorf("attempts = %d", resp.Attempts)
			}
		})
	}
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func TestOpenAIRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{events: concat(oaText("x"), oaFinish("stop"), "[DONE]")})
	c, _ := newTestClient(t, TypeOpenAI, f, func(c *Config) {
		c.Extra = map[string]any{"temperature": 0.1, "seed": 7, "top_p": 0.5}
	})
	req := &Request{
		Model:  "override",
		System: "sys",
		Messages: []chat.Message{
			{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"},
			{Role: "tool", Name: "calc", Content: "42"}, {Role: "user", Content: "q2"},
		},
		Fields:    map[string]any{"temperature": 0.9, "seed": nil},
		MaxTokens: 100,
	}
	if _, err := c.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	if r.path != "/v1/chat/completions" {
		t.Errorf("path = %q", r.path)
	}
	if got := r.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	b := r.body
	if b["model"] != "override" || b["stream"] != true || b["temperature"] != 0.9 || b["top_p"] != 0.5 || b["max_completion_tokens"] != 100.0 {
		t.Errorf("body = %v", b)
	}
	if _, ok := b["seed"]; ok {
		t.Errorf("a nil option did not remove seed: %v", b)
	}
	if so, _ := b["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", b["stream_options"])
	}
	msgs, _ := b["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if want := []string{"system", "user", "assistant", "user", "user"}; !reflect.DeepEqual(roles, want) {
		t.Errorf("roles = %v, want %v", roles, want)
	}
	if got := msgs[3].(map[string]any)["content"]; got != "Tool result (calc):\n42" {
		t.Errorf("tool message = %q", got)
	}
}

func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		events   []string
		want     []string
		content  string
		thinking string
		finish   string
		usage    chat.Usage
		tools    int
	}{
		{
			name: "thinking text and tool use",
			events: concat(anStart(), `ping|{"type":"ping"}`,
				anBlock(0, "thinking"), anDelta(0, "thinking_delta", "Plan: "), anDelta(0, "thinking_delta", "look up."), anDelta(0, "signature_delta", "c2ln"), anStop(0),
				anBlock(1, "text"), anDelta(1, "text_delta", "Let me "), anDelta(1, "text_delta", "check."), anStop(1),
				anBlock(2, "tool_use"), anDelta(2, "input_json_delta", `{"q"`), anDelta(2, "input_json_delta", `:"go"}`), anStop(2),
				anEnd("tool_use")),
			want: []string{
				"start 1 thinking", "delta 1 thinking Plan: ", "delta 1 thinking look up.", "end 1 thinking",
				"start 2 text", "delta 2 text Let me ", "delta 2 text check.", "end 2 text",
				`start 3 tool_call lookup toolu_1 {"q":"go"}`, "end 3 tool_call",
			},
			content: "Let me check.", thinking: "Plan: look up.", finish: "tool_use", tools: 1,
			usage: chat.Usage{InputTokens: 25, OutputTokens: 12, CacheReadTokens: 5, CacheCreationTokens: 2, Turns: 1},
		},
		{
			name: "two text blocks are two messages",
			events: concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "one"), anStop(0),
				anBlock(1, "text"), anDelta(1, "text_delta", "two"), anStop(1), anEnd("end_turn")),
			want:    []string{"start 1 text", "delta 1 text one", "end 1 text", "start 2 text", "delta 2 text two", "end 2 text"},
			content: "one\n\ntwo", finish: "end_turn",
			usage: chat.Usage{InputTokens: 25, OutputTokens: 12, CacheReadTokens: 5, CacheCreationTokens: 2, Turns: 1},
		},
		{
			name:    "max_tokens notice",
			events:  concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "long"), anStop(0), anEnd("max_tokens")),
			want:    []string{"start 1 text", "delta 1 text long", "end 1 text", "start 2 notice max_tokens", "end 2 notice"},
			content: "long", finish: "max_tokens",
			usage: chat.Usage{InputTokens: 25, OutputTokens: 12, CacheReadTokens: 5, CacheCreationTokens: 2, Turns: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{events: tt.events})
			c, _ := newTestClient(t, TypeAnthropic, f, nil)
			var ev chattest.Recorder
			resp, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
			if err != nil {
				t.Fatal(err)
			}
			if got := compact(t, ev.Events()); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if resp.Content != tt.content || resp.Thinking != tt.thinking || resp.FinishReason != tt.finish || len(resp.ToolCalls) != tt.tools {
				t.Errorf("response = %+v", resp)
			}
			if resp.Model != "claude-test" {
				t.Errorf("model = %q", resp.Model)
			}
			resp.Usage.DurationMS = 0
			if !reflect.DeepEqual(resp.Usage, tt.usage) {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.usage)
			}
		})
	}
}

func TestAnthropicRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		req       Request
		extra     map[string]any
		wantErr   string
		maxTokens float64
		system    any
		roles     []string
	}{
		{
			name:      "defaults",
			req:       Request{Messages: userMsg("hi")},
			maxTokens: DefaultAnthropicMaxTokens, system: nil, roles: []string{"user"},
		},
		{
			name: "system and developer messages join the system prompt, messages go one by one, empty dropped",
			req: Request{System: "You help.", Messages: []chat.Message{
				{Role: "system", Content: "Be brief."}, {Role: "user", Content: "a"}, {Role: "developer", Content: "Be kind."}, {Role: "user", Content: "b"},
				{Role: "assistant", Content: ""}, {Role: "tool", Content: "r"}, {Role: "assistant", Content: "c"},
			}},
			maxTokens: DefaultAnthropicMaxTokens, system: "You help.\n\nBe brief.\n\nBe kind.", roles: []string{"user", "user", "user", "assistant"},
		},
		{
			name:      "options max_tokens",
			req:       Request{Messages: userMsg("hi"), Fields: map[string]any{"max_tokens": 123.0}},
			maxTokens: 123, roles: []string{"user"},
		},
		{
			name:      "request max tokens wins",
			req:       Request{Messages: userMsg("hi"), MaxTokens: 50, Fields: map[string]any{"max_tokens": 123}},
			extra:     map[string]any{"max_tokens": 999},
			maxTokens: 50, roles: []string{"user"},
		},
		{name: "reserved option", req: Request{Messages: userMsg("hi"), Fields: map[string]any{"system": "x"}}, wantErr: `option "system" is set by agentbox`},
		{name: "bad max tokens", req: Request{Messages: userMsg("hi"), Fields: map[string]any{"max_tokens": "lots"}}, wantErr: `"max_tokens" must be a whole number`},
		{name: "no messages", req: Request{}, wantErr: "has no messages"},
		{name: "only empty", req: Request{Messages: userMsg("  ")}, wantErr: "no user or assistant message with text"},
		{name: "assistant first", req: Request{Messages: []chat.Message{{Role: "assistant", Content: "x"}}}, wantErr: "needs a user message first"},
		{name: "bad role", req: Request{Messages: []chat.Message{{Role: "bot", Content: "x"}}}, wantErr: `role "bot"`},
		{name: "negative max tokens", req: Request{Messages: userMsg("x"), MaxTokens: -1}, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{events: concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "x"), anStop(0), anEnd("end_turn"))})
			c, _ := newTestClient(t, TypeAnthropic, f, func(c *Config) { c.Extra = tt.extra })
			_, err := c.Stream(context.Background(), &tt.req, nil)
			if tt.wantErr != "" {
				var ce *chat.Error
				if !errors.As(err, &ce) || ce.Code != chat.ErrInvalidRequest || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want invalid_request containing %q", err, tt.wantErr)
				}
				if n := len(f.requests()); n != 0 {
					t.Errorf("%d requests sent for an invalid request", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := f.requests()[0]
			if r.path != "/v1/messages" || r.header.Get("X-Api-Key") != testKey || r.header.Get("Anthropic-Version") != AnthropicVersion {
				t.Errorf("path %q headers %v", r.path, r.header)
			}
			if r.header.Get("Authorization") != "" {
				t.Error("anthropic request carries an Authorization header")
			}
			if r.body["max_tokens"] != tt.maxTokens || r.body["system"] != tt.system || r.body["model"] != "test-model" {
				t.Errorf("body = %v", r.body)
			}
			var roles []string
			for _, m := range r.body["messages"].([]any) {
				roles = append(roles, m.(map[string]any)["role"].(string))
			}
			if !reflect.DeepEqual(roles, tt.roles) {
				t.Errorf("roles = %v, want %v", roles, tt.roles)
			}
		})
	}
}

func TestNonStreamedAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ, body string
		want      []string
	}{
		{TypeOpenAI, `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","reasoning_content":"r","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
			[]string{"start 1 thinking", "delta 1 thinking r", "end 1 thinking", "start 2 text", "delta 2 text Hi", "end 2 text", `start 3 tool_call f c1 {"a":1}`, "end 3 tool_call"}},
		{TypeAnthropic, `{"type":"message","model":"m","content":[{"type":"thinking","thinking":"r"},{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`,
			[]string{"start 1 thinking", "delta 1 thinking r", "end 1 thinking", "start 2 text", "delta 2 text Hi", "end 2 text"}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{body: tt.body})
			c, _ := newTestClient(t, tt.typ, f, nil)
			var ev chattest.Recorder
			resp, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
			if err != nil {
				t.Fatal(err)
			}
			if got := compact(t, ev.Events()); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if resp.Content != "Hi" || resp.Usage.InputTokens != 3 || resp.Usage.OutputTokens != 2 {
				t.Errorf("response = %+v", resp)
			}
		})
	}
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		typ       string
		status    int
		header    map[string]string
		body      string
		class     string
		retryable bool
		attempts  int
		contains  []string
	}{
		{"openai bad key", TypeOpenAI, 401, nil,
			`{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at https://platform.openai.com.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			chat.ErrAuth, false, 1, []string{"openai API rejected the API key (HTTP 401)", "Incorrect API key provided: [redacted]", "check the connector's API key"}},
		{"openai masked key echo", TypeOpenAI, 401, nil,
			`{"error":{"message":"Incorrect API key provided: sk-proj-****6789.","type":"invalid_request_error"}}`,
			chat.ErrAuth, false, 1, []string{"[redacted]"}},
		{"anthropic permission", TypeAnthropic, 403, map[string]string{"Request-Id": "req_42"},
			`{"type":"error","error":{"type":"permission_error","message":"Your key cannot use this model."}}`,
			chat.ErrAuth, false, 1, []string{"refused access (HTTP 403) [request id req_42]: Your key cannot use this model"}},
		{"anthropic invalid", TypeAnthropic, 400, nil,
			`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be positive"}}`,
			chat.ErrInvalidRequest, false, 1, []string{"rejected the request (HTTP 400): max_tokens: must be positive", "check the connector's model"}},
		{"not found", TypeOpenAI, 404, nil, `{"error":{"message":"The model 'gpt-9' does not exist","code":"model_not_found"}}`,
			chat.ErrInvalidRequest, false, 1, []string{"has no such model or endpoint (HTTP 404)", "gpt-9"}},
		{"context length", TypeOpenAI, 400, nil, `{"error":{"message":"too long","code":"context_length_exceeded"}}`,
			chat.ErrInvalidRequest, false, 1, []string{"shorten the conversation"}},
		{"rate limit retried", TypeOpenAI, 429, map[string]string{"Retry-After": "0"}, `{"error":{"message":"Rate limit reached","type":"requests"}}`,
			chat.ErrRateLimit, true, 3, []string{"is rate limiting requests (HTTP 429)", "gave up after 3 attempts"}},
		{"quota is not retried", TypeOpenAI, 429, nil, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota"}}`,
			chat.ErrRateLimit, false, 1, []string{"quota is used up", "add credit"}},
		{"overloaded 529", TypeAnthropic, 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			chat.ErrUpstream, true, 3, []string{"is overloaded (HTTP 529)"}},
		{"500 html", TypeOpenAI, 500, map[string]string{"Content-Type": "text/html"}, `<html><body>oops</body></html>`,
			chat.ErrUpstream, true, 3, []string{"openai API failed (HTTP 500); the provider had a problem"}},
		{"502 text", TypeOpenAI, 502, map[string]string{"Content-Type": "text/plain"}, "upstream connect error",
			chat.ErrUpstream, true, 3, []string{"(HTTP 502): upstream connect error"}},
		{"504 gateway timeout", TypeOpenAI, 504, nil, ``, chat.ErrTimeout, true, 3, []string{"gateway timeout"}},
		{"should-retry false", TypeAnthropic, 500, map[string]string{"X-Should-Retry": "false"}, `{}`, chat.ErrUpstream, false, 1, nil},
		{"should-retry true on 400", TypeAnthropic, 400, map[string]string{"X-Should-Retry": "true"}, `{}`, chat.ErrInvalidRequest, true, 3, nil},
		{"408", TypeAnthropic, 408, nil, `{}`, chat.ErrTimeout, true, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{status: tt.status, header: tt.header, body: tt.body})
			c, _ := newTestClient(t, tt.typ, f, nil)
			var ev chattest.Recorder
			_, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if ce.Code != tt.class || failureOf(ce).Status != tt.status {
				t.Errorf("class/status = %s/%d, want %s/%d (%v)", ce.Code, failureOf(ce).Status, tt.class, tt.status, err)
			}
			if n := len(f.requests()); n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
			if failureOf(ce).Retryable != tt.retryable {
				t.Errorf("retryable = %v, want %v", failureOf(ce).Retryable, tt.retryable)
			}
			for _, s := range tt.contains {
				if !strings.Contains(ce.Message, s) {
					t.Errorf("message %q\nwant it to contain %q", ce.Message, s)
				}
			}
			if strings.Contains(ce.Message, testKey) || strings.Contains(ce.Message, "6789") {
				t.Errorf("message leaks the key: %q", ce.Message)
			}
			if len(ev.Events()) != 0 {
				t.Errorf("events emitted for a failed request: %v", ev.Events())
			}
		})
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	ok := reply{events: concat(oaText("fine"), oaFinish("stop"), "[DONE]")}
	tests := []struct {
		name      string
		replies   []reply
		retry     RetryPolicy
		wantErr   string // class; "" = success
		attempts  int
		minWaits  []time.Duration
		wantText  string
		retryable bool
	}{
		{"500 529 then success", []reply{{status: 500}, {status: 529}, ok}, RetryPolicy{}, "", 3, nil, "fine", false},
		{"429 honours Retry-After", []reply{{status: 429, header: map[string]string{"Retry-After": "2"}}, ok}, RetryPolicy{}, "", 2,
			[]time.Duration{2 * time.Second}, "fine", false},
		{"retry-after-ms", []reply{{status: 503, header: map[string]string{"Retry-After-Ms": "1500"}}, ok}, RetryPolicy{}, "", 2,
			[]time.Duration{1500 * time.Millisecond}, "fine", false},
		{"Retry-After beyond max elapsed gives up", []reply{{status: 429, header: map[string]string{"Retry-After": "120"}}, ok}, RetryPolicy{}, chat.ErrRateLimit, 1,
			nil, "", true},
		{"attempts bounded", []reply{{status: 500}}, RetryPolicy{MaxAttempts: 2}, chat.ErrUpstream, 2, nil, "", true},
		{"retries disabled", []reply{{status: 500}, ok}, RetryPolicy{MaxAttempts: 1}, chat.ErrUpstream, 1, nil, "", true},
		{"cut before output is retried", []reply{{events: []string{`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`}, cut: true}, ok},
			RetryPolicy{}, "", 2, nil, "fine", false},
		{"cut after output is not retried", []reply{{events: []string{oaText("par")}, cut: true}, ok},
			RetryPolicy{}, chat.ErrUpstream, 1, nil, "", false},
		{"clean end without finish is a cut", []reply{{events: []string{oaText("par")}}, ok},
			RetryPolicy{}, chat.ErrUpstream, 1, nil, "", false},
		{"error chunk mid-stream", []reply{{events: []string{oaText("a"), `{"error":{"message":"server overloaded","type":"overloaded"}}`}}, ok},
			RetryPolicy{}, chat.ErrUpstream, 1, nil, "", false},
		{"error chunk before output retried", []reply{{events: []string{`{"error":{"message":"busy","type":"server_error"}}`}}, ok},
			RetryPolicy{}, "", 2, nil, "fine", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.replies...)
			c, waits := newTestClient(t, TypeOpenAI, f, func(c *Config) {
				c.Retry.MaxAttempts = tt.retry.MaxAttempts
			})
			var ev chattest.Recorder
			resp, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
			if n := len(f.requests()); n != tt.attempts {
				t.Errorf("%d requests, want %d", n, tt.attempts)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Content != tt.wantText || resp.Attempts != tt.attempts {
					t.Errorf("response = %+v", resp)
				}
			} else {
				var ce *chat.Error
				if !errors.As(err, &ce) || ce.Code != tt.wantErr {
					t.Fatalf("err = %v, want class %s", err, tt.wantErr)
				}
				if failureOf(ce).Retryable != tt.retryable {
					t.Errorf("retryable = %v, want %v", failureOf(ce).Retryable, tt.retryable)
				}
			}
			for i, w := range tt.minWaits {
				if i >= len(*waits) || (*waits)[i] < w {
					t.Errorf("waits = %v, want wait %d >= %v", *waits, i, w)
				}
			}
			compact(t, ev.Events()) // every started message was ended
		})
	}
}

func TestCutStreamAfterOutput(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{events: concat(anStart(), anBlock(0, "text"), anDelta(0, "text_delta", "Hal")), cut: true})
	c, _ := newTestClient(t, TypeAnthropic, f, nil)
	var ev chattest.Recorder
	_, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrUpstream || failureOf(ce).Retryable {
		t.Fatalf("err = %+v", err)
	}
	if !strings.Contains(ce.Message, "stream ended before completion") || !errors.Is(err, errStreamCut) {
		t.Errorf("message = %q", ce.Message)
	}
	if got, want := compact(t, ev.Events()), []string{"start 1 text", "delta 1 text Hal", "end 1 text"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if len(f.requests()) != 1 {
		t.Errorf("%d requests: a stream cut after output was retried", len(f.requests()))
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		reply    reply
		cfg      func(*Config)
		ctx      func() (context.Context, context.CancelFunc)
		class    string
		contains string
		attempts int
	}{
		{
			name:  "first byte timeout is retried then reported",
			reply: reply{events: []string{`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`, oaText("late")}, pause: 5 * time.Second},
			cfg:   func(c *Config) { c.FirstByteTimeout = 50 * time.Millisecond; c.Retry.MaxAttempts = 2 },
			class: chat.ErrTimeout, contains: "sent no output within 50ms", attempts: 2,
		},
		{
			name:  "idle timeout after output is not retried",
			reply: reply{events: []string{oaText("start"), oaText("late")}, pause: 5 * time.Second},
			cfg:   func(c *Config) { c.IdleTimeout = 50 * time.Millisecond },
			class: chat.ErrTimeout, contains: "stopped sending output for 50ms", attempts: 1,
		},
		{
			name:  "connector timeout",
			reply: reply{events: []string{oaText("start"), oaText("late")}, pause: 5 * time.Second},
			cfg:   func(c *Config) { c.Timeout = 80 * time.Millisecond },
			class: chat.ErrTimeout, contains: "within the connector's timeout of 80ms", attempts: 1,
		},
		{
			name:  "caller deadline",
			reply: reply{events: []string{oaText("late")}, stall: 5 * time.Second},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 60*time.Millisecond)
			},
			class: chat.ErrTimeout, contains: "request's deadline passed", attempts: 1,
		},
		{
			name:  "caller cancel",
			reply: reply{events: []string{oaText("late")}, stall: 5 * time.Second},
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
				return ctx, cancel
			},
			class: chat.ErrCanceled, contains: "was canceled", attempts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.reply)
			c, _ := newTestClient(t, TypeOpenAI, f, tt.cfg)
			ctx, cancel := context.WithCancel(context.Background())
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			start := time.Now()
			var ev chattest.Recorder
			_, err := c.Stream(ctx, &Request{Messages: userMsg("hi")}, ev.Emit)
			var ce *chat.Error
			if !errors.As(err, &ce) || ce.Code != tt.class || !strings.Contains(ce.Message, tt.contains) {
				t.Fatalf("err = %v (class %v), want class %s containing %q", err, ce, tt.class, tt.contains)
			}
			if n := len(f.requests()); n != tt.attempts {
				t.Errorf("%d requests, want %d", n, tt.attempts)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Stream returned after %v: a timeout was not applied", d)
			}
			compact(t, ev.Events())
		})
	}
}

func TestNetworkErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, host, class, contains string
		retryable                   bool
	}{
		{"connection refused", "http://127.0.0.1:1", chat.ErrNetwork, "cannot talk to the openai API at http://127.0.0.1:1 (connection refused)", true},
		{"not an event stream", "", chat.ErrUpstream, "instead of an event stream", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{header: map[string]string{"Content-Type": "text/html"}, body: "<html>"})
			c, waits := newTestClient(t, TypeOpenAI, f, func(c *Config) {
				if tt.host != "" {
					c.Host = tt.host
				}
			})
			_, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, nil)
			var ce *chat.Error
			if !errors.As(err, &ce) || ce.Code != tt.class || !strings.Contains(ce.Message, tt.contains) {
				t.Fatalf("err = %v, want class %s containing %q", err, tt.class, tt.contains)
			}
			if tt.retryable && len(*waits) != DefaultMaxAttempts-1 {
				t.Errorf("waits = %v, want %d retries", *waits, DefaultMaxAttempts-1)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{}.withDefaults()
	for attempt := 1; attempt <= 8; attempt++ {
		full := min(p.BaseDelay<<(attempt-1), p.MaxDelay)
		for range 50 {
			d := p.delay(attempt, 0)
			if d < full/2 || d > full {
				t.Fatalf("delay(%d) = %v, want within [%v, %v]", attempt, d, full/2, full)
			}
		}
	}
	if d := p.delay(1, 30*time.Second); d != 30*time.Second {
		t.Errorf("delay with Retry-After 30s = %v", d)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After": "-4"}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{nil, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != tt.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestConcurrentStreams(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{events: concat(oaText("a"), oaText("b"), oaFinish("stop"), "[DONE]")})
	c, _ := newTestClient(t, TypeOpenAI, f, nil)
	const n = 16
	errs := make(chan error, n)
	ids := make(chan string, n*4)
	for range n {
		go func() {
			_, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, func(e chat.Event) {
				if e.Event == chat.Start {
					ids <- e.ID
				}
			})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(ids)
	var all []string
	for id := range ids {
		all = append(all, id)
	}
	slices.Sort(all)
	if len(slices.Compact(all)) != n {
		t.Errorf("message ids are not unique across streams: %v", all)
	}
}

func TestModelChoice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     string
		req     Request
		want    string
		wantErr string
	}{
		{"connector model", "conn", Request{}, "conn", ""},
		{"request model wins", "conn", Request{Model: "req", Fields: map[string]any{"model": "opt"}}, "req", ""},
		{"options model", "conn", Request{Fields: map[string]any{"model": "opt"}}, "opt", ""},
		{"options model not a string", "conn", Request{Fields: map[string]any{"model": 4}}, "", `option "model" must be a string`},
		{"no model anywhere", "", Request{}, "", "no model is set"},
		{"stream option refused", "conn", Request{Fields: map[string]any{"stream": false}}, "", `option "stream" is set by agentbox`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, reply{events: concat(oaText("x"), oaFinish("stop"), "[DONE]")})
			c, _ := newTestClient(t, TypeOpenAI, f, func(c *Config) { c.Model = tt.cfg })
			tt.req.Messages = userMsg("hi")
			_, err := c.Stream(context.Background(), &tt.req, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.requests()[0].body["model"]; got != tt.want {
				t.Errorf("model sent = %v, want %q", got, tt.want)
			}
		})
	}
}

// TestModelOptionsOnTheWire: every typed model option that is set goes
// into the request body under its name, over Fields and the connector's
// Extra; a "stream" option is refused as a field is.
func TestModelOptionsOnTheWire(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{events: concat(oaText("x"), oaFinish("stop"), "[DONE]")})
	c, _ := newTestClient(t, TypeOpenAI, f, func(c *Config) {
		c.Extra = map[string]any{"temperature": 0.1, "top_p": 0.5}
	})
	temp, maxTokens, seed := 0.7, 64, int64(3)
	req := &Request{
		Messages: userMsg("hi"),
		Fields:   map[string]any{"temperature": 0.3, "frequency_penalty": 1.0},
		Options: chat.ModelOptions{Temperature: &temp, MaxTokens: &maxTokens, Seed: &seed, Stop: chat.Stop{"END"},
			Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`), ToolChoice: json.RawMessage(`"auto"`),
			ResponseFormat: json.RawMessage(`{"type":"json_object"}`), User: "u1", ReasoningEffort: "low", Model: "picked"},
	}
	if _, err := c.Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	b := f.requests()[0].body
	for k, want := range map[string]any{
		"model": "picked", "temperature": 0.7, "top_p": 0.5, "frequency_penalty": 1.0, "max_completion_tokens": 64.0, "seed": 3.0,
		"user": "u1", "reasoning_effort": "low", "tool_choice": "auto",
	} {
		if b[k] != want {
			t.Errorf("%s = %v, want %v", k, b[k], want)
		}
	}
	if fmt.Sprint(b["stop"], b["tools"], b["response_format"]) != "[END] [map[function:map[name:f] type:function]] map[type:json_object]" {
		t.Errorf("stop, tools, response_format = %v %v %v", b["stop"], b["tools"], b["response_format"])
	}
	stream := false
	_, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi"), Options: chat.ModelOptions{Stream: &stream}}, nil)
	if err == nil || !strings.Contains(err.Error(), `option "stream" is set by agentbox`) {
		t.Errorf("stream option: err = %v", err)
	}
}
