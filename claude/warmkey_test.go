package claude

import (
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/skills"
)

// TestWarmKeySkills: a kept CLI is restarted when the skills it would be
// started with change, also when one is replaced by another of the same
// count (a user's skill approved again with new instructions).
func TestWarmKeySkills(t *testing.T) {
	t.Parallel()
	skill := func(instructions string) *skills.Skill {
		s, probs := (&skills.Draft{Name: "notes", Description: "Notes.", Instructions: instructions}).Build()
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return s
	}
	key := func(list ...*skills.Skill) string {
		return warmKey(&executor.Request{Assistant: &assistant.Assistant{ID: "coder", Skills: list}}, 5, "default", "m")
	}
	if first, again := key(skill("a")), key(skill("a")); first != again {
		t.Error("the same skills give two keys")
	}
	if key(skill("a")) == key(skill("b")) {
		t.Error("a replaced skill keeps the key")
	}
	if key() == key(skill("a")) {
		t.Error("an added skill keeps the key")
	}
}
