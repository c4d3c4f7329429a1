package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/store"
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
		if err := p.Approve(context.Background(), "u", "c1", e.Props["approval_id"].(string), false, a); err != nil {
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

// TestApprovalRememberedWithTheChat: "remember" is kept with the chat in
// the store: the rule is not asked again in that chat, also by a pipeline
// started anew on the store (a server restart), nor in another of the
// user's chats; deleting the chat forgets it.
func TestApprovalRememberedWithTheChat(t *testing.T) {
	t.Parallel()
	var turns []scripted.Turn
	for range 4 {
		turns = append(turns, scripted.Turn{When: &scripted.Match{AfterToolResult: "echo__ping"}, Text: "Done."})
	}
	for range 4 {
		turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "echo__ping", Input: map[string]any{"count": 1}}}})
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, _ := toolAppWith(t, &scripted.Script{Turns: turns}, map[string]string{
		"assistants/calc/package.yao": `{"name": "Calc", "connector": "test", "mcp": {"servers": ["echo"]},
			"approval": {"ask": ["mcp__echo__ping"], "timeout": "5m"}}`,
	}, Config{History: st, Approvals: st})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// turn runs one turn in chatID, answers what it asks with a, and
	// returns how many calls were asked.
	turn := func(p *Pipeline, chatID string, a approval.Answer) int {
		t.Helper()
		n := 0
		emit := func(e chat.Event) {
			if e.Type == TypeApprovalRequested && e.Event == chat.Start {
				n++
				go func() { _ = p.Approve(ctx, "u", chatID, e.Props["approval_id"].(string), false, a) }()
			}
		}
		resp, err := p.Chat(ctx, &Request{UserID: "u", ChatID: chatID, AssistantID: "calc", Messages: user("go")}, emit)
		if err != nil || resp.Content != "Done." {
			t.Fatalf("turn in %s: %v %+v", chatID, err, resp)
		}
		return n
	}
	always := approval.Answer{Decision: approval.Allow, Remember: true}
	if n := turn(p, "c1", always); n != 1 {
		t.Fatalf("first call asked %d times", n)
	}
	if n := turn(p, "c1", always); n != 0 {
		t.Errorf("a remembered rule was asked again")
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := p.cfg
	p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if n := turn(p, "c1", always); n != 0 {
		t.Errorf("after a restart the remembered rule was asked again")
	}
	if ok, err := st.ApprovalRemembered(ctx, "u", "c2", "mcp__echo__ping"); ok || err != nil {
		t.Errorf("remembered in another chat: %v %v", ok, err)
	}
	if err := p.DeleteChat(ctx, "u", "c1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.ApprovalRemembered(ctx, "u", "c1", "mcp__echo__ping"); ok || err != nil {
		t.Errorf("a deleted chat's rule is still remembered: %v %v", ok, err)
	}
}
