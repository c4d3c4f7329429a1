package gemini

import (
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// TestGoldenACP parses the Agent Client Protocol transcripts of a kept
// CLI (testdata/gemini/acp, see its README) as the kept executor does.
func TestGoldenACP(t *testing.T) {
	clitest.ACPGolden(t, "../testdata/gemini/acp", "./gemini", *update, func(conn *acp.Conn, emit chat.EmitFunc) *acp.Parser {
		return acpParser(conn, emit, &agentcli.Plan{Skills: []string{"code-check"}}, nil)
	})
}

func TestToolName(t *testing.T) {
	for id, want := range map[string]string{
		"run_shell_command__run_shell_command_1796489515165_0": "run_shell_command",
		"read_many_files-1796489515165-3":                      "read_many_files",
		"mcp_agentbox_lookup_order_1796489515165_1":            "mcp_agentbox_lookup_order",
		"call-7": "title",
	} {
		if got := toolName(id, "title"); got != want {
			t.Errorf("toolName(%q) = %q, want %q", id, got, want)
		}
	}
}
