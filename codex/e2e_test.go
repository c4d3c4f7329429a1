package codex

import (
	"testing"

	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// TestDockerEndToEnd runs the real CLI in its image, networkless, against
// the scripted model through the bridge (see clitest.EndToEnd).
func TestDockerEndToEnd(t *testing.T) {
	clitest.EndToEnd{
		CLI: "codex", Exec: New(Options{}), Type: "openai",
		Shell:    "exec_command",
		Input:    func(c string) map[string]any { return map[string]any{"cmd": c} },
		HostTool: "mcp__agentbox__lookup_order",
		Skills:   true,
	}.Run(t)
}

// TestDockerKept: a kept chat's turns go to one `codex app-server`
// process (see clitest.Kept).
func TestDockerKept(t *testing.T) {
	clitest.Kept{
		CLI: "codex", Exec: New(Options{}), Type: "openai", Process: "codex app-server",
		Shell: "exec_command",
		Input: func(c string) map[string]any { return map[string]any{"cmd": c} },
	}.Run(t)
}

// BenchmarkKeptFollowUp: a kept chat's follow-up against one on a new
// CLI (see clitest.BenchKept).
func BenchmarkKeptFollowUp(b *testing.B) {
	clitest.BenchKept(b, "codex", New(Options{}), "openai")
}

// TestDockerApproval: under an approval policy the turn runs on the app
// server, which asks before commands; a command allowed runs, one denied
// does not and the model reads why (see clitest.Approval).
func TestDockerApproval(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "unkept", true: "kept"}[keep], func(t *testing.T) {
			clitest.Approval{
				CLI: "codex", Exec: New(Options{}), Type: "openai", Keep: keep,
				Shell: "exec_command",
				Input: func(c string) map[string]any { return map[string]any{"cmd": c} },
			}.Run(t)
		})
	}
}
