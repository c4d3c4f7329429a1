package openaiclient

import "testing"

// TestAISDK drives the AI SDK: the default OpenAI provider (the Responses
// API) and the openai-compatible provider (Chat Completions), each whole
// and streamed, with a tool loop the SDK runs, multi-turn, finish reasons,
// errors and a sandboxed agent.
func TestAISDK(t *testing.T) {
	a := start(t)
	var got report
	runNode(t, "aisdk.mjs", a.env(), &got)
	t.Logf("ai %v", got["versions"])
	const paris, weather, agentText = "Paris is the capital of France.", "It is 18C and sunny in Paris.", "I will look.\n\nDone: the sandbox says hello."
	for _, p := range []string{"responses", "compatible"} {
		param := map[string]string{"responses": "max_output_tokens", "compatible": "max_tokens"}[p]
		got.expect(t, map[string]any{
			p + ".generate":   map[string]any{"text": paris, "reasoning": "The user asks about France.", "finishReason": "stop", "outputTokens": 14, "steps": 1, "calls": []any{}},
			p + ".stream":     map[string]any{"streamed": paris, "text": paris, "reasoning": "The user asks about France.", "finishReason": "stop"},
			p + ".tools.text": weather, p + ".tools.steps": 2, p + ".tools.finishReason": "stop",
			p + ".tools.calls":             []any{map[string]any{"name": "get_weather", "input": map[string]any{"city": "Paris"}, "providerExecuted": false}},
			p + ".streamTools":             map[string]any{"text": weather, "steps": 2, "finishReason": "stop"},
			p + ".multiTurn":               []string{"Nice to meet you, Ada.", "Your name is Ada."},
			p + ".length":                  "length",
			p + ".unknown.status":          404,
			p + ".unknown.isAPICallError":  true,
			p + ".policy.status":           400,
			p + ".policy.data.error.param": param,
			p + ".agent.text":              agentText,
			p + ".agent.finishReason":      "stop",
		})
		got.contains(t, p+".policy.message", "requests may lower it, not raise it")
	}
	// The Responses API shows the agent's own tool as a call the provider
	// ran (the SDK's mcp tool), with its output; Chat Completions has no
	// place for it.
	got.expect(t, map[string]any{
		"responses.agent.calls":                        []any{map[string]any{"name": "mcp.Bash", "input": map[string]any{"command": "echo hello from the sandbox", "description": "Say hello"}, "providerExecuted": true}},
		"responses.agent.results.0.output.output":      "hello from the sandbox",
		"responses.agent.results.0.output.serverLabel": "coder",
		"compatible.agent.calls":                       []any{},
	})
	a.history(t, "What is my name?", "My name is Ada.", "Nice to meet you, Ada.")
	a.toolResult(t, "What is the weather in Paris?", "get_weather", "18C and sunny in Paris")
	a.toolResult(t, "Stream me the weather in Paris", "get_weather", "18C and sunny in Paris")
}
