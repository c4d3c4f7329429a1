package gemini

import (
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// A turn where the agent calls run_shell_command, which the CLI withholds
// under approval modes other than yolo: the stream's shape, with the error
// message Gemini CLI 0.61.0 gave under --approval-mode default.
const withheldLines = `{"type":"init","timestamp":"t","session_id":"s1","model":"m"}
{"type":"tool_use","timestamp":"t","tool_name":"run_shell_command","tool_id":"run_shell_command_1","parameters":{"command":"echo hi > x.txt"}}
{"type":"tool_result","timestamp":"t","tool_id":"run_shell_command_1","status":"error","output":"","error":{"type":"tool_not_registered","message":"Tool \"run_shell_command\" not found. Did you mean one of: \"update_topic\", \"grep_search\", \"invoke_agent\"?"}}
{"type":"message","timestamp":"t","role":"assistant","content":"Done.","delta":true}
{"type":"result","timestamp":"t","status":"success","stats":{"input_tokens":10,"output_tokens":1}}
`

func notices(t *testing.T, mode, stderr string) []string {
	got, _ := clitest.Notices(t, withheldLines, stderr, "tool", func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
		return NewParser(emit, ParserOptions{PermissionMode: mode})
	})
	return got
}

// TestWithheldTool: under default and acceptEdits a withheld tool's call
// raises permission_denied; under a yolo mode a missing tool is only a
// failed call.
func TestWithheldTool(t *testing.T) {
	for mode, want := range map[string]string{
		"default": "[permission_denied tool=run_shell_command]", "acceptEdits": "[permission_denied tool=run_shell_command]",
		"": "[]", "bypassPermissions": "[]",
	} {
		if got := fmt.Sprint(notices(t, mode, "")); got != want {
			t.Errorf("mode %q: notices %s, want %s", mode, got, want)
		}
	}
}

// TestMCPFailedFromLog: the CLI's debug log (recorded) names the MCP
// server that did not connect.
func TestMCPFailedFromLog(t *testing.T) {
	log := "MCP issues detected. Run /mcp list for status.\n" +
		"[2026-11-25T01:05:35.751Z] [LOG] [MCP error] Error during discovery for MCP server 'broken': spawn /nonexistent/mcp ENOENT Error: spawn /nonexistent/mcp ENOENT\n" +
		"[2026-11-25T01:05:35.752Z] [LOG] [MCP error] Error connecting to MCP server 'other': Connection closed\n"
	got, _ := clitest.Notices(t, withheldLines, log, "server", func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
		return NewParser(emit, ParserOptions{})
	})
	if fmt.Sprint(got) != "[mcp_server_failed server=broken mcp_server_failed server=other]" {
		t.Errorf("notices %v", got)
	}
}
