package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/skills"
	"github.com/agentbox/agentbox/store"
)

func proposal(id, user, name string, at time.Time) *store.SkillProposal {
	return &store.SkillProposal{ID: id, UserID: user, AssistantID: "coder", ChatID: "c1",
		Draft: skills.Draft{Name: name, Description: "Does " + name + ".", Instructions: "# " + name + "\n",
			Files: []skills.File{{Path: "scripts/run.sh", Content: "#!/bin/sh\n"}}},
		TestPrompt: "try it", Status: store.ProposalPending, CreatedAt: at}
}

// testSkillProposals: a proposal's life: created (within the pending
// limit), listed and read only by its user, tested, approved (replacing an
// approved one of the same name), rejected with a reason, retired.
func testSkillProposals(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)

	p1 := proposal("sp1", "alice", "notes", t0)
	if err := s.CreateSkillProposal(ctx, p1, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSkillProposal(ctx, proposal("sp2", "alice", "notes", t0.Add(time.Second)), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSkillProposal(ctx, proposal("sp3", "alice", "other", t0.Add(2*time.Second)), 2); !errors.Is(err, store.ErrLimit) {
		t.Fatalf("third pending proposal: %v, want store.ErrLimit", err)
	}
	if err := s.CreateSkillProposal(ctx, proposal("sp1", "bob", "notes", t0), 2); err != nil {
		t.Fatalf("bob's proposal with the same id: %v", err)
	}
	if err := s.CreateSkillProposal(ctx, proposal("sp1", "alice", "x", t0), 0); err == nil {
		t.Fatal("duplicate id stored")
	}

	got, err := s.SkillProposal(ctx, "alice", "sp1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p1) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, p1)
	}
	if _, err := s.SkillProposal(ctx, "carol", "sp1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another user's proposal: %v", err)
	}
	list, err := s.SkillProposals(ctx, "alice", store.ProposalFilter{})
	if err != nil || len(list) != 2 || list[0].ID != "sp2" || list[1].Instructions != "" || list[1].Files != nil {
		t.Fatalf("listing = %+v, %v", list, err)
	}

	// Tests: one at a time, a stale one replaced, an old outcome dropped.
	run := &store.SkillTest{Status: store.TestRunning, Prompt: "try it", ChatID: "t1", StartedAt: t0}
	if err := s.StartSkillTest(ctx, "alice", "sp1", run, t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.StartSkillTest(ctx, "alice", "sp1", &store.SkillTest{Status: store.TestRunning, ChatID: "t2", StartedAt: t0}, t0.Add(-time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second test while one runs: %v", err)
	}
	if err := s.StartSkillTest(ctx, "alice", "sp1", &store.SkillTest{Status: store.TestRunning, ChatID: "t2", StartedAt: t0.Add(time.Hour)}, t0.Add(time.Minute)); err != nil {
		t.Fatalf("test replacing a stale one: %v", err)
	}
	out := &store.SkillTest{Status: store.TestCompleted, Prompt: "try it", ChatID: "t1", StartedAt: t0, FinishedAt: t0.Add(time.Minute),
		Answer: "done", ToolCalls: []store.TestToolCall{{Name: "Skill"}, {Name: "Bash", IsError: true}},
		Usage: chat.Usage{InputTokens: 10, OutputTokens: 2}, SessionSkills: []string{"notes"}, SkillLoaded: true, SkillUsed: true}
	if err := s.FinishSkillTest(ctx, "alice", "sp1", out); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("outcome of a replaced test: %v", err)
	}
	out.ChatID = "t2"
	if err := s.FinishSkillTest(ctx, "alice", "sp1", out); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SkillProposal(ctx, "alice", "sp1"); !sameJSON(t, got.Test, out) {
		t.Fatalf("test = %+v, want %+v", got.Test, out)
	}

	// Approvals: the newer of two of one name replaces the older.
	if _, err := s.DecideSkillProposal(ctx, "alice", "sp1", store.ProposalApproved, "", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideSkillProposal(ctx, "alice", "sp1", store.ProposalRejected, "no", t0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("deciding twice: %v", err)
	}
	if _, err := s.DecideSkillProposal(ctx, "bob", "sp2", store.ProposalApproved, "", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("approving another user's proposal: %v", err)
	}
	p2, err := s.DecideSkillProposal(ctx, "alice", "sp2", store.ProposalApproved, "", t0.Add(2*time.Hour))
	if err != nil || p2.Status != store.ProposalApproved {
		t.Fatal(p2, err)
	}
	if got, _ := s.SkillProposal(ctx, "alice", "sp1"); got.Status != store.ProposalRetired || got.Reason != "replaced by proposal sp2" {
		t.Fatalf("replaced proposal: %s %q", got.Status, got.Reason)
	}
	approved, err := s.ApprovedSkills(ctx, "alice", "coder")
	if err != nil || len(approved) != 1 || approved[0].ID != "sp2" || len(approved[0].Files) != 1 {
		t.Fatalf("approved = %+v, %v", approved, err)
	}
	if other, _ := s.ApprovedSkills(ctx, "alice", "qa"); len(other) != 0 {
		t.Fatalf("another assistant's skills: %+v", other)
	}

	// A rejection keeps the proposal with its reason.
	if err := s.CreateSkillProposal(ctx, proposal("sp3", "alice", "other", t0.Add(3*time.Second)), 2); err != nil {
		t.Fatal(err)
	}
	if p, err := s.DecideSkillProposal(ctx, "alice", "sp3", store.ProposalRejected, "too vague", t0); err != nil || p.Reason != "too vague" {
		t.Fatal(p, err)
	}
	if list, _ := s.SkillProposals(ctx, "alice", store.ProposalFilter{Status: store.ProposalRejected}); len(list) != 1 || list[0].Reason != "too vague" {
		t.Fatalf("rejected = %+v", list)
	}

	// Removing a skill retires it.
	if err := s.RetireSkill(ctx, "alice", "coder", "notes", "removed by its user", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.RetireSkill(ctx, "alice", "coder", "notes", "again", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retiring twice: %v", err)
	}
	if approved, _ := s.ApprovedSkills(ctx, "alice", ""); len(approved) != 0 {
		t.Fatalf("approved after removal = %+v", approved)
	}

	// What no driver can keep as text is refused.
	bad := proposal("sp9", "alice", "nul", t0)
	bad.Files[0].Content = "a\x00b"
	if err := s.CreateSkillProposal(ctx, bad, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a NUL in a file: %v", err)
	}
	if _, err := s.DecideSkillProposal(ctx, "alice", "sp1", store.ProposalRejected, "\xff", t0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a reason that is not UTF-8: %v", err)
	}
}

// testSkillApprovalRace: of two stores approving two proposals of one name
// at once, the newer approval wins and exactly one stays approved.
func testSkillApprovalRace(t *testing.T, o Opener) {
	a := o.Open(t)
	b := o.Reopen(t, a)
	ctx := bg
	t0 := time.UnixMilli(1_700_000_000_000)
	for round := range 10 {
		ids := []string{"r" + string(rune('a'+round)) + "1", "r" + string(rune('a'+round)) + "2"}
		user := "u" + string(rune('a'+round))
		for _, id := range ids {
			if err := a.CreateSkillProposal(ctx, proposal(id, user, "notes", t0), 0); err != nil {
				t.Fatal(err)
			}
		}
		errs := make(chan error, 2)
		for i, st := range []*store.Store{a, b} {
			go func() {
				_, err := st.DecideSkillProposal(ctx, user, ids[i], store.ProposalApproved, "", t0.Add(time.Duration(i)*time.Second))
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		approved, err := a.ApprovedSkills(ctx, user, "coder")
		if err != nil || len(approved) != 1 {
			t.Fatalf("round %d: approved = %+v, %v", round, approved, err)
		}
	}
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}
