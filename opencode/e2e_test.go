package opencode

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// TestDockerEndToEnd runs the real CLI in its image, networkless, against
// the scripted model through the bridge (see clitest.EndToEnd), with its
// anthropic provider.
func TestDockerEndToEnd(t *testing.T) {
	clitest.EndToEnd{
		CLI: "opencode", Exec: New(Options{}), Type: "anthropic",
		Shell:    "bash",
		Input:    func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
		HostTool: "agentbox_lookup_order",
		Skills:   true,
	}.Run(t)
}

// TestDockerEndToEndOpenAI is the same with an openai connector: opencode's
// openai provider calls the Responses API through the bridge.
func TestDockerEndToEndOpenAI(t *testing.T) {
	clitest.EndToEnd{
		CLI: "opencode", Exec: New(Options{}), Type: "openai",
		Shell:    "bash",
		Input:    func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
		HostTool: "agentbox_lookup_order",
		Skills:   true,
	}.Run(t)
}

// TestDockerPermissionAcceptEdits: under permission_mode acceptEdits
// opencode asks before bash; headless it refuses the call and ends the
// session without an answer: the turn raises permission_denied and fails
// with an error that names the mode and what to set.
func TestDockerPermissionAcceptEdits(t *testing.T) {
	_, _, err := clitest.Denied{
		CLI: "opencode", Exec: New(Options{}), Type: "anthropic", Mode: "acceptEdits",
		Shell: "bash",
		Input: func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
	}.Run(t)
	if err == nil || !strings.Contains(err.Error(), "permission_mode acceptEdits") || !strings.Contains(err.Error(), "bypassPermissions") {
		t.Errorf("error %v; want one that names permission_mode acceptEdits and bypassPermissions", err)
	}
}

// TestDockerKept: a kept chat's turns go to one `opencode acp` process
// (see clitest.Kept). The canceled turn must settle within the grace
// period for the CLI to stay: the default 3s is less than opencode takes
// on a machine running the suite, so the scenario gives it 30s.
func TestDockerKept(t *testing.T) {
	clitest.Kept{
		CLI: "opencode", Exec: New(Options{GracePeriod: 30 * time.Second}), Type: "anthropic", Process: "opencode acp",
		Shell: "bash",
		Input: func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
	}.Run(t)
}

// BenchmarkKeptFollowUp: a kept chat's follow-up against one on a new
// CLI (see clitest.BenchKept).
func BenchmarkKeptFollowUp(b *testing.B) {
	clitest.BenchKept(b, "opencode", New(Options{}), "anthropic")
}

// TestDockerApproval: under an approval policy opencode asks before each
// tool through ACP, kept or not; a bash call allowed runs, one denied
// does not and the model reads why (see clitest.Approval).
func TestDockerApproval(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "unkept", true: "kept"}[keep], func(t *testing.T) {
			clitest.Approval{
				CLI: "opencode", Exec: New(Options{}), Type: "anthropic", Keep: keep,
				Shell: "bash",
				Input: func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} },
			}.Run(t)
		})
	}
}
