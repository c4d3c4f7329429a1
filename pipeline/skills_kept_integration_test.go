package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/store"
)

// TestKeptChatProposesSkillsInDocker: in a kept chat the bridge the first
// turn started serves the later turns, and so does its propose_skill
// tool: a skill the agent proposes on the kept CLI is the later turn's
// (its skill_proposed event goes to that turn's client), not the first's.
func TestKeptChatProposesSkillsInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st := skillDB(t)
	propose := func(name string) scripted.Turn {
		return scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "mcp__agentbox__propose_skill", Input: map[string]any{
			"name": name, "description": "Notes on " + name + ". Use when asked about " + name + ".", "instructions": "# " + name + "\n\nWrite it down.\n"}}}}
	}
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		propose("alpha-notes"), {Text: "Proposed alpha."},
		propose("beta-notes"), {Text: "Proposed beta."},
		{Text: "Three."},
	}, func(c *Config) { c.Skills = st })
	e.coder.SkillAuthoring = &assistant.SkillAuthoring{TestMaxTurns: 2, TestTimeout: 30 * time.Second}

	for i, want := range []struct{ skill, sandbox string }{{"alpha-notes", chat.SandboxCold}, {"beta-notes", chat.SandboxWarm}} {
		var rec chattest.Recorder
		if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("turn " + want.skill)}, rec.Emit); err != nil {
			t.Fatalf("turn %d: %v (events %+v)", i+1, err, rec.Events())
		}
		if tm := rec.Last().Final.Timings; tm == nil || tm.Sandbox != want.sandbox {
			t.Fatalf("turn %d ran on %+v, want a %s sandbox", i+1, tm, want.sandbox)
		}
		ev := rec.Starts(chat.TypeSkillProposed)
		if len(ev) != 1 || ev[0].Props["name"] != want.skill {
			t.Fatalf("turn %d: skill_proposed events %+v, want one for %s", i+1, ev, want.skill)
		}
	}
	list, err := e.p.SkillProposals(ctx, "alice", ProposalFilter{})
	if err != nil || len(list) != 2 {
		t.Fatalf("proposals %d, %v", len(list), err)
	}
	var alpha string
	for _, sp := range list {
		if sp.Status != store.ProposalPending || sp.ChatID != "c1" {
			t.Errorf("proposal %s: status %s, chat %q", sp.Name, sp.Status, sp.ChatID)
		}
		if sp.Name == "alpha-notes" {
			alpha = sp.ID
		}
	}

	// Approved, alpha joins the kept chat's next turn: its CLI is started
	// anew with it (the session resumed); beta, still pending, does not.
	if _, err := e.p.ApproveSkill(ctx, "alice", alpha); err != nil {
		t.Fatal(err)
	}
	var rec chattest.Recorder
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("third")}, rec.Emit); err != nil {
		t.Fatalf("turn 3: %v", err)
	}
	sess := rec.Starts(chat.TypeSession)
	if len(sess) != 1 {
		t.Fatalf("turn 3: %d session events, want the restarted CLI's", len(sess))
	}
	names, _ := sess[0].Props["skills"].([]string)
	if !slices.Contains(names, "alpha-notes") || slices.Contains(names, "beta-notes") {
		t.Errorf("turn 3's CLI has skills %v: want alpha-notes, not beta-notes", names)
	}
}

// TestSkillTestRunsHooksInDocker: a skill's test turn is the turn the skill
// will run in once approved, with the real CLI in Docker: the Create hook
// shapes the message the model gets (and sees ctx.metadata.skill_test),
// the agent calls the assistant's host tool, and the Next hook shapes the
// answer the test records.
func TestSkillTestRunsHooksInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st := skillDB(t)
	e := newKeptEnv(t, ctx, 0, []scripted.Turn{
		{When: &scripted.Match{Contains: "HOOKED(test of release-notes) try the skill"}, ToolCalls: []scripted.ToolCall{{Name: "mcp__agentbox__lookup", Input: map[string]any{"id": "A-7"}}}},
		{When: &scripted.Match{AfterToolResult: "mcp__agentbox__lookup"}, Text: "Done."},
	}, func(c *Config) { c.Skills = st })
	hooks := `
function Create(ctx, messages) {
  const test = ctx.metadata && ctx.metadata.skill_test;
  const last = messages[messages.length - 1];
  const tag = test ? "test of " + test.skill : "chat";
  return { messages: [...messages.slice(0, -1), { role: "user", content: "HOOKED(" + tag + ") " + last.content }] };
}
function Next(ctx, payload) { return { data: payload.completion.content + " [next]" }; }
function lookup(ctx, args) { return { status: "shipped-" + args.id }; }
`
	if err := os.WriteFile(e.coder.Hooks, []byte(hooks), 0o644); err != nil {
		t.Fatal(err)
	}
	e.coder.Tools = []assistant.Tool{{Name: "lookup", Function: "lookup", Description: "Look up an order.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}}
	e.coder.SkillAuthoring = &assistant.SkillAuthoring{TestMaxTurns: 3, TestTimeout: time.Minute}

	tt := &turn{p: e.p, req: &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder"}, emit: func(chat.Event) {}}
	if _, err := tt.proposeSkill(ctx, e.coder, draft("release-notes")); err != nil {
		t.Fatal(err)
	}
	id := tt.proposed[0].id
	if _, err := e.p.TestSkill(ctx, "alice", id, "try the skill"); err != nil {
		t.Fatal(err)
	}
	var sp *SkillProposal
	for {
		var err error
		if sp, err = e.p.SkillProposal(ctx, "alice", id); err != nil {
			t.Fatal(err)
		}
		if sp.Test.Status != store.TestRunning {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the test turn did not end")
		}
		time.Sleep(100 * time.Millisecond)
	}
	tst := sp.Test
	if tst.Status != store.TestCompleted || tst.Answer != "Done. [next]" {
		t.Fatalf("test outcome: %s, answer %q, error %+v: want the Next hook's answer", tst.Status, tst.Answer, tst.Error)
	}
	if len(tst.ToolCalls) != 1 || tst.ToolCalls[0].Name != "mcp__agentbox__lookup" || tst.ToolCalls[0].IsError {
		t.Errorf("tool calls %+v: want the host tool, answered", tst.ToolCalls)
	}
	if last := lastRequest(e.srv); !strings.Contains(last, "shipped-A-7") {
		t.Errorf("the model did not get the host tool's result: %.300s", last)
	}
}
