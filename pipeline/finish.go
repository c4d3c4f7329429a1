package pipeline

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/chat"
)

// finish emits the error (when not yet emitted) and the done event; the
// returned record, called after the turn's teardown, records usage, the
// audit line and the trace (with the sandbox's removal). It runs on every
// path out of Chat.
func (t *turn) finish(ctx context.Context, resp *Response, err error) (record func()) {
	for _, c := range t.closers {
		c()
	}
	t.closeHookMCP()
	if t.bridge != nil && t.kept == nil {
		// Its tunnels end before the egress is counted (the sandbox goes
		// after the done event).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		if cerr := t.bridge.Close(cctx); cerr != nil {
			t.p.log.Error("bridge not closed", "user", t.req.UserID, "chat", t.req.ChatID, "error", cerr)
		}
		cancel()
	}
	// The hooks' own model calls count in the turn's usage.
	t.usage.Add(t.takeHookUsage())
	end := time.Now()
	t.usage.DurationMS = end.Sub(t.start).Milliseconds()
	if t.scripted {
		// A scripted model's token counts are made up, and a CLI prices
		// them as the model it names: nothing was spent.
		t.usage.CostUSD = 0
	}
	if t.bridge != nil {
		// Counted on the host, once the sandbox and its tunnels are gone.
		t.usage.Egress = chat.MergeHostUsage(t.usage.Egress, subHostUsage(t.bridge.EgressUsage(), t.egressBase))
	}
	final := &chat.Final{Usage: t.usage, SessionID: t.answer.SessionID, Content: t.answer.Content, Data: t.data, Notices: t.answer.Notices,
		Timings: t.tm.report(t.start, end)}
	if err == nil {
		final.FinishReason = t.answer.FinishReason
	}
	if resp != nil {
		// What was measured last (duration, egress, the hooks' model
		// calls) is in the response's usage too.
		resp.Usage = t.usage
	}
	code := ""
	if err != nil {
		ce := chat.AsError(err)
		code = ce.Code
		final.Error = code
		if !t.errEmitted.Load() {
			chat.ErrorEvent(t.emit, t.nextID("error"), ce.Code, ce.Message)
		}
		if code == chat.ErrInternal {
			t.p.log.Error("turn failed", "user", t.req.UserID, "chat", t.req.ChatID, "assistant", t.req.AssistantID, "error", err)
		}
	}
	t.emit(chat.Event{Event: chat.Done, Final: final})
	t.answered.Store(true)
	return func() { t.record(ctx, final, code, err) }
}

// record records a finished turn: metrics, usage, the log line and the
// trace, with the phases after the done event (the sandbox's removal).
func (t *turn) record(ctx context.Context, final *chat.Final, code string, err error) {
	// The done event's timings, with the removal that came after it.
	tm := *final.Timings
	if iv, ok := t.tm.phases[phaseSandboxRemove]; ok {
		tm.SandboxRemoveMS = chat.MS(iv.dur())
	}
	// Labels name only the app's assistants: an id a client made up (a
	// turn refused before its assistant was found) is "".
	asstID := ""
	if t.asst != nil {
		asstID = t.asst.ID
	}
	t.p.metrics.finished(asstID, t.connID, t.usage, err, time.Since(t.start))

	rec := UsageRecord{Time: t.start, UserID: t.req.UserID, ChatID: t.req.ChatID, AssistantID: t.req.AssistantID,
		Connector: t.connID, Model: t.model, Usage: t.usage, Error: code, DurationMS: t.usage.DurationMS}
	if t.p.cfg.Usage != nil && !t.refused {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if uerr := t.p.cfg.Usage.RecordUsage(rctx, rec); uerr != nil {
			t.p.log.Error("usage not recorded", "error", uerr)
		}
		cancel()
	}
	t.p.log.Info("turn",
		"user", rec.UserID, "chat", rec.ChatID, "assistant", rec.AssistantID, "connector", rec.Connector,
		"model", rec.Model, "input_tokens", t.usage.InputTokens, "output_tokens", t.usage.OutputTokens,
		"cost_usd", t.usage.CostUSD, "turns", t.usage.Turns, "duration_ms", rec.DurationMS, "error", code,
		"sandbox", tm.Sandbox, logAttrs(&tm))
	t.trace(ctx, time.Now(), code)
}
