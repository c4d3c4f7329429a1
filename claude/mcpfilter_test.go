package claude

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge/bridgetest"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// TestMCPToolList: a stdio MCP server's tools list in the assistant
// definition is enforced: the model is offered only the listed tools, and
// the others never run. (A remote server's list is enforced by the
// bridge's host relay: bridge.TestRemoteMCPRelay, and with the CLIs in
// Docker pipeline.TestMCPCredentialsInDocker.)
func TestMCPToolList(t *testing.T) {
	relay := testenv.Agentbox(t)
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		callLog := filepath.Join(t.TempDir(), "calls")
		def := &assistant.MCPServer{ID: "srv", Transport: "stdio"}
		argv, env := bridgetest.StdioCommand(t)
		def.Command = argv[0]
		def.Env = map[string]string{bridgetest.CallLogEnv: callLog}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			def.Env[k] = v
		}
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{{Name: "mcp__srv__visible"}}},
			{When: &scripted.Match{AfterToolResult: "mcp__srv__visible"}, ToolCalls: []scripted.ToolCall{{Name: "mcp__srv__hidden"}}},
			{Text: "Done."},
		}})
		t.Cleanup(srv.Close)
		log := &chattest.Recorder{}
		req := newRequest(sb, srv, "chat-mcp", "use the tools", log)
		req.Assistant = &assistant.Assistant{ID: "coder",
			MCP:        []assistant.MCPRef{{ServerID: "srv", Tools: []string{"visible"}}},
			MCPServers: map[string]*assistant.MCPServer{"srv": def}}
		req.Relay = relay
		req.Timeout = 2 * time.Minute
		res, err := New(Options{Binary: cli.Bin}).Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if s := log.Starts(chat.TypeSession); len(s) != 1 || !slices.Contains(s[0].Props["tools"].([]string), "mcp__srv__visible") ||
			slices.Contains(s[0].Props["tools"].([]string), "mcp__srv__hidden") {
			t.Errorf("session %+v", s)
		}
		// 2.1.330 defers MCP tools behind its ToolSearch tool: the
		// first request names them, not in its tools.
		first := srv.TurnRequests()[0]
		if !strings.Contains(string(first.Body), "mcp__srv__visible") {
			t.Errorf("the listed tool was not offered: %v", first.ToolNames())
		}
		for _, r := range srv.Requests() {
			if strings.Contains(string(r.Body), "The hidden tool") {
				t.Errorf("the unlisted tool was offered to the model")
			}
		}
		b, _ := os.ReadFile(callLog)
		if ran := strings.Fields(string(b)); !slices.Equal(ran, []string{"visible"}) {
			t.Errorf("the server ran %v", ran)
		}
		if len(res.ToolCalls) != 2 || res.ToolCalls[0].IsError || !strings.Contains(res.ToolCalls[0].Result, "visible called") || !res.ToolCalls[1].IsError {
			t.Errorf("tool calls %+v", res.ToolCalls)
		}
	})
}
