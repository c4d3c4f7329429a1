package assistant

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

func TestParseOverridable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		src       string
		sandboxed bool
		want      string // problems, one per line
		rules     string // the rule names, sorted
	}{
		{name: "shapes", src: `{"overridable": {"model": ["a", "b"], "max_tokens": 4096, "temperature": {"min": 0, "max": 1}, "tools": true, "seed": false}}`,
			rules: "max_completion_tokens max_tokens model temperature tools"},
		{name: "yao bounds", src: `{"overridable": {"reasoning_effort": {"allowed_values": ["low", "medium"]}, "max_completion_tokens": {"max": 100}, "max_tokens": true}}`,
			rules: "max_completion_tokens max_tokens reasoning_effort"},
		{name: "unknown option", src: `{"overridable": {"temprature": true}}`,
			want: `f:1:32: overridable.temprature: "temprature" is not a model option (did you mean "temperature"?)`},
		{name: "stream", src: `{"overridable": {"stream": true}}`, want: `f:1:28: overridable.stream: "stream" is not a model option (known: audio, frequency_penalty, logit_bias,`},
		{name: "number for a string option", src: `{"overridable": {"model": 3}}`,
			want: "f:1:27: overridable.model: a number is the most a numeric option may be; for this option use true, false or a list of allowed values"},
		{name: "values of the wrong type", src: `{"overridable": {"model": ["a", 2]}}`, want: "f:1:33: overridable.model[1]: want a string"},
		{name: "list for a flag", src: `{"overridable": {"tools": ["x"]}}`, want: "f:1:27: overridable.tools: this option takes only true or false"},
		{name: "empty list", src: `{"overridable": {"model": []}}`, want: "f:1:27: overridable.model: an empty list allows nothing; use false"},
		{name: "min over max", src: `{"overridable": {"top_p": {"min": 1, "max": 0.5}}}`, want: "f:1:27: overridable.top_p: min 1 is over max 0.5"},
		{name: "bounds on a string", src: `{"overridable": {"user": {"max": 3}}}`, want: "f:1:34: overridable.user.max: only numeric options have bounds"},
		{name: "unknown bound", src: `{"overridable": {"top_p": {"most": 3}}}`, want: `f:1:36: overridable.top_p: unknown field "most" (known: allowed_values, max, min)`},
		{name: "null", src: `{"overridable": {"top_p": null}}`, want: "f:1:27: overridable.top_p: want true, false, a number, a list of allowed values or {min, max, allowed_values}, got null"},
		{name: "sandboxed: model and tokens", src: `{"overridable": {"model": ["a"], "max_tokens": 1000, "temperature": false}}`, sandboxed: true,
			rules: "max_completion_tokens max_tokens model"},
		{name: "sandboxed: sampling", src: `{"overridable": {"temperature": true}}`, sandboxed: true,
			want: "f:1:33: overridable.temperature: a sandboxed assistant lets requests change only model, max_tokens, max_completion_tokens: its coding agent chooses its own sampling and tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var raw rawPackage
			d := decodeJSONC("f", []byte(tt.src), &raw)
			if len(d.probs) > 0 {
				t.Fatalf("decode: %v", d.probs)
			}
			o := parseOverridable(d, raw.Overridable, tt.sandboxed)
			var got []string
			for _, p := range d.probs {
				got = append(got, p.String())
			}
			if g := strings.Join(got, "\n"); (tt.want == "" && g != "") || !strings.HasPrefix(g, tt.want) {
				t.Errorf("problems:\n got %s\nwant %s", g, tt.want)
			}
			if tt.want == "" && keys(o.Rules) != tt.rules {
				t.Errorf("rules = %s, want %s", keys(o.Rules), tt.rules)
			}
		})
	}
}

