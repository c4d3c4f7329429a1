package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/skills"
	"github.com/agentbox/agentbox/store"
)

// Limits of skill authoring.
const (
	// MaxPendingProposals is how many of a user's proposals for one
	// assistant may wait for approval at once.
	MaxPendingProposals = 20
	// MaxTestPrompt bounds a test prompt, in bytes.
	MaxTestPrompt = 8 << 10
)

// proposeSkillSchema is the input of the propose_skill tool.
var proposeSkillSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "The skill's name, also its folder's: lowercase letters, digits and single hyphens, at most 64 characters (release-notes)."},
    "description": {"type": "string", "description": "What the skill does and when to use it, in at most 1024 characters: the agent decides from it alone whether to read the skill."},
    "instructions": {"type": "string", "description": "The body of SKILL.md (Markdown, no front matter): the steps to follow when the skill applies. Keep it short; put long material in references/ files."},
    "files": {
      "type": "array",
      "description": "Files beside SKILL.md, in scripts/ (installed executable), references/ or assets/, as text.",
      "maxItems": 16,
      "items": {
        "type": "object",
        "properties": {
          "path": {"type": "string", "description": "Relative to the skill folder: scripts/check.sh, references/guide.md."},
          "content": {"type": "string"}
        },
        "required": ["path", "content"],
        "additionalProperties": false
      }
    },
    "test_prompt": {"type": "string", "description": "A request to try the skill with: a test turn runs it in a fresh sandbox with the skill installed, and its outcome is shown to the user with the proposal."}
  },
  "required": ["name", "description", "instructions"],
  "additionalProperties": false
}`)

const proposeSkillDescription = "Propose a new Agent Skill for this user: reusable instructions (and scripts) for a task you learned to do here, " +
	"so that future turns can do it again. The skill is NOT installed now: the user reviews it and approves or rejects it, " +
	"and an approved skill is installed among your skills from the next turn on. Invalid drafts are refused " +
	"with the reasons; fix them and call again. Propose only what you have seen work."

// proposeArgs are the tool's arguments.
type proposeArgs struct {
	skills.Draft
	TestPrompt string `json:"test_prompt"`
}

// proposedTest is a proposal whose test turn starts once the turn that
// proposed it ended.
type proposedTest struct {
	id, prompt string
}

// proposeSkillTool is the host tool through which the agent of an
// assistant with skill authoring drafts a skill for the turn's user.
func (t *turn) proposeSkillTool(a *assistant.Assistant) bridge.Tool {
	cur := t.cur
	return bridge.Tool{
		Name:        assistant.ProposeSkillTool,
		Description: proposeSkillDescription,
		InputSchema: proposeSkillSchema,
		Timeout:     30 * time.Second,
		Handler: func(ctx context.Context, raw json.RawMessage) (any, error) {
			var args proposeArgs
			if err := json.Unmarshal(raw, &args); err != nil {
				return nil, fmt.Errorf("arguments: %w", err)
			}
			// A kept chat's bridge serves its later turns too.
			return cur.Load().proposeSkill(ctx, a, args)
		},
	}
}

// proposeSkill checks a draft, stores it as a pending proposal of the
// turn's user, tells the client (skill_proposed) and, with a test prompt,
// has it tested after the turn. Its errors are the agent's to fix.
func (t *turn) proposeSkill(ctx context.Context, a *assistant.Assistant, args proposeArgs) (string, error) {
	d := args.Draft
	if _, probs := d.Build(); len(probs) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "the skill was not proposed: %d problem(s) to fix, then call %s again:", len(probs), assistant.ProposeSkillTool)
		for _, p := range probs {
			b.WriteString("\n- " + p.String())
		}
		return "", errors.New(b.String())
	}
	if appSkill(a, d.Name) {
		return "", fmt.Errorf("the skill was not proposed: the assistant already has a skill named %q (it comes with the assistant and wins a name clash); choose another name", d.Name)
	}
	prompt := strings.TrimSpace(args.TestPrompt)
	if len(prompt) > MaxTestPrompt || !utf8.ValidString(prompt) {
		return "", fmt.Errorf("the skill was not proposed: test_prompt must be UTF-8 text of at most %d bytes", MaxTestPrompt)
	}
	approved, err := t.p.userSkills(ctx, t.req.UserID, a)
	if err != nil {
		return "", fmt.Errorf("the skill was not proposed: the user's skills could not be read; try again later")
	}
	replaces := false
	for _, sp := range approved {
		replaces = replaces || sp.Name == d.Name
	}
	sp := &SkillProposal{
		ID: newProposalID(), UserID: t.req.UserID, AssistantID: a.ID, ChatID: t.req.ChatID,
		Draft: d, TestPrompt: prompt, Status: store.ProposalPending, CreatedAt: time.Now(),
	}
	if err := t.p.cfg.Skills.CreateSkillProposal(ctx, sp, MaxPendingProposals); err != nil {
		if errors.Is(err, store.ErrLimit) {
			return "", fmt.Errorf("the skill was not proposed: %d of your proposals for this assistant already wait for the user's decision; ask the user to approve or reject them first", MaxPendingProposals)
		}
		t.p.log.Error("skill proposal not stored", "user", t.req.UserID, "assistant", a.ID, "error", err)
		return "", fmt.Errorf("the skill was not proposed: it could not be stored; try again later")
	}
	files := make([]string, 0, len(d.Files))
	for _, f := range d.Files {
		files = append(files, f.Path)
	}
	test := prompt != "" && a.SkillAuthoring != nil
	if test {
		t.mu.Lock()
		t.proposed = append(t.proposed, proposedTest{id: sp.ID, prompt: prompt})
		t.mu.Unlock()
	}
	chat.Whole(t.emit, t.nextID("skill"), chat.TypeSkillProposed, "Skill proposed: "+d.Name, map[string]any{
		"proposal_id": sp.ID, "assistant_id": a.ID, "name": d.Name, "description": d.Description,
		"files": files, "status": sp.Status, "replaces": replaces, "test": test,
	})
	t.p.log.Info("skill proposed", "user", t.req.UserID, "chat", t.req.ChatID, "assistant", a.ID, "proposal", sp.ID, "skill", d.Name)
	var b strings.Builder
	fmt.Fprintf(&b, "Proposed skill %q as proposal %s. It is not installed: the user reviews it, and once approved it is among your skills from the next turn on.", d.Name, sp.ID)
	if replaces {
		fmt.Fprintf(&b, " Approving it replaces the user's current skill %q.", d.Name)
	}
	if test {
		b.WriteString(" After this turn, a test turn tries it in a fresh sandbox with your test prompt; the user sees its outcome with the proposal.")
	}
	return b.String(), nil
}

// newProposalID returns a new proposal id: "skp_" and 20 random base32
// characters.
func newProposalID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[b[i]%32]
	}
	return "skp_" + string(b)
}
