package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
)

// TestEveryExecutorIsWatched: an executor that knows nothing of the
// failure patterns still has them raised from its events, at its
// assistant's thresholds, and listed after its own notices in done.
func TestEveryExecutorIsWatched(t *testing.T) {
	e := newEnv(t, nil, "")
	e.app.Assistants["coder"].Failures = assistant.Failures{NoProgress: 2, ToolRejection: assistant.Off}
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		for i, id := range []string{"a", "b", "c"} {
			chat.WholeToolResult(req.Emit, "r"+id, chat.ToolResult{ToolCallID: id, Name: "shell"})
			if i == 0 {
				chat.WholeToolResult(req.Emit, "d"+id, chat.ToolResult{ToolCallID: "d" + id, Name: "edit", Content: "Tool execution denied by policy.", IsError: true})
			}
		}
		return &executor.Result{Content: "answer", Notices: []string{"own_notice"}}, nil
	}
	var rec chattest.Recorder
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("go")}, rec.Emit); err != nil {
		t.Fatal(err)
	}
	var raised []map[string]any
	for _, ev := range rec.Starts(chat.TypeNotice) {
		raised = append(raised, ev.Props)
	}
	if len(raised) != 1 || raised[0]["code"] != executor.NoticeNoProgress || raised[0]["count"] != 2 || raised[0]["suggested_action"] != executor.SuggestNoProgress {
		t.Errorf("notices = %v, want one no_progress after 2 empty results", raised)
	}
	if done := rec.Last(); done.Final == nil || !slices.Equal(done.Final.Notices, []string{"own_notice", executor.NoticeNoProgress}) {
		t.Errorf("done %+v", done.Final)
	}
}
