package jsapi

import (
	"strings"
	"testing"
)

func TestMCPCallErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ stmt, code, msg string }{
		{`ctx.mcp.ListTools(1)`, CodeInvalidArgument, "mcp.ListTools: want the MCP server id (a string), got a number"},
		{`ctx.mcp.CallTool("s")`, CodeInvalidArgument, "mcp.CallTool: want the tool's name (a string), got undefined"},
		{`ctx.mcp.CallTool("s", "t", 5)`, CodeInvalidArgument, "mcp.CallTool: arguments: want an object, got a number"},
		{`ctx.mcp.CallTools("s", [{tool: "t"}])`, CodeInvalidArgument, `mcp.CallTools: tools[0]: unknown field "tool" (want name, arguments)`},
		{`ctx.mcp.All([{mcp: "s"}])`, CodeInvalidArgument, "mcp.All: requests[0]: want tool (a string), got undefined"},
		{`ctx.mcp.ListPrompts("s")`, CodeMCP, "mcp.ListPrompts: the assistant's MCP servers are not available here"},
	}
	for _, tc := range cases {
		t.Run(tc.stmt, func(t *testing.T) {
			t.Parallel()
			hc := &Context{}
			if tc.code == CodeInvalidArgument {
				hc.MCP = noMCP{}
			}
			got := run(t, catchJS(tc.stmt), hc, nil).(map[string]any)
			if got["code"] != tc.code || !strings.Contains(got["message"].(string), tc.msg) {
				t.Fatalf("got %v, want %s %q", got, tc.code, tc.msg)
			}
		})
	}
}

// noMCP is an MCPServers that is never reached (argument errors come first).
type noMCP struct{ MCPServers }
