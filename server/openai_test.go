package server

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// twoMessagesTurn answers with two separate text messages around an agent
// tool call, then a client function call, and finish reason tool_calls.
func twoMessagesTurn(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "First."})
	emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
	chat.Whole(emit, "c1", chat.TypeToolCall, "", map[string]any{"name": "Bash", "id": "toolu_1", "input": chat.RawJSON(`{"command":"ls"}`)})
	emit(chat.Event{Event: chat.Start, ID: "m2", Type: chat.TypeText})
	emit(chat.Event{Event: chat.Delta, ID: "m2", Type: chat.TypeText, Text: "Sec"})
	emit(chat.Event{Event: chat.Delta, ID: "m2", Type: chat.TypeText, Text: "ond."})
	emit(chat.Event{Event: chat.End, ID: "m2", Type: chat.TypeText})
	call := chat.ToolCall{ID: "call_9", Name: "get_weather", Input: chat.RawJSON(`{"city":"Paris"}`)}
	chat.Whole(emit, "c2", chat.TypeToolCall, "", map[string]any{"name": call.Name, "id": call.ID, "input": call.Input, "client": true})
	return &pipeline.Response{Content: "First.\n\nSecond.", FinishReason: chat.FinishToolCalls, ToolCalls: []chat.ToolCall{call}}, nil
}

// TestCompletionStreamEqualsWhole: a streamed answer assembled by a client
// is the non-streamed answer: the same text with the same separators, the
// same tool calls, the same finish reason.
func TestCompletionStreamEqualsWhole(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = twoMessagesTurn
	ts := startServer(t, fb, nil)
	req := `{"model":"qa","messages":[{"role":"user","content":"x"}]`
	_, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, req+`}`)
	var c completion
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0]
	if m.Message.Content == nil || *m.Message.Content != "First.\n\nSecond." || m.FinishReason != "tool_calls" {
		t.Fatalf("whole = %s", out)
	}
	if got, _ := json.Marshal(m.Message.ToolCalls); string(got) != `[{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]` {
		t.Errorf("tool calls = %s", got)
	}

	_, out = do(t, ts, "POST", "/v1/chat/completions", tokenAlice, req+`,"stream":true,"stream_options":{"include_usage":true}}`)
	var text strings.Builder
	var finish []string
	var calls []wireToolCall
	usageNulls, chunks := 0, 0
	for _, line := range strings.Split(out, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		chunks++
		var raw map[string]json.RawMessage
		_ = json.Unmarshal([]byte(data), &raw)
		if string(raw["usage"]) == "null" {
			usageNulls++
		}
		var ch completionChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				text.WriteString(*c.Delta.Content)
			}
			if c.FinishReason != nil {
				finish = append(finish, *c.FinishReason)
			}
			calls = append(calls, c.Delta.ToolCalls...)
		}
	}
	if text.String() != *m.Message.Content || !reflect.DeepEqual(finish, []string{"tool_calls"}) {
		t.Errorf("streamed text %q finish %v, want %q tool_calls", text.String(), finish, *m.Message.Content)
	}
	if len(calls) != 1 || calls[0].Index == nil || *calls[0].Index != 0 || calls[0].ID != "call_9" || calls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("streamed tool calls = %+v", calls)
	}
	if usageNulls != chunks-1 {
		t.Errorf("%d of %d chunks have usage null, want all but the last", usageNulls, chunks)
	}
}

// TestCompletionFinishReasons: the pipeline's finish reason reaches the
// client as it is.
func TestCompletionFinishReasons(t *testing.T) {
	t.Parallel()
	for _, reason := range []string{"stop", "length", "content_filter"} {
		fb := newFake(t)
		fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
			chat.Whole(emit, "m1", chat.TypeText, "cut", nil)
			return &pipeline.Response{FinishReason: reason}, nil
		}
		ts := startServer(t, fb, nil)
		_, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","messages":[{"role":"user","content":"x"}]}`)
		if !strings.Contains(out, `"finish_reason":"`+reason+`"`) {
			t.Errorf("%s: %s", reason, out)
		}
		_, out = do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","stream":true,"messages":[{"role":"user","content":"x"}]}`)
		if !strings.Contains(out, `"finish_reason":"`+reason+`"`) {
			t.Errorf("%s streamed: %s", reason, out)
		}
	}
}

