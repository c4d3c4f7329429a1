package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/scripted"
)

// TestKeptChatTalkInDocker: on a kept Claude Code CLI, a message sent
// while a tool runs reaches the model's next request and changes its
// answer, shows in the turn's stream and stays in the chat's history where
// it was sent; an interrupt ends the turn with an interrupted notice and
// the next turn runs warm on the same CLI, while a cancel stops the CLI
// and the next turn starts a new one; another user's message and
// interrupt find no chat, and a chat without a running turn takes none.
func TestKeptChatTalkInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	// Generous: it starts three CLIs, slow on a host running the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bash := func(cmd string) []scripted.ToolCall {
		return []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": cmd}}}
	}
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{PromptContains: "build"}, ToolCalls: bash("sleep 10; echo built")},
		{When: &scripted.Match{Sees: "use tabs"}, Text: "Built, with tabs."},
		{When: &scripted.Match{AfterToolResult: "Bash", PromptContains: "build"}, Text: "Built."},
		{When: &scripted.Match{PromptContains: "long"}, ToolCalls: bash("sleep 120; echo done")},
		{When: &scripted.Match{Contains: "after interrupt"}, Text: "Still here."},
		{When: &scripted.Match{PromptContains: "again"}, ToolCalls: bash("sleep 120; echo done")},
		{When: &scripted.Match{Contains: "after cancel"}, Text: "Back."},
	}, nil)
	atTool := func(msg string, act func()) (*Response, *chattest.Recorder, error) { return e.atTool(t, ctx, msg, act) }

	if got, tm := e.turn(t, ctx, "c1", "first"); got != "One." || tm.Sandbox != chat.SandboxCold {
		t.Fatalf("first: %q on %s", got, tm.Sandbox)
	}
	if err := e.p.Say(ctx, "alice", "c1", "nothing runs"); !errors.Is(err, ErrNoTurn) {
		t.Errorf("message without a running turn: %v, want ErrNoTurn", err)
	}

	// A message sent while the tool runs.
	var bobSay, bobInterrupt, sayErr error
	resp, rec, err := atTool("build the thing", func() {
		bobSay = e.p.Say(ctx, "bob", "c1", "stop that")
		bobInterrupt = e.p.Interrupt(ctx, "bob", "c1")
		sayErr = e.p.Say(ctx, "alice", "c1", "use tabs please")
	})
	if err != nil || sayErr != nil {
		t.Fatalf("build: %v (message: %v) %+v", err, sayErr, rec.Events())
	}
	if !errors.Is(bobSay, sandbox.ErrNotFound) || !errors.Is(bobInterrupt, sandbox.ErrNotFound) {
		t.Errorf("another user's message and interrupt: %v, %v; want not found", bobSay, bobInterrupt)
	}
	if tm := rec.Last().Final.Timings; !strings.Contains(resp.Content, "Built, with tabs.") || tm.Sandbox != chat.SandboxWarm {
		t.Errorf("build: %q on %s, want the steered answer on the kept CLI", resp.Content, tm.Sandbox)
	}
	if !slices.ContainsFunc(e.srv.TurnRequests(), func(r scripted.Request) bool { return strings.Contains(r.NewText(), "use tabs please") }) {
		for _, r := range e.srv.TurnRequests() {
			b := string(r.Body)
			if i := strings.Index(b, "use tabs"); i >= 0 {
				t.Logf("request with the message: …%s…", b[max(0, i-800):min(len(b), i+200)])
			}
		}
		t.Error("no model request carried the message sent mid-turn")
	}
	if !slices.ContainsFunc(rec.Events(), func(ev chat.Event) bool { return ev.Type == TypeUserMessage && ev.Text == "use tabs please" }) {
		t.Error("no user_message event in the turn's stream")
	}
	d, err := e.p.GetChat(ctx, "alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	last := d.History[len(d.History)-1]
	if len(last.Said) != 1 || last.Said[0].Content != "use tabs please" || last.Said[0].At > len(last.Content) {
		t.Errorf("history's answer %+v: want the message said into it", last)
	}

	// Interrupt: the turn ends with what it had; the CLI stays.
	resp, rec, err = atTool("a long job", func() {
		if err := e.p.Interrupt(ctx, "alice", "c1"); err != nil {
			t.Errorf("interrupt: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("interrupted turn: %v %+v", err, rec.Events())
	}
	if !slices.ContainsFunc(rec.Events(), func(ev chat.Event) bool { return ev.Type == chat.TypeNotice && ev.Props["code"] == "interrupted" }) {
		t.Errorf("interrupted turn (%q): no interrupted notice in %+v", resp.Content, rec.Events())
	}
	if got, tm := e.turn(t, ctx, "c1", "after interrupt"); got != "Still here." || tm.Sandbox != chat.SandboxWarm {
		t.Errorf("after interrupt: %q on %s, want an answer on the same CLI", got, tm.Sandbox)
	}

	// Cancel: the turn fails canceled; the CLI is stopped.
	_, _, err = atTool("again, long", func() {
		if _, err := e.p.CancelChat(ctx, "alice", "c1"); err != nil {
			t.Errorf("cancel: %v", err)
		}
	})
	if ce := chat.AsError(err); err == nil || ce.Code != chat.ErrCanceled {
		t.Fatalf("canceled turn: %v", err)
	}
	if got, tm := e.turn(t, ctx, "c1", "after cancel"); got != "Back." || tm.Sandbox == chat.SandboxWarm {
		t.Errorf("after cancel: %q on %s, want an answer from a new CLI", got, tm.Sandbox)
	}
	if err := e.p.Interrupt(ctx, "alice", "c1"); !errors.Is(err, ErrNoTurn) {
		t.Errorf("interrupt without a running turn: %v", err)
	}
}

// TestKeptChatTalkCodexInDocker: on a kept Codex CLI (codex app-server),
// a message sent while a command runs is steered into the running turn
// (turn/steer) and reaches the model's next request, which changes the
// answer; an interrupt (turn/interrupt) ends the turn with an interrupted
// notice, not an error, and the next turn runs on the same CLI.
func TestKeptChatTalkCodexInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shell := func(cmd string) []scripted.ToolCall {
		return []scripted.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": cmd}}}
	}
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{PromptContains: "build"}, ToolCalls: shell("sleep 10; echo built")},
		{When: &scripted.Match{Sees: "use tabs"}, Text: "Built, with tabs."},
		{When: &scripted.Match{AfterToolResult: "exec_command", PromptContains: "build"}, Text: "Built."},
		{When: &scripted.Match{PromptContains: "long"}, ToolCalls: shell("sleep 120; echo done")},
		{When: &scripted.Match{Contains: "after interrupt"}, Text: "Still here."},
	}, nil)
	e.coder.Sandbox.Command, e.coder.Sandbox.Image = "codex", testenv.CLIImage(t, "codex")
	e.app.Connectors["real"].Type = "openai"
	atTool := func(msg string, act func()) (*Response, *chattest.Recorder, error) { return e.atTool(t, ctx, msg, act) }

	if got, tm := e.turn(t, ctx, "c1", "first"); got != "One." || tm.Sandbox != chat.SandboxCold {
		t.Fatalf("first: %q on %s", got, tm.Sandbox)
	}
	var sayErr error
	resp, rec, err := atTool("build the thing", func() {
		sayErr = e.p.Say(ctx, "alice", "c1", "use tabs please")
	})
	if err != nil || sayErr != nil {
		t.Fatalf("build: %v (message: %v) %+v", err, sayErr, rec.Events())
	}
	if tm := rec.Last().Final.Timings; !strings.Contains(resp.Content, "Built, with tabs.") || tm.Sandbox != chat.SandboxWarm {
		t.Errorf("build: %q on %s, want the steered answer on the kept CLI", resp.Content, tm.Sandbox)
	}
	if !slices.ContainsFunc(e.srv.TurnRequests(), func(r scripted.Request) bool { return strings.Contains(r.NewText(), "use tabs please") }) {
		t.Error("no model request carried the message sent mid-turn")
	}
	d, err := e.p.GetChat(ctx, "alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if last := d.History[len(d.History)-1]; len(last.Said) != 1 || last.Said[0].Content != "use tabs please" {
		t.Errorf("history's answer %+v: want the message said into it", last)
	}

	resp, rec, err = atTool("a long job", func() {
		if err := e.p.Interrupt(ctx, "alice", "c1"); err != nil {
			t.Errorf("interrupt: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("interrupted turn: %v %+v", err, rec.Events())
	}
	if !slices.ContainsFunc(rec.Events(), func(ev chat.Event) bool { return ev.Type == chat.TypeNotice && ev.Props["code"] == "interrupted" }) {
		t.Errorf("interrupted turn (%q): no interrupted notice in %+v", resp.Content, rec.Events())
	}
	if got, tm := e.turn(t, ctx, "c1", "after interrupt"); got != "Still here." || tm.Sandbox != chat.SandboxWarm {
		t.Errorf("after interrupt: %q on %s, want an answer on the same CLI", got, tm.Sandbox)
	}
}

// atTool runs a turn of alice's chat c1 and act once the agent called its
// tool.
func (e *keptEnv) atTool(t *testing.T, ctx context.Context, msg string, act func()) (*Response, *chattest.Recorder, error) {
	t.Helper()
	rec := &chattest.Recorder{}
	var once sync.Once
	acted := make(chan struct{})
	resp, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user(msg)}, func(ev chat.Event) {
		rec.Emit(ev)
		if ev.Type == chat.TypeToolCall && ev.Event == chat.Start {
			once.Do(func() { go func() { defer close(acted); act() }() })
		}
	})
	select {
	case <-acted:
	case <-ctx.Done():
		t.Fatalf("%q: the agent never called its tool (%v): %+v", msg, err, rec.Events())
	}
	return resp, rec, err
}
