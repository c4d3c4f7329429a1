// Package scripted is a model server that answers from a script instead
// of a model: a local HTTP server that speaks the Anthropic Messages API,
// OpenAI Chat Completions and Responses and the Gemini API. It is the model
// of the scripted connector (connector.TypeScripted), which lets an app and
// its sandboxed assistants run offline, and the model of the tests, in the
// spirit of net/http/httptest. Point the Claude Code CLI at it with
// ANTHROPIC_BASE_URL=srv.URL, an OpenAI client with base URL srv.URL+"/v1".
//
//	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
//		{ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{
//			"file_path": "/workspace/hello.txt", "content": "hi\n"}}}},
//		{When: &scripted.Match{AfterToolResult: "Write"}, Text: "Done."},
//	}})
//	t.Cleanup(srv.Close)
//
// On the wire the server calls itself Model ("llmtest"): the default model
// name, the ids it makes and its error messages carry it.
//
// Scripts also load from YAML or JSON files (LoadScript), so assistants can
// be tested offline; see testdata/*.yaml for examples.
//
// # Endpoints
//
//   - POST /v1/messages (with or without ?beta=true): streamed as SSE
//     (message_start, ping, content_block_start/delta/stop for thinking,
//     text and tool_use, message_delta with stop_reason and usage,
//     message_stop) or as one JSON message when stream is false. Thinking
//     streams thinking_delta then signature_delta; tool input streams as
//     input_json_delta in several chunks.
//   - POST /v1/messages/count_tokens: an estimate, about four bytes a token.
//   - POST /v1/chat/completions: streamed chunks ending with data: [DONE]
//     (usage chunk when stream_options.include_usage), or one completion.
//     Thinking is sent as reasoning_content, tool calls as tool_calls deltas.
//   - GET /v1/models, and HEAD / (Claude Code's reachability probe).
//
// # Turns
//
// Each request of the agent loop consumes one turn: the first unused turn
// whose When matches the request (a turn without When matches any). Every
// response carries a fresh message id: Claude Code merges assistant blocks
// that share a message id into one message, which would silently break turn
// counting. Tool call ids are generated ("toolu_...") when a script leaves
// them empty. An Error turn is consumed by one request; clients retry
// 429/5xx/529 errors (Claude Code retries with back-off), and the retry
// takes the next turn. When no turn is left the server answers 400
// invalid_request_error "llmtest: script has no more turns", a status the
// SDKs do not retry, so a test fails fast instead of hanging in retries.
//
// # What Claude Code sends (CLI 2.1.197, observed)
//
// Running `claude -p PROMPT --output-format stream-json --verbose` against
// this server, with every request logged:
//
//   - HEAD / first: a connectivity probe (User-Agent Bun/...). Answered 200.
//   - POST /v1/messages?beta=true, stream true, max_tokens 64000, with
//     headers User-Agent "claude-cli/2.1.197 (external, sdk-cli)", X-App
//     "cli", X-Api-Key, Anthropic-Beta and X-Claude-Code-Session-Id. The
//     agent-loop requests carry the full tools list (24 tools), a
//     context_management field and thinking {type: adaptive}. The user
//     prompt is followed by a message with role "system" (the
//     mid-conversation-system beta), so "the last message" is not the
//     user's: Match and LastUserText look at the latest user message.
//   - Session title generation: a concurrent POST /v1/messages, also
//     streamed, with tools [], thinking disabled and output_config.format
//     set to a json_schema {title}. It races with the first agent-loop
//     request and may come first, or not at all when the run is short; it
//     was not seen with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, but
//     tests must not depend on that. It must not take a turn.
//   - After a tool call, the next agent-loop request ends with a user
//     message holding the tool_result (Bash without a git repository, a
//     Write as root) and no side request for Bash command prefixes.
//   - As root, --permission-mode bypassPermissions is refused ("cannot be
//     used with root/sudo privileges"); use --allowedTools instead.
//
// So a request from Claude Code (User-Agent claude-cli/... or X-App cli) is
// a side request, answered harmlessly without consuming a turn, when it
// asks for structured output (output_config.format: answered with
// {"title":"llmtest session"}), when max_tokens is 1 (quota probes of
// interactive sessions), or when it has neither tools nor
// context_management (helper calls such as topic detection). Everything
// else from the CLI, and every request from other clients, consumes a turn.
// Request.Side and Request.Turn record the decision.
package scripted
