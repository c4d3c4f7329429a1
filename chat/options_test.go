package chat_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

func ptr[T any](v T) *T { return &v }

func TestDecodeOptions(t *testing.T) {
	t.Parallel()
	o, err := chat.DecodeOptions("options", []byte(`{"temperature": 0.5, "max_tokens": 100, "stop": "END",
		"logit_bias": {"50256": -100}, "tools": [{"type": "function"}], "tool_choice": "auto", "seed": 7,
		"connector": "deepseek.v3", "sandbox": {"arguments": {"max_turns": 3, "allowed_tools": []}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := chat.Options{
		ModelOptions: chat.ModelOptions{Temperature: ptr(0.5), MaxTokens: ptr(100), Stop: chat.Stop{"END"},
			LogitBias: map[string]float64{"50256": -100}, Tools: json.RawMessage(`[{"type": "function"}]`),
			ToolChoice: json.RawMessage(`"auto"`), Seed: ptr(int64(7))},
		Connector: "deepseek.v3",
		Sandbox:   &chat.SandboxOptions{Arguments: &chat.Arguments{MaxTurns: 3, AllowedTools: []string{}}},
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("got  %+v\nwant %+v", o, want)
	}
	for _, in := range []string{"", "null", "{}"} {
		if o, err := chat.DecodeOptions("options", []byte(in)); err != nil || !reflect.DeepEqual(o, chat.Options{}) {
			t.Errorf("%q = %+v, %v", in, o, err)
		}
	}
}

func TestDecodeOptionsErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"temperature": "hot"}`, "options.temperature: want a number, got a string"},
		{`{"max_tokens": 1.5}`, "options.max_tokens: want an integer, got 1.5"},
		{`{"max_tokens": "lots"}`, "options.max_tokens: want an integer, got a string"},
		{`{"temprature": 1}`, `options.temprature: unknown field (did you mean "temperature"?)`},
		{`{"nope": 1}`, `options.nope: unknown field (known: audio, connector, disable_global_prompts,`},
		{`{"stop": 3}`, "options.stop: want a string or a list of strings, got a number"},
		{`{"logit_bias": {"1": "x"}}`, "options.logit_bias: want an object of numbers, got a string"},
		{`{"tools": {}}`, "options.tools: want a list, got an object"},
		{`{"tool_choice": 1}`, "options.tool_choice: want a string or an object, got a number"},
		{`{"response_format": "json"}`, "options.response_format: want an object, got a string"},
		{`{"sandbox": {"image": "evil"}}`, "options.sandbox.image: unknown field (only sandbox.arguments may be changed by a hook)"},
		{`{"sandbox": {"arguments": {"max_turns": "x"}}}`, "options.sandbox.arguments.max_turns: want an integer, got a string"},
		{`{"sandbox": {"arguments": {"mode": "x"}}}`, `options.sandbox.arguments.mode: unknown field (did you mean "model"?)`},
		{`{"sandbox": {"arguments": {"nope": "x"}}}`, "options.sandbox.arguments.nope: unknown field (known: allowed_tools, disallowed_tools, max_turns, model, permission_mode)"},
		{`{"sandbox": []}`, "options.sandbox: want an object, got a list"},
		{`[1]`, "options: want an object, got a list"},
		{`{"a":`, "options: invalid JSON"},
	}
	for _, tc := range cases {
		_, err := chat.DecodeOptions("options", []byte(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := chat.DecodeModelOptions("options", []byte(`{"connector": "x"}`)); err == nil || !strings.HasPrefix(err.Error(), "options.connector: unknown field") {
		t.Errorf("model options took a connector: %v", err)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	base := chat.Options{
		ModelOptions: chat.ModelOptions{Temperature: ptr(0.2), MaxTokens: ptr(10)},
		Connector:    "a",
		Sandbox:      &chat.SandboxOptions{Arguments: &chat.Arguments{MaxTurns: 5, PermissionMode: "acceptEdits", AllowedTools: []string{"Bash"}}},
	}
	over := chat.Options{
		ModelOptions: chat.ModelOptions{Temperature: ptr(0.9)},
		Sandbox:      &chat.SandboxOptions{Arguments: &chat.Arguments{MaxTurns: 9, AllowedTools: []string{}}},
	}
	got := base.Merge(over)
	want := chat.Options{
		ModelOptions: chat.ModelOptions{Temperature: ptr(0.9), MaxTokens: ptr(10)},
		Connector:    "a",
		Sandbox:      &chat.SandboxOptions{Arguments: &chat.Arguments{MaxTurns: 9, PermissionMode: "acceptEdits", AllowedTools: []string{}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v %+v\nwant %+v %+v", got, *got.Sandbox.Arguments, want, *want.Sandbox.Arguments)
	}
	if *base.Temperature != 0.2 || base.Sandbox.Arguments.MaxTurns != 5 || len(base.Sandbox.Arguments.AllowedTools) != 1 {
		t.Errorf("Merge changed its receiver: %+v", base)
	}
	if a := got.SandboxArguments(chat.Arguments{}); a.MaxTurns != 9 {
		t.Errorf("SandboxArguments = %+v", a)
	}
	if a := (chat.Options{}).SandboxArguments(chat.Arguments{MaxTurns: 1}); a.MaxTurns != 1 {
		t.Errorf("default arguments = %+v", a)
	}
}

// TestMergeEveryField: every model option a value sets survives Merge
// (an option added later needs nothing more).
func TestMergeEveryField(t *testing.T) {
	t.Parallel()
	var over chat.ModelOptions
	v := reflect.ValueOf(&over).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.String:
			f.SetString("x")
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
		default:
			t.Fatalf("field %s of kind %s: teach this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	if got := (chat.ModelOptions{}).Merge(over); !reflect.DeepEqual(got, over) {
		t.Errorf("Merge lost fields: %+v", got)
	}
}

// TestMergeTokenLimit: max_tokens and max_completion_tokens are one limit:
// an override of either replaces both, so they never travel together.
func TestMergeTokenLimit(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	base := chat.Options{ModelOptions: chat.ModelOptions{MaxTokens: n(1000)}, Connector: "c"}
	got := base.Merge(chat.Options{ModelOptions: chat.ModelOptions{MaxCompletionTokens: n(50)}})
	if got.MaxTokens != nil || *got.MaxCompletionTokens != 50 || got.TokenLimit() != 50 || got.Connector != "c" {
		t.Errorf("merge = %+v", got)
	}
	got = got.Merge(chat.Options{ModelOptions: chat.ModelOptions{MaxTokens: n(20)}})
	if got.MaxCompletionTokens != nil || *got.MaxTokens != 20 || got.TokenLimit() != 20 {
		t.Errorf("merge back = %+v", got)
	}
	if kept := base.Merge(chat.Options{Connector: "d"}); *kept.MaxTokens != 1000 || kept.Connector != "d" {
		t.Errorf("an override without a limit changed it: %+v", kept)
	}
	if (chat.ModelOptions{}).TokenLimit() != 0 {
		t.Error("no limit is not 0")
	}
}

// TestCollectorSeparatesMessages: separate text messages are joined with
// a blank line, the pieces Append returns add up to the text, other types
// and replaced text already out are left alone.
func TestCollectorSeparatesMessages(t *testing.T) {
	t.Parallel()
	var c chat.Collector
	var pieces strings.Builder
	for _, e := range []chat.Event{
		{Event: chat.Start, ID: "t", Type: chat.TypeThinking, Text: "hmm"},
		{Event: chat.Start, ID: "a", Type: chat.TypeText, Text: "One"},
		{Event: chat.Delta, ID: "a", Type: chat.TypeText, Text: " two."},
		{Event: chat.End, ID: "a", Type: chat.TypeText},
		{Event: chat.Start, ID: "l", Type: chat.TypeLoading, Text: "..."},
		{Event: chat.Replace, ID: "l", Type: chat.TypeText, Text: "Three."},
		{Event: chat.Replace, ID: "a", Type: chat.TypeText, Text: "taken back?"},
		{Event: chat.Start, ID: "b", Type: chat.TypeText},
		{Event: chat.Delta, ID: "b", Type: chat.TypeText, Text: "Four."},
	} {
		pieces.WriteString(c.Append(e))
	}
	want := "One two.\n\nThree.\n\nFour."
	if c.Text() != want || pieces.String() != want {
		t.Errorf("text %q, pieces %q, want %q", c.Text(), pieces.String(), want)
	}
	th := chat.Collector{Type: chat.TypeThinking}
	th.Add(chat.Event{Event: chat.Start, ID: "t", Type: chat.TypeThinking, Text: "hmm"})
	if th.Text() != "hmm" {
		t.Errorf("thinking = %q", th.Text())
	}
	if chat.FinishReason("end_turn") != "stop" || chat.FinishReason("max_tokens") != "length" || chat.FinishReason("tool_use") != "tool_calls" ||
		chat.FinishReason("refusal") != "content_filter" || chat.FinishReason("") != "stop" {
		t.Error("FinishReason maps a provider's reason wrong")
	}
	tc := chat.ToolCall{Input: chat.ArgumentsInput("not json")}
	if tc.Arguments() != "not json" || string(chat.ArgumentsInput(`{"a":1}`)) != `{"a":1}` || (chat.ToolCall{}).Arguments() != "{}" {
		t.Errorf("arguments round trip: %q", tc.Arguments())
	}
}
