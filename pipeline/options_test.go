package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/scripted"
)

// TestOptionsReachTheModel: the assistant's model options, the request's
// over them and a Create hook's over both reach the direct connector as
// request fields, typed all the way.
func TestOptionsReachTheModel(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}}, "")
	temp, maxTokens := 0.3, 512
	e.app.Assistants["qa"].Options = chat.ModelOptions{Temperature: &temp, MaxTokens: &maxTokens, Stop: chat.Stop{"END"}}
	reqTemp := 0.9
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("hi"),
		Options: chat.ModelOptions{Temperature: &reqTemp}}, nil); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(e.llm.TurnRequests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["temperature"] != 0.9 || body["max_completion_tokens"] != 512.0 || strings.Join(toStrings(body["stop"]), ",") != "END" {
		t.Errorf("model request = %v", body)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestCreateHookOptions: a Create hook sees the turn's options and its
// changes merge over them; what it may not change is an error that names
// the field.
func TestCreateHookOptions(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, `function Create(ctx, messages, options) {
  if (options.connector !== "test.llm" || options.sandbox.arguments.max_turns !== 5 || options.sandbox.arguments.permission_mode !== "acceptEdits") {
    throw new Error("saw " + JSON.stringify(options));
  }
  return {options: {sandbox: {arguments: {allowed_tools: ["Read"]}}}};
}`)
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil); err != nil {
		t.Fatal(err)
	}
	args := e.ex.reqs[0].Arguments
	if args.MaxTurns != 5 || args.PermissionMode != "acceptEdits" || strings.Join(args.AllowedTools, ",") != "Read" {
		t.Errorf("arguments = %+v", args)
	}
	if got := e.app.Assistants["coder"].Sandbox.Arguments; got.AllowedTools != nil {
		t.Errorf("the hook changed the assistant: %+v", got)
	}
	for _, tc := range []struct{ hook, want string }{
		{`function Create() { return {options: {temperature: "hot"}} }`, "options.temperature: want a number, got a string"},
		{`function Create() { return {options: {connector: "nope"}} }`, `Create hook chose unknown connector "nope"`},
	} {
		e := newEnv(t, &scripted.Script{}, tc.hook)
		_, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
		var ce *chat.Error
		if !errors.As(err, &ce) || ce.Code != chat.ErrHook || !strings.Contains(ce.Message, tc.want) {
			t.Errorf("%s: err = %v, want a hook error with %q", tc.hook, err, tc.want)
		}
	}
}
