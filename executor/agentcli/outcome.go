package agentcli

import (
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// Outcome is what a CLI's output stream amounts to, in the terms every
// CLI shares. A parser's own outcome embeds it (with LineStats and what
// only its CLI reports), so their JSON has these members first.
type Outcome struct {
	// SessionID and Model come from the CLI's init event (or its result).
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	// Content is the answer text as streamed to the client (the result's
	// text when nothing was streamed).
	Content string `json:"content"`
	// Usage is the result's usage, cost, turns and duration.
	Usage     chat.Usage          `json:"usage"`
	ToolCalls []executor.ToolCall `json:"tool_calls"`
	// Notices lists the notice codes raised, in order.
	Notices []string `json:"notices"`
	// GotResult reports whether a result line was seen.
	GotResult bool `json:"got_result"`
	// Subtype is the result's subtype ("success", "error_max_turns", ...).
	Subtype string `json:"subtype"`
	// Err is set when the result reported a failure; its error event has
	// already been emitted.
	Err *chat.Error `json:"error,omitempty"`
}

// Result is the run's executor.Result: sessionID stands in for a session
// id the CLI did not report, and the time since started for a duration it
// did not.
func (o *Outcome) Result(sessionID string, started time.Time) *executor.Result {
	res := &executor.Result{
		Content:   o.Content,
		SessionID: o.SessionID,
		Usage:     o.Usage,
		ToolCalls: o.ToolCalls,
		Notices:   o.Notices,
	}
	if res.SessionID == "" {
		res.SessionID = sessionID
	}
	if res.Usage.DurationMS == 0 {
		res.Usage.DurationMS = time.Since(started).Milliseconds()
	}
	return res
}
