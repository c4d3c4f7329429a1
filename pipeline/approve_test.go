package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/scripted"
)

// TestDirectToolApproval: a direct assistant's MCP tool loop keeps the
// policy of package.yao: a deny rule refuses a call at once, an ask rule
// waits for the chat's user, whose denial and reason the model reads, and
// whose allow runs the call.
func TestDirectToolApproval(t *testing.T) {
	t.Parallel()
	p, llm := toolApp(t, &scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{
			{ID: "c1", Name: "echo__ping", Input: map[string]any{"count": 2}},
			{ID: "c2", Name: "tools__add", Input: map[string]any{"a": 2, "b": 3}},
			{ID: "c3", Name: "web__shout", Input: map[string]any{"text": "hi"}},
		}},
		{When: &scripted.Match{AfterToolResult: "echo__ping"}, Text: "Done."},
	}}, map[string]string{
		"assistants/calc/package.yao": `{"name": "Calc", "connector": "test", "mcp": {"servers": ["echo", "tools", "web"]},
			"approval": {"deny": ["mcp__web"], "ask": ["mcp__echo__ping", "mcp__tools__add"], "timeout": "5m"}}`,
	})
	asked := make(chan chat.Event, 2)
	var log eventLog
	emit := func(e chat.Event) {
		log.emit(e)
		if e.Type == TypeApprovalRequested && e.Event == chat.Start {
			asked <- e
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c1", AssistantID: "calc", Messages: user("go")}, emit)
		done <- err
	}()
	for range 2 {
		e := <-asked
		a := approval.Answer{Decision: approval.Allow}
		if e.Props["tool"] == "mcp__tools__add" {
			a = approval.Answer{Decision: approval.Deny, Reason: "no-sums-today-3390"}
		}
		if err := p.Approve("u", "c1", e.Props["approval_id"].(string), false, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	reqs := llm.TurnRequests()
	got := toolMessages(t, reqs[len(reqs)-1])
	if !strings.Contains(got["c1"], "pong") || !strings.Contains(got["c2"], "no-sums-today-3390") || !strings.Contains(got["c3"], "approval policy (rule mcp__web)") {
		t.Errorf("tool messages: %v", got)
	}
	if r := log.whole(TypeApprovalResolved); len(r) != 2 {
		t.Errorf("approval_resolved: %v", r)
	}
}
