package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/skills"
	"github.com/agentbox/agentbox/store"
)

// skillsEnv is newEnv with a store for skills, skill authoring on for the
// coder (which has a skill "house-style" of its own) and hooks that shape
// every turn (Create prefixes the user's message, Next marks the answer)
// and leave a trace in memory, saying whether the turn was a skill's test.
func skillsEnv(t *testing.T) (*env, *store.Store) {
	t.Helper()
	st := skillDB(t)
	hooks := `
function Create(ctx, messages) {
  const test = ctx.metadata && ctx.metadata.skill_test;
  if (test) ctx.memory.user.Set("test-hook-ran", test.skill + " " + test.proposal_id);
  else ctx.memory.user.Set("hook-ran", ctx.chat_id);
  ctx.memory.chat.Set("seen", true);
  const last = messages[messages.length - 1];
  return { messages: [...messages.slice(0, -1), { role: "user", content: "[house rules] " + last.content }] };
}
function Next(ctx, payload) {
  return { data: payload.completion.content + " (checked)" };
}
`
	e := newEnvWith(t, &scripted.Script{}, hooks, func(c *Config) { c.Skills = st })
	coder := e.app.Assistants["coder"]
	coder.SkillAuthoring = &assistant.SkillAuthoring{TestMaxTurns: 3, TestTimeout: 20 * time.Second}
	own, probs := (&skills.Draft{Name: "house-style", Description: "The house style.", Instructions: "Tabs."}).Build()
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	coder.Skills = []*skills.Skill{own}
	return e, st
}

