package opencode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// TestRejectedCall: opencode 1.18.33 under acceptEdits refuses a bash
// call (the stream's shape, with the CLI's message) and ends without a
// result: a permission_denied notice,
// and the turn fails with what to set.
func TestRejectedCall(t *testing.T) {
	lines := `{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}
{"type":"tool_use","timestamp":2,"sessionID":"ses_1","part":{"type":"tool","callID":"toolu_1","tool":"bash","state":{"status":"error","input":{"command":"echo hi > x.txt","description":"d"},"error":"The user rejected permission to use this specific tool call."}}}
`
	got, out := clitest.Notices(t, lines, "", "tool", func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
		return NewParser(emit, ParserOptions{PermissionMode: "acceptEdits"})
	})
	if fmt.Sprint(got) != "[permission_denied tool=bash]" {
		t.Errorf("notices %v", got)
	}
	if out.Err == nil || !strings.Contains(out.Err.Message, "permission_mode acceptEdits") || !strings.Contains(out.Err.Message, "bypassPermissions") {
		t.Errorf("error %+v", out.Err)
	}
}

// TestMCPFailedFromStderr: opencode's warning on stderr (--print-logs,
// as recorded) names the MCP server that did not connect.
func TestMCPFailedFromStderr(t *testing.T) {
	stderr := `timestamp=2026-11-25T01:07:04.396Z level=WARN run=fd09caaa message="server unavailable" key=broken type=local status=failed`
	lines := `{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}
{"type":"text","timestamp":2,"sessionID":"ses_1","part":{"type":"text","text":"Done."}}
{"type":"step_finish","timestamp":3,"sessionID":"ses_1","part":{"type":"step-finish","reason":"stop","tokens":{"input":1,"output":1}}}
`
	got, _ := clitest.Notices(t, lines, stderr, "server", func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
		return NewParser(emit, ParserOptions{})
	})
	if fmt.Sprint(got) != "[mcp_server_failed server=broken]" {
		t.Errorf("notices %v", got)
	}
}