// TestCompletionFunctionCalling: tools and the rest of the request's model
// options reach the turn typed; assistant tool calls and tool results in
// the conversation arrive as messages; what cannot be honoured is a 400
// naming the field.
func TestCompletionFunctionCalling(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	body := `{"model":"qa","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
	  "tool_choice":"auto","parallel_tool_calls":false,"response_format":{"type":"json_object"},"stop":["END"],"seed":7,
	  "max_completion_tokens":100,"logprobs":false,"store":true,"service_tier":"auto",
	  "messages":[{"role":"user","content":"weather?"},
	    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
	    {"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"18C"}]}]}`
	resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	req := fb.lastCall(t)
	o := req.Options
	if string(o.Tools) != `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]` || string(o.ToolChoice) != `"auto"` ||
		o.ParallelToolCalls == nil || *o.ParallelToolCalls || string(o.ResponseFormat) != `{"type":"json_object"}` ||
		!reflect.DeepEqual(o.Stop, chat.Stop{"END"}) || *o.Seed != 7 || *o.MaxCompletionTokens != 100 || o.MaxTokens != nil {
		t.Errorf("options = %+v", o)
	}
	want := []chat.Message{
		{Role: "user", Content: "weather?"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Input: chat.RawJSON(`{"city":"Paris"}`)}}},
		{Role: "tool", ToolCallID: "call_1", Content: "18C"},
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages = %+v", req.Messages)
	}

	for _, tc := range []struct{ body, param, msg string }{
		{`{"model":"qa","temprature":1,"messages":[{"role":"user","content":"x"}]}`, "temprature", "unknown field"},
		{`{"model":"qa","temperature":"hot","messages":[{"role":"user","content":"x"}]}`, "temperature", "want a number"},
		{`{"model":"qa","tools":{},"messages":[{"role":"user","content":"x"}]}`, "tools", "want a list"},
		{`{"model":"qa","logprobs":true,"messages":[{"role":"user","content":"x"}]}`, "logprobs", "not supported"},
		{`{"model":"qa","functions":[{"name":"f"}],"messages":[{"role":"user","content":"x"}]}`, "functions", "use tools"},
		{`{"model":"qa","messages":[{"role":"tool","content":"r"}]}`, "messages[0].tool_call_id", "missing"},
		{`{"model":"qa","messages":[{"role":"user","content":"x","tool_calls":[{"id":"a","type":"function","function":{"name":"f"}}]}]}`, "messages[0].tool_calls", "only assistant messages"},
		{`{"model":"qa","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"custom","function":{"name":"f"}}]},{"role":"user","content":"x"}]}`, "messages[0].tool_calls[0].type", "only function tool calls"},
	} {
		resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, tc.body)
		e := apiErrFull(t, out)
		if resp.StatusCode != 400 || e.Param == nil || *e.Param != tc.param || !strings.Contains(e.Message, tc.msg) || e.Type != "invalid_request_error" {
			t.Errorf("%s: %d %s, want 400 with param %s", tc.body, resp.StatusCode, out, tc.param)
		}
	}
}

// TestCompletionPolicyErrorParam: the pipeline's refusal of an option
// reaches the client as a 400 whose param names it.
func TestCompletionPolicyErrorParam(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		fe := &chat.FieldError{Path: "model", Problem: `assistant "qa" does not let requests change it`}
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
	}
	ts := startServer(t, fb, nil)
	for _, stream := range []string{"false", "true"} {
		resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		e := apiErrFull(t, out)
		if resp.StatusCode != 400 || e.Param == nil || *e.Param != "model" || e.Code != "invalid_request" {
			t.Errorf("stream %s: %d %s", stream, resp.StatusCode, out)
		}
	}
	// The native API names it under options.
	resp, out := do(t, ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"message":"x","options":{"model":"m"}}`)
	if e := apiErrFull(t, out); resp.StatusCode != 400 || e.Param == nil || *e.Param != "options.model" || !strings.HasPrefix(e.Message, "options.model: ") {
		t.Errorf("native: %d %s", resp.StatusCode, out)
	}
}

func apiErrFull(t *testing.T, body string) errorDetail {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error
}
