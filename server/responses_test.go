package server

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// agentTurn is a sandboxed agent's turn: thinking, text, a tool it ran
// itself (and one that failed), more text.
func agentTurn(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	emit(chat.Event{Event: chat.Start, ID: "t1", Type: chat.TypeThinking, Text: "Let me look."})
	emit(chat.Event{Event: chat.End, ID: "t1", Type: chat.TypeThinking})
	chat.Whole(emit, "m1", chat.TypeText, "I will look.", nil)
	emit(chat.Event{Event: chat.Start, ID: "c1", Type: chat.TypeToolCall, Props: map[string]any{"name": "Bash", "id": "toolu_1"}})
	emit(chat.Event{Event: chat.End, ID: "c1", Type: chat.TypeToolCall, Props: map[string]any{"input": chat.RawJSON(`{"command":"ls"}`)}})
	chat.Whole(emit, "r1", chat.TypeToolResult, "", map[string]any{"tool_call_id": "toolu_1", "content": "a.txt\n", "is_error": false})
	chat.Whole(emit, "c2", chat.TypeToolCall, "", map[string]any{"name": "Read", "id": "toolu_2", "input": chat.RawJSON(`{"file_path":"x"}`)})
	chat.Whole(emit, "r2", chat.TypeToolResult, "", map[string]any{"tool_call_id": "toolu_2", "content": "no such file", "is_error": true})
	chat.Notice(emit, "n1", "note", "ignored")
	emit(chat.Event{Event: chat.Start, ID: "m2", Type: chat.TypeText, Text: "One "})
	emit(chat.Event{Event: chat.Delta, ID: "m2", Type: chat.TypeText, Text: "file."})
	emit(chat.Event{Event: chat.End, ID: "m2", Type: chat.TypeText})
	return &pipeline.Response{Content: "I will look.\n\nOne file.", FinishReason: chat.FinishStop, Usage: chat.Usage{InputTokens: 10, OutputTokens: 4, CacheReadTokens: 2}}, nil
}

func decodeResponse(t *testing.T, body string) map[string]any {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return r
}

