package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/skills"
	"github.com/agentbox/agentbox/store"
)

// Skill proposals, as the store keeps them (so a *store.Store is a
// SkillStore as it is).
type (
	SkillProposal  = store.SkillProposal
	SkillTest      = store.SkillTest
	ProposalFilter = store.ProposalFilter
)

// SkillStore keeps the skills agents draft for their users (proposals)
// and the users' approved skills. Its errors wrap store.ErrNotFound (no
// such proposal of the user), store.ErrConflict (the proposal's state
// does not allow the change) and store.ErrLimit.
type SkillStore interface {
	CreateSkillProposal(ctx context.Context, p *SkillProposal, maxPending int) error
	SkillProposal(ctx context.Context, user, id string) (*SkillProposal, error)
	SkillProposals(ctx context.Context, user string, f ProposalFilter) ([]*SkillProposal, error)
	ApprovedSkills(ctx context.Context, user, assistantID string) ([]*SkillProposal, error)
	DecideSkillProposal(ctx context.Context, user, id, status, reason string, at time.Time) (*SkillProposal, error)
	RetireSkill(ctx context.Context, user, assistantID, name, reason string, at time.Time) error
	StartSkillTest(ctx context.Context, user, id string, t *SkillTest, staleBefore time.Time) error
	FinishSkillTest(ctx context.Context, user, id string, t *SkillTest) error
}

var _ SkillStore = (*store.Store)(nil)

// NoticeSkillShadowed is the notice code of a turn that leaves out one of
// the user's approved skills because the assistant's own skills (from the
// app folder) have its name: those always win a name clash.
const NoticeSkillShadowed = "skill_shadowed"

// NoticeSkillsUnavailable is the notice code of a turn that runs without
// the user's approved skills because the store could not be read.
const NoticeSkillsUnavailable = "user_skills_unavailable"

// userSkills returns the user's approved skills for a, built from their
// proposals.
func (p *Pipeline) userSkills(ctx context.Context, user string, a *assistant.Assistant) ([]*SkillProposal, error) {
	if p.cfg.Skills == nil {
		return nil, nil
	}
	return p.cfg.Skills.ApprovedSkills(ctx, user, a.ID)
}

// appSkill reports whether the assistant's own skills have name.
func appSkill(a *assistant.Assistant, name string) bool {
	return slices.ContainsFunc(a.Skills, func(s *skills.Skill) bool { return s.Name == name })
}

// turnAssistant is a with the skills this turn installs: the assistant's
// own, then the user's approved ones that none of them shadows (a notice
// names each shadowed one), and for a skill test the proposal in place of
// the user's skill of its name. The copy is the turn's: a itself, shared
// by every turn, is never changed.
func (t *turn) turnAssistant(ctx context.Context, a *assistant.Assistant) *assistant.Assistant {
	approved, err := t.p.userSkills(ctx, t.req.UserID, a)
	if err != nil {
		t.p.log.Error("user skills not read", "user", t.req.UserID, "assistant", a.ID, "error", err)
		chat.Notice(t.emit, t.nextID("notice"), NoticeSkillsUnavailable,
			"your approved skills could not be read; this turn runs with the assistant's own skills only")
	}
	if len(approved) == 0 && t.trial == nil {
		return a
	}
	list := slices.Clone(a.Skills)
	for _, sp := range approved {
		switch {
		case t.trial != nil && sp.Name == t.trial.skill.Name:
			continue // the proposal under test replaces it
		case appSkill(a, sp.Name):
			chat.Notice(t.emit, t.nextID("notice"), NoticeSkillShadowed, fmt.Sprintf(
				"your skill %q is not installed: the assistant's own skill of that name wins (remove yours or have the agent propose it under another name)", sp.Name))
			continue
		}
		s, probs := sp.Draft.Build()
		if len(probs) > 0 {
			// Stored drafts were valid when proposed; a stricter build may
			// refuse an old one.
			t.p.log.Warn("approved skill no longer valid", "user", t.req.UserID, "assistant", a.ID, "skill", sp.Name, "problems", probs)
			continue
		}
		list = append(list, s)
	}
	if t.trial != nil {
		if appSkill(a, t.trial.skill.Name) {
			chat.Notice(t.emit, t.nextID("notice"), NoticeSkillShadowed, fmt.Sprintf(
				"the proposed skill %q is not installed: the assistant's own skill of that name wins", t.trial.skill.Name))
		} else {
			list = append(list, t.trial.skill)
		}
	}
	slices.SortFunc(list, func(x, y *skills.Skill) int { return strings.Compare(x.Name, y.Name) })
	c := *a
	c.Skills = list
	return &c
}
