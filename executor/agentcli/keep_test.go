package agentcli

import (
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/skills"
)

// TestKeepKey: a kept CLI is restarted when what it would be started with
// changes: the skills (also one replaced by another of the same count, a
// user's skill approved again with new instructions), the arguments, the
// system prompt.
func TestKeepKey(t *testing.T) {
	t.Parallel()
	skill := func(instructions string) *skills.Skill {
		s, probs := (&skills.Draft{Name: "notes", Description: "Notes.", Instructions: instructions}).Build()
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return s
	}
	req := func(list ...*skills.Skill) *executor.Request {
		return &executor.Request{Assistant: &assistant.Assistant{ID: "coder", Skills: list}, System: "s",
			Arguments: chat.Arguments{MaxTurns: 5, PermissionMode: "default", Model: "m"}}
	}
	key := func(list ...*skills.Skill) string { return keepKey(req(list...)) }
	if first, again := key(skill("a")), key(skill("a")); first != again {
		t.Error("the same skills give two keys")
	}
	if key(skill("a")) == key(skill("b")) {
		t.Error("a replaced skill keeps the key")
	}
	if key() == key(skill("a")) {
		t.Error("an added skill keeps the key")
	}
	r := req()
	r.Arguments.MaxTurns = 6
	if keepKey(r) == key() {
		t.Error("changed arguments keep the key")
	}
	r = req()
	r.System = "t"
	if keepKey(r) == key() {
		t.Error("a changed system prompt keeps the key")
	}
}
