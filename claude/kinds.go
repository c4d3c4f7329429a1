package claude

// messageKind is one kind of line Claude Code prints with --output-format
// stream-json: a member of the SDKMessage union of the Agent SDK's
// sdk.d.ts, told apart by type and subtype, and what the parser makes of
// it. The package documentation shows this table; a test checks it
// against the installed SDK's declarations (every kind there must be
// here) and against the parser (every kind here is handled as written).
type messageKind struct {
	// Type and Subtype tell the kind; Subtype lists the subtypes it may
	// have, comma-separated.
	Type, Subtype string
	// SDK is the TypeScript type in sdk.d.ts.
	SDK string
	// Event is the chat event the kind becomes ("" when it is dropped).
	Event string
	// Why says what of the kind becomes the event, or why it is dropped.
	Why string
}

// messageKinds are the kinds of the SDKMessage union of
// @anthropic-ai/claude-agent-sdk 0.3.330 (Claude Code 2.1.330), which
// include those 2.1.197 prints.
var messageKinds = []messageKind{
	{"assistant", "", "SDKAssistantMessage", "text, thinking, tool_call, error",
		"blocks not streamed before are shown whole; a subagent's text is thinking; an API error message (is_api_error_message, or an error from the <synthetic> model) is the turn's error, never answer text"},
	{"user", "", "SDKUserMessage", "tool_result",
		"tool results; other content (the prompt, a subagent's prompt, a task notification) was not written by the agent for the client: dropped"},
	{"user", "", "SDKUserMessageReplay", "",
		"printed by a kept CLI (--replay-user-messages) as it takes a message: its uuid tells that a message sent into the running turn was taken; dropped"},
	{"result", "success", "SDKResultSuccess", "text, error, notice",
		"usage, cost and turns of the done event (summed over the run's results); its text is the answer when nothing streamed; is_error (a model API failure) makes it the error event, or a notice for a follow-up turn after the answer"},
	{"result", "error_during_execution, error_max_turns, error_max_budget_usd, error_max_structured_output_retries", "SDKResultError", "error",
		"the error event (max_turns for error_max_turns); usage as for success"},
	{"system", "init", "SDKSystemMessage", "session, notice",
		"the first of a run is the session event (later ones start a follow-up turn and are not repeated); an MCP server not connected or a skill missing is a notice"},
	{"stream_event", "", "SDKPartialAssistantMessage", "text, thinking, tool_call",
		"start, delta and end as the model streams; text of a stream cut short is taken back with a replace"},
	{"system", "compact_boundary", "SDKCompactBoundaryMessage", "notice", "compacted: the conversation was summarized"},
	{"system", "status", "SDKStatusMessage", "loading, notice",
		"compacting is a loading message; a failed compaction a notice; requesting is dropped (the request's stream shows it)"},
	{"system", "api_retry", "SDKAPIRetryMessage", "loading, error",
		"a loading message; a retry the turn will not wait for stops the CLI with the model's error"},
	{"system", "control_request_progress", "SDKControlRequestProgressMessage", "",
		"answers control requests (an interrupt; the control_response line itself is read for a refusal)"},
	{"system", "model_refusal_fallback", "SDKModelRefusalFallbackMessage", "notice", "model_refusal"},
	{"system", "model_refusal_no_fallback", "SDKModelRefusalNoFallbackMessage", "notice", "model_refusal"},
	{"system", "local_command_output", "SDKLocalCommandOutputMessage", "text",
		"the answer to a slash command the user's message held"},
	{"system", "hook_started", "SDKHookStartedMessage", "",
		"hooks come only from settings, which are not loaded (only the assistant configures the CLI)"},
	{"system", "hook_progress", "SDKHookProgressMessage", "", "as hook_started"},
	{"system", "hook_response", "SDKHookResponseMessage", "notice", "hook_failed when a hook failed; else as hook_started"},
	{"system", "plugin_install", "SDKPluginInstallMessage", "notice", "plugin_install_failed when it failed; else dropped (no plugins are configured)"},
	{"tool_progress", "", "SDKToolProgressMessage", "loading",
		"one loading message per running tool with its elapsed time, ended by the tool's result"},
	{"auth_status", "", "SDKAuthStatusMessage", "notice", "auth when it reports an error; else dropped"},
	{"system", "task_notification", "SDKTaskNotificationMessage", "loading, notice",
		"ends the task's loading message; a failed or stopped task is a notice"},
	{"system", "task_started", "SDKTaskStartedMessage", "loading",
		"one loading message per task (subagent, background command); the turn waits for the task"},
	{"system", "task_updated", "SDKTaskUpdatedMessage", "loading, notice",
		"a final status ends the task like its notification; others are dropped"},
	{"system", "task_progress", "SDKTaskProgressMessage", "loading", "replaces the task's loading message"},
	{"system", "background_tasks_changed", "SDKBackgroundTasksChangedMessage", "",
		"task_started and task_notification report the same tasks"},
	{"system", "thinking_tokens", "SDKThinkingTokensMessage", "", "estimates; the thinking itself streams as thinking"},
	{"system", "session_state_changed", "SDKSessionStateChangedMessage", "notice",
		"requires_action (input nobody can give in a sandbox) is a notice; idle and running are dropped (the process is the run)"},
	{"system", "worker_shutting_down", "SDKWorkerShuttingDownMessage", "notice", "cli_shutting_down"},
	{"system", "commands_changed", "SDKCommandsChangedMessage", "", "slash commands are not offered to clients"},
	{"system", "notification", "SDKNotificationMessage", "notice", "cli_notification"},
	{"system", "files_persisted", "SDKFilesPersistedEvent", "", "the Files API is not used"},
	{"tool_use_summary", "", "SDKToolUseSummaryMessage", "", "the tool_call and tool_result events carry it"},
	{"system", "memory_recall", "SDKMemoryRecallMessage", "", "auto memory is off"},
	{"rate_limit_event", "", "SDKRateLimitEvent", "notice", "rate_limit unless the status is allowed"},
	{"system", "elicitation_complete", "SDKElicitationCompleteMessage", "", "MCP elicitation needs a person; none is there"},
	{"system", "permission_denied", "SDKPermissionDeniedMessage", "notice", "permission_denied"},
	{"prompt_suggestion", "", "SDKPromptSuggestionMessage", "", "printed only with prompt suggestions on, which they are not"},
	{"system", "mirror_error", "SDKMirrorErrorMessage", "", "session mirroring is not used"},
	{"system", "informational", "SDKInformationalMessage", "notice", "cli_warning at levels warning and notice; info and suggestion are dropped"},
	{"conversation_reset", "", "SDKConversationResetMessage", "notice", "conversation_reset"},
	{"system", "session_writes_lost", "SDKSessionWritesLostMessage", "notice",
		"session_not_saved: the next turn may not resume this one"},
}
