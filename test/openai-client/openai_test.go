package openaiclient

import (
	"encoding/json"
	"testing"
)

// TestOpenAI drives the official openai package: models, Chat Completions
// (whole, streamed, the stream helper, function-calling loops on the
// OpenAI and the Anthropic connector, runTools, multi-turn, finish
// reasons, errors), the Responses API (whole, streamed, a function-calling
// loop continued with previous_response_id, conversations, store: false)
// and a sandboxed agent's own tools.
func TestOpenAI(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	a := start(t)
	var got report
	runNode(t, "openai.mjs", a.env(), &got)
	t.Logf("openai %v", got["version"])
	const paris, weather, agentText = "Paris is the capital of France.", "It is 18C and sunny in Paris.", "I will look.\n\nDone: the sandbox says hello."
	got.expect(t, map[string]any{
		"models":               []string{"claude-qa", "coder", "picky", "qa"},
		"model.id":             "qa",
		"model.object":         "model",
		"modelNotFound.status": 404, "modelNotFound.type": "not_found_error",

		"chat.content": paris, "chat.reasoning": "The user asks about France.", "chat.finish": "stop",
		"chatStream.chatID": "sdk-chat-1", "chatStream.content": paris, "chatStream.reasoning": "The user asks about France.",
		"chatStream.finish": []string{"stop"}, "chatHelper.content": paris, "chatHelper.finish": "stop",

		"toolLoop_qa.finish": "tool_calls", "toolLoop_qa.calls": []any{map[string]any{"type": "function", "name": "get_weather", "arguments": map[string]any{"city": "Paris"}}},
		"toolLoop_qa.answer": weather, "toolLoop_qa.finish2": "stop",
		"toolLoop_claude-qa.finish": "tool_calls", "toolLoop_claude-qa.calls.0.name": "get_weather", "toolLoop_claude-qa.answer": weather,
		"runTools.answer": weather, "runTools.calls": 2,
		"multiTurn":        []string{"Nice to meet you, Ada.", "Your name is Ada."},
		"length":           map[string]any{"finish": "length", "content": "This answer is cut"},
		"midStream.thrown": true, "midStream.isAPIError": true, "midStream.code": "upstream", "midStream.type": "server_error",

		"modelOverride.status": 400, "modelOverride.param": "max_tokens", "modelOverride.code": "invalid_request",
		"pickyEffort.status": 400, "pickyEffort.param": "reasoning_effort",
		"pickyTokens.status": 400, "pickyTokens.param": "max_tokens",
		"unknownField.status": 400, "unknownField.param": "temprature",
		"sandboxTools.status": 400, "sandboxTools.param": "tools",
		"unknownAssistant.status": 404,
		"unauthorized":            map[string]any{"status": 401, "name": "AuthenticationError"},

		"response.status": "completed", "response.text": paris, "response.types": []string{"reasoning", "message"},
		"response.usage.output_tokens": 14,
		"responseStream.text":          paris, "responseStream.reasoning": "The user asks about France.",
		"responseStream.final": map[string]any{"status": "completed", "text": paris},
		"responseTools.call":   map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Paris"}, "status": "completed"},
		"responseTools.answer": weather, "responseTools.sameChat": true,
		"conversation":           []any{"Nice to meet you, Ada.", "Your name is Ada.", map[string]any{"id": "sdk-conv-1"}},
		"retrieved":              "Your name is Ada.",
		"branch":                 map[string]any{"text": "Your name is Ada.", "previous": true, "forked": true},
		"unstored.status":        404,
		"responseRefused.status": 400, "responseRefused.param": "background",
		"responseIncomplete": map[string]any{"status": "incomplete", "details": map[string]any{"reason": "max_output_tokens"}},

		"agent.text": agentText,
		"agent.items": []any{map[string]any{"type": "message"},
			map[string]any{"type": "mcp_call", "name": "Bash", "arguments": map[string]any{"command": "echo hello from the sandbox", "description": "Say hello"},
				"output": "hello from the sandbox", "status": "completed", "server_label": "coder"},
			map[string]any{"type": "message"}},
		"agentChatStream": agentText,
	})
	got.expect(t, map[string]any{"structured": []string{"stop", "stop"}, "jsonMode.status": 400, "jsonMode.param": "response_format"})
	got.contains(t, "jsonMode.message", "no JSON mode")
	if n := len(a.requestWith("as JSON, from")); n != 2 {
		t.Errorf("%d structured-output requests reached the model, want 2", n)
	}
	for _, r := range a.requestWith("as JSON, from") {
		var b struct {
			ResponseFormat json.RawMessage `json:"response_format"`
			OutputConfig   json.RawMessage `json:"output_config"`
		}
		_ = json.Unmarshal(r.Body, &b)
		want := map[string]string{"openai": `{"type":"json_schema","json_schema":{"name":"city","schema":` + schema + `,"strict":true}}`,
			"anthropic": `{"format":{"schema":` + schema + `,"type":"json_schema"}}`}[r.API]
		if got := map[string]string{"openai": string(b.ResponseFormat), "anthropic": string(b.OutputConfig)}[r.API]; got != want {
			t.Errorf("%s request: %s, want %s", r.API, got, want)
		}
	}
	got.contains(t, "sandboxTools.message", "runs a coding agent in a sandbox", "a client's functions cannot be offered")
	got.contains(t, "modelOverride.message", "requests may lower it, not raise it")
	if n, chunks := got.get("chatStream.usageNullChunks"), got.get("chatStream.chunks"); n.(float64) != chunks.(float64)-1 {
		t.Errorf("%v of %v chunks have usage null, want all but the last", n, chunks)
	}
	for _, ev := range []string{"response.created", "response.in_progress", "response.output_item.added", "response.reasoning_summary_text.delta",
		"response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.output_item.done", "response.completed"} {
		found := false
		for _, e := range got.get("responseStream.events").([]any) {
			found = found || e == ev
		}
		if !found {
			t.Errorf("the stream had no %s event", ev)
		}
	}
	// What the model was sent: the conversations, tool results included.
	a.history(t, "What is my name?", "My name is Ada", "Nice to meet you, Ada.")
	a.toolResult(t, "What is the weather in Paris, response?", "get_weather", "18C and sunny in Paris")
	a.toolResult(t, "What is the weather in Paris?", "get_weather", "18C and sunny in Paris")
	for _, r := range a.llm.TurnRequests() {
		if r.API == "anthropic" && r.Model() != "claude-sonnet-4-5" {
			t.Errorf("a model request used %q: the assistant's model must hold", r.Model())
		}
	}
}
