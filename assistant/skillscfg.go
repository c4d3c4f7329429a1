package assistant

import (
	"fmt"
	"time"
)

// ProposeSkillTool is the host tool through which the agent of an assistant
// with skill authoring drafts a skill (mcp__agentbox__propose_skill); the
// name is reserved for it.
const ProposeSkillTool = "propose_skill"

// Bounds and defaults of a drafted skill's test turn (package.yao
// "skills": {"test": {...}}).
const (
	DefaultSkillTestMaxTurns = 5
	DefaultSkillTestTimeout  = 3 * time.Minute
	maxSkillTestTurns        = 30
	minSkillTestTimeout      = 10 * time.Second
	maxSkillTestTimeout      = 30 * time.Minute
)

// SkillAuthoring is package.yao "skills" when "authoring" is true: the
// agent may draft skills, which its user approves before they are used.
type SkillAuthoring struct {
	// TestMaxTurns and TestTimeout bound the turn that tries a draft in a
	// sandbox of its own (the timeout is also held under the sandbox
	// block's).
	TestMaxTurns int
	TestTimeout  time.Duration
}

// rawSkills is package.yao "skills". The skills themselves are found in the
// skills/ folder; this block says what the agent may do with them.
type rawSkills struct {
	// Authoring offers the agent the propose_skill tool.
	Authoring bool          `json:"authoring"`
	Test      *rawSkillTest `json:"test"`
}

type rawSkillTest struct {
	MaxTurns int    `json:"max_turns"`
	Timeout  string `json:"timeout"`
}

// parseSkills checks package.yao "skills". Authoring needs a sandbox (the
// tool reaches the agent through the request's bridge) and reserves the
// propose_skill tool name.
func parseSkills(d *doc, r *rawSkills, sandboxed bool, tools []Tool) *SkillAuthoring {
	sa := &SkillAuthoring{TestMaxTurns: DefaultSkillTestMaxTurns, TestTimeout: DefaultSkillTestTimeout}
	if r.Test != nil {
		if !r.Authoring && !d.bad["skills.authoring"] {
			d.errPath("skills.test", "skills.test bounds the test turn of skills the agent drafts: it needs \"authoring\": true")
		}
		if d.has("skills.test.max_turns") {
			if n := r.Test.MaxTurns; n < 1 || n > maxSkillTestTurns {
				d.errPath("skills.test.max_turns", "skills.test.max_turns %d is out of range: want 1 to %d", n, maxSkillTestTurns)
			} else {
				sa.TestMaxTurns = n
			}
		}
		if d.has("skills.test.timeout") {
			if v := parseDurationIn(d, "skills.test.timeout", r.Test.Timeout, minSkillTestTimeout, maxSkillTestTimeout); v > 0 {
				sa.TestTimeout = v
			}
		}
	}
	if !r.Authoring {
		return nil
	}
	if !sandboxed {
		d.errPath("skills.authoring", "skills.authoring needs a sandbox block: the agent drafts skills through a host tool offered in its sandbox")
		return nil
	}
	for i, t := range tools {
		if t.Name == ProposeSkillTool {
			d.errPath(fmt.Sprintf("tools[%d].name", i), "tool name %q is reserved for skill authoring (skills.authoring offers it)", t.Name)
		}
	}
	return sa
}
