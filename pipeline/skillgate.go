package pipeline

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/store"
)

// The approval gate: a user's skill proposals, their decisions and tests,
// and the user's approved skills. Every method acts for user only: another
// user's proposals are not found. Errors are *chat.Error: invalid_request
// (a cause wrapping store.ErrNotFound when what is asked for does not
// exist), skill_conflict when the proposal's state forbids the request.

// UserSkill is one of a user's approved skills.
type UserSkill struct {
	AssistantID string    `json:"assistant_id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	ProposalID  string    `json:"proposal_id"`
	ApprovedAt  time.Time `json:"approved_at"`
	// Shadowed is set when the assistant's own skills have the name: they
	// win, and this one is not installed.
	Shadowed bool `json:"shadowed,omitempty"`
}

func (p *Pipeline) skillStore() (SkillStore, error) {
	if p.cfg.Skills == nil {
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: "this server keeps no skill proposals", Err: store.ErrNotFound}
	}
	return p.cfg.Skills, nil
}

// SkillProposals lists the user's proposals matching f, newest first,
// without their instructions and files.
func (p *Pipeline) SkillProposals(ctx context.Context, user string, f ProposalFilter) ([]*SkillProposal, error) {
	st, err := p.skillStore()
	if err != nil {
		return nil, err
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	switch f.Status {
	case "", store.ProposalPending, store.ProposalApproved, store.ProposalRejected, store.ProposalRetired:
	default:
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: "status: want pending, approved, rejected or retired, got " + quote(f.Status),
			Err: &chat.FieldError{Path: "status", Problem: "unknown status"}}
	}
	list, err := st.SkillProposals(ctx, user, f)
	if err != nil {
		return nil, skillStoreError(err)
	}
	for _, sp := range list {
		p.markStale(sp)
	}
	return list, nil
}

// SkillProposal returns the user's proposal id in full, with its test.
func (p *Pipeline) SkillProposal(ctx context.Context, user, id string) (*SkillProposal, error) {
	st, err := p.skillStore()
	if err != nil {
		return nil, err
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	sp, err := st.SkillProposal(ctx, user, id)
	if err != nil {
		return nil, skillStoreError(err)
	}
	p.markStale(sp)
	return sp, nil
}

// markStale shows a test whose turn cannot be running any more (its server
// stopped during it) as failed.
func (p *Pipeline) markStale(sp *SkillProposal) {
	t := sp.Test
	if t == nil || t.Status != store.TestRunning {
		return
	}
	timeout := 30 * time.Minute
	if a, ok := p.App().Assistants[sp.AssistantID]; ok {
		_, timeout = testBounds(a)
	}
	if time.Since(t.StartedAt) > timeout+testGrace {
		t.Status = store.TestFailed
		t.Error = &store.TestError{Code: "interrupted", Message: "the test turn did not finish (the server running it stopped); run the test again"}
	}
}

// ApproveSkill approves the user's pending proposal id: it becomes one of
// the user's skills for its assistant, installed from the user's next turn
// on, replacing an approved skill of the same name. A name the
// assistant's own skills have is refused (they always win a name clash).
func (p *Pipeline) ApproveSkill(ctx context.Context, user, id string) (*SkillProposal, error) {
	sp, err := p.SkillProposal(ctx, user, id)
	if err != nil {
		return nil, err
	}
	if sp.Status != store.ProposalPending {
		return nil, chat.Errorf(chat.ErrSkillConflict, "proposal %s is %s: only a pending proposal can be approved", id, sp.Status)
	}
	if a, ok := p.App().Assistants[sp.AssistantID]; ok && appSkill(a, sp.Name) {
		return nil, chat.Errorf(chat.ErrSkillConflict,
			"assistant %s has a skill named %q of its own, which wins a name clash: this proposal would never be installed; reject it (the agent can propose it under another name)", sp.AssistantID, sp.Name)
	}
	if _, probs := sp.Draft.Build(); len(probs) > 0 {
		return nil, chat.Errorf(chat.ErrSkillConflict, "proposal %s is not a valid skill: %v", id, probs[0])
	}
	out, err := p.cfg.Skills.DecideSkillProposal(ctx, user, id, store.ProposalApproved, "", time.Now())
	if err != nil {
		return nil, skillStoreError(err)
	}
	p.log.Info("skill approved", "user", user, "assistant", sp.AssistantID, "proposal", id, "skill", sp.Name)
	return out, nil
}

// RejectSkill rejects the user's pending proposal id for reason, which is
// required; the proposal is kept with it.
func (p *Pipeline) RejectSkill(ctx context.Context, user, id, reason string) (*SkillProposal, error) {
	st, err := p.skillStore()
	if err != nil {
		return nil, err
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	out, err := st.DecideSkillProposal(ctx, user, id, store.ProposalRejected, strings.TrimSpace(reason), time.Now())
	if err != nil {
		return nil, skillStoreError(err)
	}
	p.log.Info("skill rejected", "user", user, "proposal", id)
	return out, nil
}

func checkReason(reason string) error {
	r := strings.TrimSpace(reason)
	var problem string
	switch {
	case r == "":
		problem = "a reason is required: say why the skill is rejected (the agent and the user read it later)"
	case len(r) > store.MaxReasonLen:
		problem = "the reason is longer than 4096 bytes"
	case !utf8.ValidString(r):
		problem = "the reason is not UTF-8 text"
	default:
		return nil
	}
	fe := &chat.FieldError{Path: "reason", Problem: problem}
	return &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
}

// TestSkill runs a test turn of the user's pending proposal id in the
// background, with prompt (when empty, the test prompt the agent gave),
// and returns the proposal with its test running. One test of a proposal
// runs at a time.
func (p *Pipeline) TestSkill(ctx context.Context, user, id, prompt string) (*SkillProposal, error) {
	sp, err := p.SkillProposal(ctx, user, id)
	if err != nil {
		return nil, err
	}
	if sp.Status != store.ProposalPending {
		return nil, chat.Errorf(chat.ErrSkillConflict, "proposal %s is %s: only a pending proposal is tested", id, sp.Status)
	}
	prompt = strings.TrimSpace(prompt)
	if prompt == "" {
		prompt = sp.TestPrompt
	}
	if prompt == "" {
		fe := &chat.FieldError{Path: "prompt", Problem: "a prompt is required: the agent gave no test prompt with this proposal"}
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
	}
	if len(prompt) > MaxTestPrompt || !utf8.ValidString(prompt) {
		fe := &chat.FieldError{Path: "prompt", Problem: "the prompt must be UTF-8 text of at most 8192 bytes"}
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
	}
	test, err := p.startTest(ctx, sp, prompt)
	if err != nil {
		return nil, err
	}
	sp.Test = test
	return sp, nil
}

// UserSkills lists the user's approved skills (of one assistant, or of
// all when assistantID is empty), by assistant and name.
func (p *Pipeline) UserSkills(ctx context.Context, user, assistantID string) ([]UserSkill, error) {
	st, err := p.skillStore()
	if err != nil {
		return nil, err
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	list, err := st.ApprovedSkills(ctx, user, assistantID)
	if err != nil {
		return nil, skillStoreError(err)
	}
	app := p.App()
	out := make([]UserSkill, 0, len(list))
	for _, sp := range list {
		a, ok := app.Assistants[sp.AssistantID]
		out = append(out, UserSkill{AssistantID: sp.AssistantID, Name: sp.Name, Description: sp.Description,
			ProposalID: sp.ID, ApprovedAt: sp.DecidedAt, Shadowed: ok && appSkill(a, sp.Name)})
	}
	return out, nil
}

// RemoveSkill removes one of the user's approved skills: it is not
// installed from the next turn on, and its proposal is kept as retired.
func (p *Pipeline) RemoveSkill(ctx context.Context, user, assistantID, name string) error {
	st, err := p.skillStore()
	if err != nil {
		return err
	}
	if err := validateUser(user); err != nil {
		return err
	}
	if err := st.RetireSkill(ctx, user, assistantID, name, "removed by its user", time.Now()); err != nil {
		return skillStoreError(err)
	}
	p.log.Info("skill removed", "user", user, "assistant", assistantID, "skill", name)
	return nil
}

func validateUser(user string) error {
	if err := sandbox.ValidateID("user", user); err != nil {
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	return nil
}

func quote(s string) string { return `"` + s + `"` }