// skillDB opens a store for skill proposals in the test's folder, closed
// when the test ends.
func skillDB(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func draft(name string) proposeArgs {
	return proposeArgs{Draft: skills.Draft{Name: name, Description: "Write release notes from git log.",
		Instructions: "# Notes\nRun scripts/log.sh.\n", Files: []skills.File{{Path: "scripts/log.sh", Content: "git log\n"}}},
		TestPrompt: "Write release notes for the last commit."}
}

// skillNames are the names of the skills an executor request installs.
func skillNames(req *executor.Request) []string {
	var out []string
	for _, s := range req.Assistant.Skills {
		out = append(out, s.Name)
	}
	return out
}

// waitTest waits for the proposal's test to end.
func waitTest(t *testing.T, p *Pipeline, user, id string) *SkillProposal {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sp, err := p.SkillProposal(context.Background(), user, id)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Test != nil && sp.Test.Status != store.TestRunning {
			return sp
		}
		if time.Now().After(deadline) {
			t.Fatalf("test of %s still %+v", id, sp.Test)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSkillAuthoringGate: a draft the agent proposes is checked, stored
// for the turn's user, announced, tested after the turn in a throwaway
// chat with the assistant's hooks, and installed only once approved; rejected and
// unapproved ones never reach an executor.
func TestSkillAuthoringGate(t *testing.T) {
	e, st := skillsEnv(t)
	ctx := context.Background()
	coder := e.app.Assistants["coder"]

	// The executor of a test turn reports the installed skills and uses
	// the proposal; other turns answer as usual.
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		req.Emit(chat.Event{Event: chat.Start, ID: "s", Type: chat.TypeSession, Props: map[string]any{"skills": skillNames(req)}})
		req.Emit(chat.Event{Event: chat.End, ID: "s", Type: chat.TypeSession})
		if strings.HasPrefix(req.ChatID, "skill-test-") {
			req.Emit(chat.Event{Event: chat.Start, ID: "c", Type: chat.TypeToolCall, Props: map[string]any{"name": "Skill", "id": "tu1"}})
			req.Emit(chat.Event{Event: chat.End, ID: "c", Type: chat.TypeToolCall, Props: map[string]any{"input": chat.RawJSON(`{"skill":"release-notes"}`)}})
			chat.WholeToolResult(req.Emit, "r", chat.ToolResult{ToolCallID: "tu1", Content: "loaded"})
		}
		chat.Whole(req.Emit, "t", chat.TypeText, "notes written", nil)
		return &executor.Result{Content: "notes written", Usage: chat.Usage{InputTokens: 5, OutputTokens: 2, Turns: 1}}, nil
	}

	// The agent's turn: a bad draft, then a good one.
	var rec chattest.Recorder
	tt := &turn{p: e.p, req: &Request{UserID: "alice", ChatID: "work", AssistantID: "coder"}, emit: rec.Emit}
	bad := draft("Release_Notes")
	bad.Files[0].Path = "../escape.sh"
	_, err := tt.proposeSkill(ctx, coder, bad)
	if err == nil || !strings.Contains(err.Error(), `name: invalid name "Release_Notes"`) || !strings.Contains(err.Error(), `files[0].path: path "../escape.sh"`) {
		t.Fatalf("bad draft: %v", err)
	}
	if _, err := tt.proposeSkill(ctx, coder, draft("house-style")); err == nil || !strings.Contains(err.Error(), "already has a skill named") {
		t.Fatalf("a name of the assistant's own skills: %v", err)
	}
	out, err := tt.proposeSkill(ctx, coder, draft("release-notes"))
	if err != nil || !strings.Contains(out, "It is not installed") {
		t.Fatalf("good draft: %q %v", out, err)
	}
	ev := rec.Starts(chat.TypeSkillProposed)
	if len(ev) != 1 || ev[0].Props["name"] != "release-notes" || ev[0].Props["test"] != true ||
		!slices.Equal(ev[0].Props["files"].([]string), []string{"scripts/log.sh"}) {
		t.Fatalf("skill_proposed events = %+v", ev)
	}
	id := ev[0].Props["proposal_id"].(string)
	if len(tt.proposed) != 1 || tt.proposed[0].id != id {
		t.Fatalf("tests to start: %+v", tt.proposed)
	}

	// Not yet approved: a turn of the chat does not install it.
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "work", AssistantID: "coder", Messages: user("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := skillNames(e.ex.reqs[len(e.ex.reqs)-1]); !slices.Equal(got, []string{"house-style"}) {
		t.Fatalf("skills before approval = %v", got)
	}

	// A client cannot pass its turn off as a skill's test to the hooks.
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "work", AssistantID: "coder", Messages: user("hi"),
		Metadata: map[string]any{SkillTestMetadata: map[string]any{"skill": "forged"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := e.p.cfg.Memory.Get(ctx, "user", "alice", "test-hook-ran"); ok {
		t.Fatalf("a client's metadata reached the hooks as a skill test: %s", v)
	}

	// The test turn: a throwaway chat, bounded, as the skill will run once
	// approved: the Create hook shapes its message, the Next hook its
	// answer, and the hooks know it is the skill's test.
	e.p.testProposals("alice", tt.proposed)
	sp := waitTest(t, e.p, "alice", id)
	tr := e.ex.reqs[len(e.ex.reqs)-1]
	if !strings.HasPrefix(tr.ChatID, "skill-test-"+id) || tr.Arguments.MaxTurns != 3 || tr.Timeout != 20*time.Second ||
		!slices.Equal(skillNames(tr), []string{"house-style", "release-notes"}) || tr.Input[0].Content != "[house rules] Write release notes for the last commit." {
		t.Fatalf("test request: chat %s, max turns %d, timeout %s, skills %v, input %+v", tr.ChatID, tr.Arguments.MaxTurns, tr.Timeout, skillNames(tr), tr.Input)
	}
	if v, _, _ := e.p.cfg.Memory.Get(ctx, "user", "alice", "test-hook-ran"); string(v) != `"release-notes `+id+`"` {
		t.Fatalf("hook memory = %s: the test turn's Create hook must run, told it is the skill's test", v)
	}
	if keys, _ := e.p.cfg.Memory.Keys(ctx, jsapi.NamespaceChat, jsapi.ChatOwner("alice", tr.ChatID)); len(keys) != 0 {
		t.Fatalf("the test chat's memory is left: %v", keys)
	}
	if tst := sp.Test; tst.Status != store.TestCompleted || !tst.SkillLoaded || !tst.SkillUsed || tst.Answer != "notes written (checked)" ||
		tst.Usage.InputTokens != 5 || len(tst.ToolCalls) != 1 || tst.ToolCalls[0].Name != "Skill" {
		t.Fatalf("test outcome = %+v", tst)
	}
	if dir, _ := e.p.cfg.Workspaces.Path("alice", tr.ChatID); dirExists(dir) {
		t.Fatalf("the test turn's workspace %s is left", dir)
	}
	if h, _ := st.History(ctx, "alice", tr.ChatID); len(h) != 0 {
		t.Fatalf("the test turn stored history: %+v", h)
	}

	// Only its user sees and decides it.
	if _, err := e.p.SkillProposal(ctx, "mallory", id); !errors.Is(err, store.ErrNotFound) || chat.AsError(err).Code != chat.ErrInvalidRequest {
		t.Fatalf("another user's read: %v", err)
	}
	if _, err := e.p.ApproveSkill(ctx, "mallory", id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another user's approval: %v", err)
	}
	if _, err := e.p.RejectSkill(ctx, "alice", id, "  "); chat.AsError(err).Code != chat.ErrInvalidRequest {
		t.Fatalf("rejection without a reason: %v", err)
	}
	if _, err := e.p.ApproveSkill(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.ApproveSkill(ctx, "alice", id); chat.AsError(err).Code != chat.ErrSkillConflict {
		t.Fatalf("approving twice: %v", err)
	}
	if _, err := e.p.TestSkill(ctx, "alice", id, ""); chat.AsError(err).Code != chat.ErrSkillConflict {
		t.Fatalf("testing an approved proposal: %v", err)
	}

	// Approved: installed from the next turn on, for its user only.
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "work", AssistantID: "coder", Messages: user("notes please")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := skillNames(e.ex.reqs[len(e.ex.reqs)-1]); !slices.Equal(got, []string{"house-style", "release-notes"}) {
		t.Fatalf("skills after approval = %v", got)
	}
	if _, err := e.p.Chat(ctx, &Request{UserID: "bob", ChatID: "work", AssistantID: "coder", Messages: user("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := skillNames(e.ex.reqs[len(e.ex.reqs)-1]); !slices.Equal(got, []string{"house-style"}) {
		t.Fatalf("another user's skills = %v", got)
	}
	us, err := e.p.UserSkills(ctx, "alice", "")
	if err != nil || len(us) != 1 || us[0].Name != "release-notes" || us[0].ProposalID != id || us[0].Shadowed {
		t.Fatalf("user skills = %+v, %v", us, err)
	}

	// A rejected proposal is kept with its reason and never installed.
	tt2 := &turn{p: e.p, req: &Request{UserID: "alice", ChatID: "work", AssistantID: "coder"}, emit: func(chat.Event) {}}
	args := draft("lint-fix")
	args.TestPrompt = ""
	if _, err := tt2.proposeSkill(ctx, coder, args); err != nil {
		t.Fatal(err)
	}
	if len(tt2.proposed) != 0 {
		t.Fatal("a draft without a test prompt was queued for a test")
	}
	pending, err := e.p.SkillProposals(ctx, "alice", ProposalFilter{Status: store.ProposalPending})
	if err != nil || len(pending) != 1 || pending[0].Name != "lint-fix" {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	if _, err := e.p.TestSkill(ctx, "alice", pending[0].ID, ""); chat.AsError(err).Code != chat.ErrInvalidRequest {
		t.Fatalf("a test without any prompt: %v", err)
	}
	rj, err := e.p.RejectSkill(ctx, "alice", pending[0].ID, "It guesses the linter.")
	if err != nil || rj.Status != store.ProposalRejected || rj.Reason != "It guesses the linter." {
		t.Fatalf("rejected = %+v, %v", rj, err)
	}
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "work", AssistantID: "coder", Messages: user("lint")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := skillNames(e.ex.reqs[len(e.ex.reqs)-1]); slices.Contains(got, "lint-fix") {
		t.Fatalf("a rejected skill was installed: %v", got)
	}

	// The app gains a skill of the same name: it wins, and the turn says
	// so; removing the user's skill stops installing it.
	own, _ := (&skills.Draft{Name: "release-notes", Description: "The app's.", Instructions: "x"}).Build()
	coder.Skills = append(coder.Skills, own)
	rec = chattest.Recorder{}
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "work", AssistantID: "coder", Messages: user("notes")}, rec.Emit); err != nil {
		t.Fatal(err)
	}
	if n := rec.Starts(chat.TypeNotice); len(n) != 1 || n[0].Props["code"] != NoticeSkillShadowed {
		t.Fatalf("notices = %+v", n)
	}
	if got := e.ex.reqs[len(e.ex.reqs)-1].Assistant.Skills; len(got) != 2 || got[1] != own {
		t.Fatalf("skills with a clash = %v", got)
	}
	if us, _ := e.p.UserSkills(ctx, "alice", "coder"); len(us) != 1 || !us[0].Shadowed {
		t.Fatalf("shadowed skill listed as %+v", us)
	}
	if err := e.p.RemoveSkill(ctx, "alice", "coder", "release-notes"); err != nil {
		t.Fatal(err)
	}
	if err := e.p.RemoveSkill(ctx, "alice", "coder", "release-notes"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removing twice: %v", err)
	}
	if coder.Skills[1] != own || len(coder.Skills) != 2 {
		t.Fatal("a turn changed the assistant's own skills")
	}
}

// TestSkillTestIsNeverKept: the test turn of a proposal for an assistant
// with keep_alive runs in a throwaway chat whose sandbox is removed with
// it, even when the executor could keep its CLI.
func TestSkillTestIsNeverKept(t *testing.T) {
	e, _ := skillsEnv(t)
	ctx := context.Background()
	coder := e.app.Assistants["coder"]
	coder.Sandbox.KeepAlive = time.Minute
	t.Cleanup(func() { _ = e.p.Close(context.Background()) })
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		res := &executor.Result{Content: "ok"}
		if req.KeepAlive {
			res.Warm = &fakeWarm{}
		}
		return res, nil
	}
	tt := &turn{p: e.p, req: &Request{UserID: "alice", ChatID: "work", AssistantID: "coder"}, emit: func(chat.Event) {}}
	if _, err := tt.proposeSkill(ctx, coder, draft("release-notes")); err != nil {
		t.Fatal(err)
	}
	id := tt.proposed[0].id
	if _, err := e.p.TestSkill(ctx, "alice", id, "try it"); err != nil {
		t.Fatal(err)
	}
	if sp := waitTest(t, e.p, "alice", id); sp.Test.Status != store.TestCompleted {
		t.Fatalf("test %+v", sp.Test)
	}
	waitFor(t, func() bool { return e.rt.Live() == 0 })
	if kept, idle := e.p.kept.stats(); kept != 0 || idle != 0 {
		t.Errorf("kept %d, idle %d after a skill's test", kept, idle)
	}
}
