package pipeline

import (
	"cmp"
	"context"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
)

// next is the phase of the Next hook, when the assistant has one. It sees
// the conversation, the turn's answer as a completion (and the error that
// cut it short, execErr) and the tools the agent ran, and may answer with
// {data}: a string replaces the answer's text, or delegate to another
// assistant, whose answer replaces the turn's (also one that failed: a
// fallback). A Next hook that fails is a notice, not the turn's failure.
// It returns the turn's error after it: execErr, nil when a delegate
// answered, or the delegate's failure.
func (t *turn) next(ctx context.Context, execErr error) error {
	if t.hooks == nil || !t.hooks.Has("Next") {
		return execErr
	}
	x := t.answer
	start := time.Now()
	defer t.phase(phaseHookNext, start)
	completion := jsapi.Completion{ID: x.SessionID, Created: x.Started.Unix(), Model: cmp.Or(x.Model, t.model),
		Content: x.Content, ReasoningContent: x.Thinking, FinishReason: x.FinishReason, Usage: t.usage}
	calls := x.ToolCalls
	if x.Asked != nil {
		// The tool loop's one round for Next: the model's calls, the
		// server's tools' too, as Yao gives them.
		calls = x.Asked
		if len(calls) > 0 {
			completion.FinishReason = chat.FinishToolCalls
		}
	}
	for _, tc := range calls {
		completion.ToolCalls = append(completion.ToolCalls, jsapi.CompletionToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments()})
	}
	payload := jsapi.NextPayload{Messages: t.conv.all(), Completion: completion, Tools: x.Ran}
	if execErr != nil {
		payload.Error = execErr.Error()
	}
	res, err := t.hooks.Next(ctx, t.hc, payload, t.opts)
	switch {
	case err != nil:
		t.p.log.Warn("Next hook failed", "assistant", t.asst.ID, "user", t.req.UserID, "chat", t.req.ChatID, "error", err, "stack", jsapi.Stack(err))
		chat.Notice(t.emit, t.nextID("notice"), "next_hook_failed", "Next hook failed: "+err.Error())
	case res != nil:
		if len(res.Metadata) > 0 {
			t.p.log.Info("Next hook metadata", "assistant", t.asst.ID, "user", t.req.UserID, "chat", t.req.ChatID, "metadata", res.Metadata)
		}
		if res.HasData {
			t.data = res.Data
			if s, ok := res.Data.(string); ok {
				t.answer.Content = s
			}
		}
		if res.Delegate != nil {
			return t.delegate(ctx, res.Delegate, *t.conv)
		}
	}
	return execErr
}