func TestCheckOverride(t *testing.T) {
	t.Parallel()
	ptr := func(v int) *int { return &v }
	f64 := func(v float64) *float64 { return &v }
	decode := func(s string) chat.ModelOptions {
		o, err := chat.DecodeModelOptions("", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	explicit := func(src string, sandboxed bool) *Overridable {
		var raw rawPackage
		d := decodeJSONC("f", []byte(src), &raw)
		o := parseOverridable(d, raw.Overridable, sandboxed)
		if len(d.probs) > 0 {
			t.Fatal(d.probs)
		}
		return o
	}
	direct := &Assistant{ID: "qa", Overridable: DefaultOverridable(false), Options: chat.ModelOptions{MaxTokens: ptr(1000)}}
	noLimit := &Assistant{ID: "qa", Overridable: DefaultOverridable(false)}
	withTools := &Assistant{ID: "fixed", Overridable: DefaultOverridable(false), Options: chat.ModelOptions{Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`)}}
	sandboxed := &Assistant{ID: "coder", Sandbox: &Sandbox{Command: "claude"}, Overridable: DefaultOverridable(true)}
	listed := &Assistant{ID: "pick", Overridable: explicit(`{"overridable": {"model": ["a", "b"], "max_tokens": 4096, "temperature": {"min": 0.1, "max": 1}}}`, false),
		Options: chat.ModelOptions{MaxTokens: ptr(100), Temperature: f64(0.5)}}
	tests := []struct {
		name    string
		a       *Assistant
		req     string
		ceiling int
		field   string // "" when allowed
		problem string
	}{
		{"default sampling and tools", direct, `{"temperature": 1.5, "top_p": 0.1, "stop": "x", "seed": 3, "user": "u", "tools": [], "tool_choice": "auto", "parallel_tool_calls": false, "response_format": {"type": "json_object"}}`, 0, "", ""},
		{"default: lower the limit", direct, `{"max_tokens": 500}`, 0, "", ""},
		{"default: the limit itself", direct, `{"max_completion_tokens": 1000}`, 0, "", ""},
		{"default: raise the limit", direct, `{"max_tokens": 1001}`, 0, "max_tokens", `1001 is over the token limit of assistant "qa", 1000: requests may lower it, not raise it`},
		{"default: raise the newer name", direct, `{"max_completion_tokens": 5000}`, 0, "max_completion_tokens", "over the token limit"},
		{"default: the provider's ceiling", noLimit, `{"max_tokens": 5000}`, 4096, "max_tokens", `5000 is over the token limit of assistant "qa", 4096`},
		{"default: no ceiling", noLimit, `{"max_tokens": 50000}`, 0, "", ""},
		{"default: zero tokens", noLimit, `{"max_tokens": 0}`, 0, "max_tokens", "0 is not a positive whole number"},
		{"default: model", direct, `{"model": "gpt-5"}`, 0, "model", `assistant "qa" does not let requests change it: by default requests may change only frequency_penalty,`},
		{"default: effort", direct, `{"reasoning_effort": "high"}`, 0, "reasoning_effort", `package.yao "overridable" can allow more`},
		{"stream", direct, `{"stream": false}`, 0, "stream", "agentbox always streams"},
		{"default: the assistant's own tools", withTools, `{"tools": []}`, 0, "tools", `assistant "fixed" sets its own tools, which requests do not replace`},
		{"default: sampling with own tools", withTools, `{"temperature": 1, "tool_choice": "auto"}`, 0, "", ""},
		{"sandboxed: tools", sandboxed, `{"tools": [{"type": "function", "function": {"name": "f"}}]}`, 0, "tools",
			`assistant "coder" runs a coding agent in a sandbox, which uses its own tools`},
		{"sandboxed: sampling", sandboxed, `{"temperature": 0}`, 0, "temperature", "which chooses its own sampling; requests may change only model, max_tokens, max_completion_tokens"},
		{"sandboxed: lower the limit", sandboxed, `{"max_tokens": 100}`, 4096, "", ""},
		{"listed model", listed, `{"model": "b", "max_tokens": 4096, "temperature": 0.1}`, 0, "", ""},
		{"unlisted model", listed, `{"model": "c"}`, 0, "model", `"c" is not one of the values assistant "pick" allows: "a", "b"`},
		{"over the listed max", listed, `{"max_completion_tokens": 4097}`, 0, "max_completion_tokens", `4097 is over the most assistant "pick" allows, 4096`},
		{"under the min", listed, `{"temperature": 0}`, 0, "temperature", `0 is under the least value assistant "pick" allows, 0.1`},
		{"not listed", listed, `{"top_p": 0.5}`, 0, "top_p", `assistant "pick" does not let requests change it (its package.yao "overridable" does not list it)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.a.CheckOverride(decode(tt.req), tt.ceiling)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *chat.FieldError
			if !errors.As(err, &fe) || fe.Path != tt.field || !strings.Contains(fe.Problem, tt.problem) {
				t.Fatalf("err = %v, want %s: ...%s...", err, tt.field, tt.problem)
			}
		})
	}
	// What a request does not set is never checked.
	if err := listed.CheckOverride(chat.ModelOptions{}, 0); err != nil {
		t.Error(err)
	}
	if b, _ := json.Marshal(chat.ModelOptions{}); string(b) != "{}" {
		t.Errorf("empty options marshal to %s: CheckOverride would see options nobody set", b)
	}
}
