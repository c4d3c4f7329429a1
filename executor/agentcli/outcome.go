package agentcli

import (
	"log/slog"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// Outcome is what a CLI's output stream amounts to, in the terms every
// CLI shares. A parser's own outcome embeds it (with LineStats and what
// only its CLI reports), so their JSON has these members first, and
// satisfies Finished through it.
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
	// Timings are when the CLI's init line, the model's first event and
	// the answer's first text came, for a parser that tells (Started is
	// the run's).
	Timings executor.Timings `json:"-"`
}

// Common implements Finished.
func (o *Outcome) Common() *Outcome { return o }

// NoResult implements Finished for a CLI whose stderr says why it ended
// without a result (Classify), if anything.
func (o *Outcome) NoResult(tail string) (code, note string) {
	if tail == "" {
		return chat.ErrExecutor, ""
	}
	return Classify(tail), ""
}

// LogValue is what the driver logs of a turn's outcome (never its
// content).
func (o *Outcome) LogValue() slog.Value { return o.LogGroup() }

// LogGroup is LogValue with more attributes, for an outcome that embeds
// Outcome and logs what only it has.
func (o *Outcome) LogGroup(more ...slog.Attr) slog.Value {
	return slog.GroupValue(append([]slog.Attr{slog.Bool("result", o.GotResult), slog.String("subtype", o.Subtype),
		slog.Int("turns", o.Usage.Turns), slog.Float64("cost_usd", o.Usage.CostUSD), slog.Int("tool_calls", len(o.ToolCalls))},
		more...)...)
}

// Result is the run's executor.Result: sessionID stands in for a session
// id the CLI did not report, and the time since began for a duration it
// did not.
func (o *Outcome) Result(sessionID string, began time.Time) *executor.Result {
	res := &executor.Result{
		Content:   o.Content,
		SessionID: o.SessionID,
		Usage:     o.Usage,
		ToolCalls: o.ToolCalls,
		Notices:   o.Notices,
		Timings:   o.Timings,
	}
	if res.SessionID == "" {
		res.SessionID = sessionID
	}
	if res.Usage.DurationMS == 0 {
		res.Usage.DurationMS = time.Since(began).Milliseconds()
	}
	return res
}
