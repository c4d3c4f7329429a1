package opencode

import (
	"testing"

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
