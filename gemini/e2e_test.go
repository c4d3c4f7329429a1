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
