package clitest

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// MCPSecrets are the env values of MCPAssistant's servers (a placeholder
// the pipeline gave for a credential): no CLI configuration file holds
// them, only the CLI's environment.
var MCPSecrets = []string{"agentbox-placeholder-GH_TOKEN-0f1e"}

// MCPAssistant has a stdio server with a placeholder in its env (gh), a
// remote one (web: its credentials stay with the bridge's host relay, so it
// has no headers here) and one behind the tool filter (db, tool query),
// resolved in format with relay /agentbox.
func MCPAssistant(t testing.TB, format agentcli.MCPFormat) *agentcli.MCPConfig {
	t.Helper()
	a := &assistant.Assistant{
		MCP: []assistant.MCPRef{{ServerID: "gh"}, {ServerID: "web"}, {ServerID: "db", Tools: []string{"query"}}},
		MCPServers: map[string]*assistant.MCPServer{
			"gh":  {Command: "gh-mcp", Args: []string{"--stdio"}, Env: map[string]string{"GH_TOKEN": MCPSecrets[0]}},
			"web": {URL: "https://mcp.example.com/mcp"},
			"db":  {Command: "db-mcp"},
		},
	}
	mcp, err := agentcli.ResolveMCP(a, nil, format, "/agentbox", nil)
	if err != nil {
		t.Fatal(err)
	}
	return mcp
}

// CheckNoMCPSecret fails t when config holds a secret of MCPSecrets.
func CheckNoMCPSecret(t testing.TB, config []byte) {
	t.Helper()
	for _, s := range MCPSecrets {
		if strings.Contains(string(config), s) {
			t.Errorf("configuration holds %s:\n%s", s, config)
		}
	}
}
