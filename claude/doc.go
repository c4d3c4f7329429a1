// Package claude runs chat turns with the Claude Code CLI inside a chat's
// sandbox: it prepares the CLI's configuration from the assistant
// definition, starts `claude -p` with stream-json input and output, and
// maps every line the CLI prints to chat events.
//
// # Supported versions
//
// The executor supports the Claude Code versions pinned in
// scripts/versions.sh: CLAUDE_VERSION (the product's default image) and
// CLAUDE_LATEST_VERSION. Both are installed by `make cli`, imaged by `make
// image` and run by the integration tests; their recorded transcripts and
// golden files are in testdata/claude/VERSION.
//
// # What a turn is
//
// A turn ends when the CLI's work ends: its result printed, and every task
// it started (a subagent, a command run in the background) ended. Its
// input stays open until then (2.1.197 stops its background work when its
// input ends; 2.1.330 runs a follow-up turn when a task ends, and reports
// it with a second init and result). Tasks show as loading messages while
// they run. Work left as the turn's timeout nears is stopped with a
// background_stopped notice; a CLI that does not exit after its work, or
// prints nothing for the idle timeout while no tool runs, is stopped
// (cli_hung notice, or a timeout error before any answer). One session
// event is sent per turn; its usage sums the run's results (turns, tokens
// and cost of this run only: 2.1.330's total_cost_usd covers the whole
// resumed session, its model_usage_since_last_result the run's share).
//
// A model API that fails ends the turn with its error (429 rate_limit, 5xx
// upstream, ...) after at most Options.APIRetries quick retries, and at
// once when it asks to wait longer than Options.MaxRetryWait; text a cut
// stream had shown is taken back (a replace event) and never saved as the
// answer.
//
// # Message kinds
//
// Every kind the CLI prints is either mapped to chat events or dropped by
// a decision written here; the table is kinds.go's, checked against the
// SDKMessage union of the Agent SDK's sdk.d.ts (a kind the SDK adds fails
// the tests) and against the parser:
//
//	| type | subtype | SDK type | chat event | what, or why dropped |
//	|---|---|---|---|---|
//	| assistant |  | SDKAssistantMessage | text, thinking, tool_call, error | blocks not streamed before are shown whole; a subagent's text is thinking; an API error message (is_api_error_message, or an error from the <synthetic> model) is the turn's error, never answer text |
//	| user |  | SDKUserMessage | tool_result | tool results; other content (the prompt, a subagent's prompt, a task notification) was not written by the agent for the client: dropped |
//	| user |  | SDKUserMessageReplay | dropped | printed by a kept CLI (--replay-user-messages) as it takes a message: its uuid tells that a message sent into the running turn was taken; dropped |
//	| result | success | SDKResultSuccess | text, error, notice | usage, cost and turns of the done event (summed over the run's results); its text is the answer when nothing streamed; is_error (a model API failure) makes it the error event, or a notice for a follow-up turn after the answer |
//	| result | error_during_execution, error_max_turns, error_max_budget_usd, error_max_structured_output_retries | SDKResultError | error | the error event (max_turns for error_max_turns); usage as for success |
//	| system | init | SDKSystemMessage | session, notice | the first of a run is the session event (later ones start a follow-up turn and are not repeated); an MCP server not connected or a skill missing is a notice |
//	| stream_event |  | SDKPartialAssistantMessage | text, thinking, tool_call | start, delta and end as the model streams; text of a stream cut short is taken back with a replace |
//	| system | compact_boundary | SDKCompactBoundaryMessage | notice | compacted: the conversation was summarized |
//	| system | status | SDKStatusMessage | loading, notice | compacting is a loading message; a failed compaction a notice; requesting is dropped (the request's stream shows it) |
//	| system | api_retry | SDKAPIRetryMessage | loading, error | a loading message; a retry the turn will not wait for stops the CLI with the model's error |
//	| system | control_request_progress | SDKControlRequestProgressMessage | dropped | answers control requests (an interrupt; the control_response line itself is read for a refusal) |
//	| system | model_refusal_fallback | SDKModelRefusalFallbackMessage | notice | model_refusal |
//	| system | model_refusal_no_fallback | SDKModelRefusalNoFallbackMessage | notice | model_refusal |
//	| system | local_command_output | SDKLocalCommandOutputMessage | text | the answer to a slash command the user's message held |
//	| system | hook_started | SDKHookStartedMessage | dropped | hooks come only from settings, which are not loaded (only the assistant configures the CLI) |
//	| system | hook_progress | SDKHookProgressMessage | dropped | as hook_started |
//	| system | hook_response | SDKHookResponseMessage | notice | hook_failed when a hook failed; else as hook_started |
//	| system | plugin_install | SDKPluginInstallMessage | notice | plugin_install_failed when it failed; else dropped (no plugins are configured) |
//	| tool_progress |  | SDKToolProgressMessage | loading | one loading message per running tool with its elapsed time, ended by the tool's result |
//	| auth_status |  | SDKAuthStatusMessage | notice | auth when it reports an error; else dropped |
//	| system | task_notification | SDKTaskNotificationMessage | loading, notice | ends the task's loading message; a failed or stopped task is a notice |
//	| system | task_started | SDKTaskStartedMessage | loading | one loading message per task (subagent, background command); the turn waits for the task |
//	| system | task_updated | SDKTaskUpdatedMessage | loading, notice | a final status ends the task like its notification; others are dropped |
//	| system | task_progress | SDKTaskProgressMessage | loading | replaces the task's loading message |
//	| system | background_tasks_changed | SDKBackgroundTasksChangedMessage | dropped | task_started and task_notification report the same tasks |
//	| system | thinking_tokens | SDKThinkingTokensMessage | dropped | estimates; the thinking itself streams as thinking |
//	| system | session_state_changed | SDKSessionStateChangedMessage | notice | requires_action (input nobody can give in a sandbox) is a notice; idle and running are dropped (the process is the run) |
//	| system | worker_shutting_down | SDKWorkerShuttingDownMessage | notice | cli_shutting_down |
//	| system | commands_changed | SDKCommandsChangedMessage | dropped | slash commands are not offered to clients |
//	| system | notification | SDKNotificationMessage | notice | cli_notification |
//	| system | files_persisted | SDKFilesPersistedEvent | dropped | the Files API is not used |
//	| tool_use_summary |  | SDKToolUseSummaryMessage | dropped | the tool_call and tool_result events carry it |
//	| system | memory_recall | SDKMemoryRecallMessage | dropped | auto memory is off |
//	| rate_limit_event |  | SDKRateLimitEvent | notice | rate_limit unless the status is allowed |
//	| system | elicitation_complete | SDKElicitationCompleteMessage | dropped | MCP elicitation needs a person; none is there |
//	| system | permission_denied | SDKPermissionDeniedMessage | notice | permission_denied |
//	| prompt_suggestion |  | SDKPromptSuggestionMessage | dropped | printed only with prompt suggestions on, which they are not |
//	| system | mirror_error | SDKMirrorErrorMessage | dropped | session mirroring is not used |
//	| system | informational | SDKInformationalMessage | notice | cli_warning at levels warning and notice; info and suggestion are dropped |
//	| conversation_reset |  | SDKConversationResetMessage | notice | conversation_reset |
//	| system | session_writes_lost | SDKSessionWritesLostMessage | notice | session_not_saved: the next turn may not resume this one |
//
// The parser (Parser) is independent of the executor and works on any
// io.Reader, so recorded transcripts can be replayed through it. It reads
// lines with agentcli.LineReader: a line longer than agentcli.DefaultMaxLine
// is dropped with a notice, and the strings of long tool-result lines are
// kept only to a little more than what an event shows, so memory stays
// flat whatever is printed.
package claude
