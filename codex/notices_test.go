package codex

import (
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// TestMCPFailedFromStderr: the warning Codex 0.169 logs for an MCP server
// that did not start (recorded, RUST_LOG as the executor sets it) raises
// mcp_server_failed once for that server.
func TestMCPFailedFromStderr(t *testing.T) {
	stderr := `2026-11-25T01:04:26.267050Z  WARN codex_mcp::rmcp_client: MCP server startup failed server_name="broken" error=No such file or directory (os error 2)
2026-11-25T01:04:26.380465Z  WARN codex_mcp::rmcp_client: failed to initialize MCP client during shutdown: MCP startup failed: No such file or directory (os error 2)
2026-11-25T01:04:26.380466Z  WARN codex_mcp::rmcp_client: MCP server startup failed server_name="broken" error=again`
	lines := `{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Done."}}
{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":1}}
`
	got, _ := clitest.Notices(t, lines, stderr, "server", func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
		return NewParser(emit, ParserOptions{})
	})
	if fmt.Sprint(got) != "[mcp_server_failed server=broken]" {
		t.Errorf("notices %v", got)
	}
}