// TestResponsesOutput: a turn's events become output items, the same
// whole or streamed, and the streamed events come in OpenAI's order with
// sequence numbers.
func TestResponsesOutput(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = agentTurn
	ts := startServer(t, fb, nil)
	resp, out := do(t, ts, "POST", "/v1/responses", tokenAlice, `{"model":"coder","input":"ls please"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	whole := decodeResponse(t, out)
	if whole["object"] != "response" || whole["status"] != "completed" || !strings.HasPrefix(whole["id"].(string), "resp_") || whole["model"] != "coder" {
		t.Errorf("response = %s", out)
	}
	items, _ := json.Marshal(whole["output"])
	for _, want := range []string{
		`{"id":"rs_`, `"summary":[{"text":"Let me look.","type":"summary_text"}],"type":"reasoning"}`,
		`"content":[{"annotations":[],"logprobs":[],"text":"I will look.","type":"output_text"}],"id":"msg_`,
		`"arguments":"{\"command\":\"ls\"}","error":null,"id":"mcp_`, `"name":"Bash","output":"a.txt\n","server_label":"coder","status":"completed","type":"mcp_call"}`,
		`"error":{"content":"no such file","type":"mcp_tool_execution_error"}`, `"name":"Read","output":null,"server_label":"coder","status":"failed","type":"mcp_call"}`,
		`"text":"\n\nOne file.","type":"output_text"}]`,
	} {
		if !strings.Contains(string(items), want) {
			t.Errorf("output lacks %s:\n%s", want, items)
		}
	}
	if u, _ := json.Marshal(whole["usage"]); string(u) != `{"input_tokens":12,"input_tokens_details":{"cached_tokens":2},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":16}` {
		t.Errorf("usage = %s", u)
	}
	if conv, _ := whole["conversation"].(map[string]any); conv["id"] != resp.Header.Get("X-Chat-ID") || conv["id"] == "" {
		t.Errorf("conversation %v, X-Chat-ID %q", whole["conversation"], resp.Header.Get("X-Chat-ID"))
	}

	resp, out = do(t, ts, "POST", "/v1/responses", tokenAlice, `{"model":"coder","input":"ls please","stream":true}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var types []string
	var final map[string]any
	text := ""
	for i, frame := range strings.Split(strings.TrimSpace(out), "\n\n") {
		ev, data, ok := strings.Cut(frame, "\ndata: ")
		if !ok {
			t.Fatalf("frame %q", frame)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatal(err)
		}
		typ := strings.TrimPrefix(ev, "event: ")
		if d["type"] != typ || d["sequence_number"] != float64(i) {
			t.Errorf("frame %d: event %s, data type %v, sequence %v", i, typ, d["type"], d["sequence_number"])
		}
		types = append(types, typ)
		if typ == "response.output_text.delta" {
			text += d["delta"].(string)
		}
		if typ == "response.completed" {
			final = d["response"].(map[string]any)
		}
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.mcp_call.in_progress", "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
		"response.mcp_call.completed", "response.output_item.done",
		"response.output_item.added", "response.mcp_call.in_progress", "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
		"response.mcp_call.failed", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(types, "\n"), strings.Join(want, "\n"))
	}
	if text != "I will look.\n\nOne file." {
		t.Errorf("streamed text = %q", text)
	}
	// The streamed response's output is the whole one's (ids aside).
	strip := func(v any) string {
		b, _ := json.Marshal(v)
		return regexpIDs.ReplaceAllString(string(b), "ID")
	}
	if strip(final["output"]) != strip(whole["output"]) {
		t.Errorf("streamed output:\n%s\nwhole:\n%s", strip(final["output"]), strip(whole["output"]))
	}
}

// TestResponsesRequest: input items, instructions and options become the
// turn's messages and typed model options; what cannot be honoured is a
// 400 naming the field.
func TestResponsesRequest(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	body := `{"model":"qa","instructions":"Be brief.","temperature":0.3,"max_output_tokens":100,"parallel_tool_calls":false,
	  "tools":[{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true}],
	  "tool_choice":{"type":"function","name":"get_weather"},"reasoning":{"effort":"low","summary":"auto"},
	  "text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}},
	  "store":false,"include":["reasoning.encrypted_content"],"truncation":"disabled","prompt_cache_key":"k","safety_identifier":"s",
	  "input":[{"role":"user","content":[{"type":"input_text","text":"Weather?"}]},
	    {"type":"reasoning","id":"rs_x","summary":[]},
	    {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},
	    {"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
	    {"type":"function_call","call_id":"c2","name":"get_weather","arguments":"{\"city\":\"Rome\"}"},
	    {"type":"function_call_output","call_id":"c1","output":"18C"},
	    {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"20C"}]},
	    {"type":"mcp_call","id":"mcp_x","name":"Bash","server_label":"coder","arguments":"{}"},
	    {"role":"developer","content":"Use Celsius."},
	    {"role":"user","content":"And?"}]}`
	resp, out := do(t, ts, "POST", "/v1/responses", tokenAlice, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	req := fb.lastCall(t)
	want := []chat.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Weather?"},
		{Role: "assistant", Content: "Checking.", ToolCalls: []chat.ToolCall{
			{ID: "c1", Name: "get_weather", Input: chat.RawJSON(`{"city":"Paris"}`)}, {ID: "c2", Name: "get_weather", Input: chat.RawJSON(`{"city":"Rome"}`)}}},
		{Role: "tool", ToolCallID: "c1", Content: "18C"},
		{Role: "tool", ToolCallID: "c2", Content: "20C"},
		{Role: "developer", Content: "Use Celsius."},
		{Role: "user", Content: "And?"},
	}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages:\n%+v\nwant:\n%+v", req.Messages, want)
	}
	o := req.Options
	if *o.Temperature != 0.3 || *o.MaxCompletionTokens != 100 || o.MaxTokens != nil || *o.ParallelToolCalls || o.ReasoningEffort != "low" ||
		string(o.Tools) != `[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true}}]` ||
		string(o.ToolChoice) != `{"function":{"name":"get_weather"},"type":"function"}` ||
		string(o.ResponseFormat) != `{"json_schema":{"name":"w","schema":{"type":"object"},"strict":true},"type":"json_schema"}` {
		t.Errorf("options = %+v", o)
	}
	if !req.Ephemeral || req.Continue {
		t.Errorf("store false: ephemeral %v, continue %v", req.Ephemeral, req.Continue)
	}
	r := decodeResponse(t, out)
	if r["store"] != false || r["instructions"] != "Be brief." || r["temperature"] != 0.3 || r["max_output_tokens"] != 100.0 {
		t.Errorf("response echoes %s", out)
	}

	for _, tc := range []struct{ body, param, msg string }{
		{`{"input":"x"}`, "model", "missing"},
		{`{"model":"qa"}`, "input", "missing"},
		{`{"model":"qa","input":[]}`, "input", "empty"},
		{`{"model":"qa","input":5}`, "input", "want a string or a list"},
		{`{"model":"qa","input":"x","temprature":1}`, "temprature", "unknown field"},
		{`{"model":"qa","input":"x","background":true}`, "background", "not supported"},
		{`{"model":"qa","input":"x","prompt":{"id":"p"}}`, "prompt", "not supported"},
		{`{"model":"qa","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type", "function tools only"},
		{`{"model":"qa","input":"x","tool_choice":"sometimes"}`, "tool_choice", "not one of"},
		{`{"model":"qa","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type", "not one of"},
		{`{"model":"qa","input":"x","text":{"verbosity":"low"}}`, "text.verbosity", "not supported"},
		{`{"model":"qa","input":[{"type":"input_image","image_url":"x"}]}`, "input[0].type", "not supported"},
		{`{"model":"qa","input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "input[0].content[0].image_url", "missing"},
		{`{"model":"qa","input":[{"role":"user","content":[{"type":"input_image","file_id":"f1"}]}]}`, "input[0].content[0].file_id", "not supported"},
		{`{"model":"qa","input":[{"role":"user","content":[{"type":"input_image","image_url":"ftp://x/a.png"}]}]}`, "input[0].content[0].image_url", "want a data: URL"},
		{`{"model":"qa","input":[{"role":"assistant","content":[{"type":"input_image","image_url":"https://x.example/a.png"}]}]}`, "input[0].content[0].type", "user messages only"},
		{`{"model":"qa","input":[{"role":"user","content":[{"type":"input_file","file_id":"f1"}]}]}`, "input[0].content[0].type", "only text and input_image parts"},
		{`{"model":"qa","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", "missing"},
		{`{"model":"qa","input":[{"type":"item_reference","id":"msg_zz"}]}`, "input[0].id", "not the id of an item agentbox returned"},
		{`{"model":"qa","input":[{"type":"item_reference","id":"msg_0123456789abcdef01234567_1"}]}`, "input[0].id", "no stored response holds item"},
		{`{"model":"qa","input":"x","conversation":"../etc"}`, "conversation", "chat id"},
		{`{"model":"qa","input":"x","conversation":"c","previous_response_id":"resp_1"}`, "previous_response_id", "not both"},
	} {
		resp, out := do(t, ts, "POST", "/v1/responses", tokenAlice, tc.body)
		e := apiErrFull(t, out)
		if resp.StatusCode != 400 || e.Param == nil || *e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %d %s, want 400 param %s (%s)", tc.body, resp.StatusCode, out, tc.param, tc.msg)
		}
	}
	resp, out = do(t, ts, "POST", "/v1/responses", tokenAlice, `{"model":"gpt-4o","input":"x"}`)
	if resp.StatusCode != 404 || apiErrFull(t, out).Type != "not_found_error" {
		t.Errorf("unknown assistant: %d %s", resp.StatusCode, out)
	}
}

// TestResponsesConversations: responses belong to chats; stored ones are
// continued by previous_response_id (the newest of a chat only) and
// referenced by item_reference; conversation names the chat; store: false
// keeps nothing.
func TestResponsesConversations(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		chat.Whole(emit, "m1", chat.TypeText, "answer to "+req.Messages[len(req.Messages)-1].Content, nil)
		return &pipeline.Response{FinishReason: chat.FinishStop}, nil
	}
	ts := startServer(t, fb, nil)
	create := func(token, body string) (int, map[string]any, string) {
		t.Helper()
		resp, out := do(t, ts, "POST", "/v1/responses", token, body)
		if resp.StatusCode != 200 {
			return resp.StatusCode, nil, out
		}
		return 200, decodeResponse(t, out), out
	}
	_, r1, _ := create(tokenAlice, `{"model":"qa","input":"one"}`)
	chat1 := fb.lastCall(t).ChatID
	if fb.lastCall(t).Continue {
		t.Error("a first response continues a chat")
	}
	_, r2, _ := create(tokenAlice, `{"model":"qa","input":"two","previous_response_id":"`+r1["id"].(string)+`"}`)
	if got := fb.lastCall(t); got.ChatID != chat1 || !got.Continue || r2["previous_response_id"] != r1["id"] {
		t.Errorf("previous_response_id: chat %q (want %q), continue %v", got.ChatID, chat1, got.Continue)
	}
	// Only the newest response of a chat continues it.
	status, _, out := create(tokenAlice, `{"model":"qa","input":"branch","previous_response_id":"`+r1["id"].(string)+`"}`)
	if e := apiErrFull(t, out); status != 409 || e.Code != CodeConflict || *e.Param != "previous_response_id" || !strings.Contains(e.Message, "not the newest") {
		t.Errorf("branch: %d %s", status, out)
	}
	// Another user does not see it.
	status, _, out = create(tokenBob, `{"model":"qa","input":"x","previous_response_id":"`+r2["id"].(string)+`"}`)
	if status != 404 || *apiErrFull(t, out).Param != "previous_response_id" {
		t.Errorf("bob: %d %s", status, out)
	}
	// Items of a stored response, referenced, continue its chat.
	msgID := r2["output"].([]any)[0].(map[string]any)["id"].(string)
	create(tokenAlice, `{"model":"qa","input":[{"role":"user","content":"two"},{"type":"item_reference","id":"`+msgID+`"},{"role":"user","content":"three"}]}`)
	got := fb.lastCall(t)
	if got.ChatID != chat1 || got.Continue || len(got.Messages) != 3 || got.Messages[1].Content != "answer to two" || got.Messages[1].Role != "assistant" {
		t.Errorf("item_reference: chat %q continue %v messages %+v", got.ChatID, got.Continue, got.Messages)
	}
	// conversation is the chat id.
	_, r4, _ := create(tokenAlice, `{"model":"qa","input":"x","conversation":{"id":"my-conv"}}`)
	if got := fb.lastCall(t); got.ChatID != "my-conv" || !got.Continue || r4["conversation"].(map[string]any)["id"] != "my-conv" {
		t.Errorf("conversation: %+v", got)
	}
	// store: false keeps nothing.
	_, r5, _ := create(tokenAlice, `{"model":"qa","input":"x","store":false}`)
	if resp, out := do(t, ts, "GET", "/v1/responses/"+r5["id"].(string), tokenAlice, ""); resp.StatusCode != 404 || !strings.Contains(out, "store: false") {
		t.Errorf("unstored retrieve: %d %s", resp.StatusCode, out)
	}
	// Retrieval: the stored response as it was returned, for its owner.
	resp, out := do(t, ts, "GET", "/v1/responses/"+r1["id"].(string), tokenAlice, "")
	if resp.StatusCode != 200 || decodeResponse(t, out)["id"] != r1["id"] || resp.Header.Get("X-Chat-ID") != chat1 {
		t.Errorf("retrieve: %d %s", resp.StatusCode, out)
	}
	if resp, _ := do(t, ts, "GET", "/v1/responses/"+r1["id"].(string), tokenBob, ""); resp.StatusCode != 404 {
		t.Errorf("bob retrieves alice's response: %d", resp.StatusCode)
	}
}

// TestResponsesStatus: finish reasons and failures become the response's
// status, whole and streamed.
func TestResponsesStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		finish, status, reason string
		fail                   bool
	}{
		{chat.FinishLength, "incomplete", "max_output_tokens", false},
		{chat.FinishContentFilter, "incomplete", "content_filter", false},
		{chat.FinishToolCalls, "completed", "", false},
		{"", "failed", "", true},
	} {
		fb := newFake(t)
		fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
			chat.Whole(emit, "m1", chat.TypeText, "partial", nil)
			if tc.fail {
				return nil, &chat.Error{Code: chat.ErrUpstream, Message: "the model stopped answering"}
			}
			return &pipeline.Response{FinishReason: tc.finish}, nil
		}
		ts := startServer(t, fb, nil)
		_, out := do(t, ts, "POST", "/v1/responses", tokenAlice, `{"model":"qa","input":"x","stream":true}`)
		wantEnd := "event: response." + tc.status + "\n"
		if !strings.Contains(out, wantEnd) || (tc.reason != "" && !strings.Contains(out, `"incomplete_details":{"reason":"`+tc.reason+`"}`)) {
			t.Errorf("%s: stream lacks %q with %s:\n%s", tc.status, wantEnd, tc.reason, out)
		}
		if tc.fail {
			if !strings.Contains(out, "event: error\ndata: {\"code\":\"upstream\",\"message\":\"the model stopped answering\",\"param\":null,") ||
				!strings.Contains(out, `"error":{"code":"upstream","message":"the model stopped answering"}`) {
				t.Errorf("failed stream:\n%s", out)
			}
			resp, body := do(t, ts, "POST", "/v1/responses", tokenAlice, `{"model":"qa","input":"x"}`)
			if resp.StatusCode != 502 || apiErrFull(t, body).Code != "upstream" {
				t.Errorf("failed whole: %d %s", resp.StatusCode, body)
			}
			continue
		}
		resp, body := do(t, ts, "POST", "/v1/responses", tokenAlice, `{"model":"qa","input":"x"}`)
		if r := decodeResponse(t, body); resp.StatusCode != 200 || r["status"] != tc.status {
			t.Errorf("%s whole: %d %s", tc.status, resp.StatusCode, body)
		}
	}
}

// TestResponsesPolicyParam: a refused model option is named by the
// Responses API field it came from.
func TestResponsesPolicyParam(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		fe := &chat.FieldError{Path: "max_completion_tokens", Problem: "5000 is over the token limit"}
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
	}
	ts := startServer(t, fb, nil)
	for _, stream := range []string{"false", "true"} {
		resp, out := do(t, ts, "POST", "/v1/responses", tokenAlice, `{"model":"qa","input":"x","max_output_tokens":5000,"stream":`+stream+`}`)
		if e := apiErrFull(t, out); resp.StatusCode != 400 || *e.Param != "max_output_tokens" || e.Message != "max_output_tokens: 5000 is over the token limit" {
			t.Errorf("stream %s: %d %s", stream, resp.StatusCode, out)
		}
	}
}

// regexpIDs matches response and item ids, which differ between runs.
var regexpIDs = regexp.MustCompile(`(resp|msg|rs|fc|mcp)_[0-9a-f]{24}(_[0-9]+)?`)
