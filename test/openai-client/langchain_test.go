package openaiclient

import "testing"

// TestLangChain drives LangChain's ChatOpenAI over Chat Completions and
// over the Responses API (useResponsesApi): whole and streamed, a
// function-calling loop with bindTools on both connectors, multi-turn,
// errors and a sandboxed agent.
func TestLangChain(t *testing.T) {
	a := start(t)
	var got report
	runNode(t, "langchain.mjs", a.env(), &got)
	t.Logf("@langchain %v", got["versions"])
	const paris, weather, agentText = "Paris is the capital of France.", "It is 18C and sunny in Paris.", "I will look.\n\nDone: the sandbox says hello."
	for _, p := range []string{"chat", "responses"} {
		want := map[string]any{
			p + ".invoke.text": paris, p + ".invoke.outputTokens": 14,
			p + ".stream":         map[string]any{"text": paris, "outputTokens": 14},
			p + ".multiTurn":      []string{"Nice to meet you, Ada.", "Your name is Ada."},
			p + ".unknown.status": 404, p + ".unknown.code": "not_found",
			p + ".policy.status": 400, p + ".policy.code": "invalid_request",
			p + ".agent.text": agentText, p + ".agent.toolCalls": 0,
		}
		for _, id := range []string{"qa", "claude-qa"} {
			want[p+".tools_"+id] = map[string]any{"calls": []any{map[string]any{"name": "get_weather", "args": map[string]any{"city": "Paris"}}}, "answer": weather, "toolMessage": true}
		}
		got.expect(t, want)
	}
	got.expect(t, map[string]any{
		"chat.invoke.finish":          "stop",
		"responses.invoke.finish":     "completed",
		"responses.agent.toolOutputs": []any{map[string]any{"type": "mcp_call", "name": "Bash", "output": "hello from the sandbox"}},
		"chat.agent.toolOutputs":      []any{},
	})
	got.contains(t, "chat.policy.message", "max_tokens: 5000 is over the token limit")
	got.contains(t, "responses.policy.message", "max_output_tokens: 5000 is over the token limit")
	a.history(t, "What is my name?", "My name is Ada.", "Nice to meet you, Ada.")
	a.toolResult(t, "What is the weather in Paris?", "get_weather", "18C and sunny in Paris")
}
