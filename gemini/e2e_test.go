package gemini

import (
	"testing"

	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// TestDockerEndToEnd runs the real CLI in its image, networkless, against
// the scripted model through the bridge (see clitest.EndToEnd).
func TestDockerEndToEnd(t *testing.T) {
	clitest.EndToEnd{
		CLI: "gemini", Exec: New(Options{}), Type: "anthropic",
		Shell:    "run_shell_command",
		Input:    func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
		HostTool: "mcp_agentbox_lookup_order",
		Skills:   true,
	}.Run(t)
}

// TestDockerPermissionDefault: under permission_mode default the CLI,
// headless, leaves the shell out of the agent's tools; the call fails as
// a missing tool, the turn raises permission_denied and goes on.
func TestDockerPermissionDefault(t *testing.T) {
	res, _, err := clitest.Denied{
		CLI: "gemini", Exec: New(Options{}), Type: "anthropic", Mode: "default",
		Shell: "run_shell_command",
		Input: func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
	}.Run(t)
	if err != nil || res.Content == "" {
		t.Errorf("turn: %v, content %q", err, res.Content)
	}
}

// TestDockerKept: a kept chat's turns go to one `gemini --acp` process
// (see clitest.Kept).
func TestDockerKept(t *testing.T) {
	clitest.Kept{
		ResumesUnkept: true,
		CLI:           "gemini", Exec: New(Options{}), Type: "anthropic", Process: "--acp",
		Shell: "run_shell_command",
		Input: func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
	}.Run(t)
}

// BenchmarkKeptFollowUp: a kept chat's follow-up against one on a new
// CLI (see clitest.BenchKept).
func BenchmarkKeptFollowUp(b *testing.B) {
	clitest.BenchKept(b, "gemini", New(Options{}), "anthropic")
}

// TestDockerApproval: under an approval policy the Gemini CLI asks before
// its shell commands through ACP, kept or not; a call allowed runs, one
// denied does not and the model reads why (see clitest.Approval).
func TestDockerApproval(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "unkept", true: "kept"}[keep], func(t *testing.T) {
			clitest.Approval{
				CLI: "gemini", Exec: New(Options{}), Type: "anthropic", Keep: keep, ReadsUnasked: true,
				Shell: "run_shell_command",
				Input: func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
			}.Run(t)
		})
	}
}
