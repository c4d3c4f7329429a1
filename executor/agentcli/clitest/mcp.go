package clitest

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// MCPSecrets are the secret values of MCPAssistant's servers: no CLI
// configuration file may hold them.
var MCPSecrets = []string{"ghp_SECRET", "web_SECRET"}

// MCPAssistant has a stdio server with a secret env value (gh), a remote
// one with a secret header (web) and one behind the tool filter (db,
// tool query), resolved in format with relay /agentbox.
func MCPAssistant(t testing.TB, format agentcli.MCPFormat) *agentcli.MCPConfig {
	t.Helper()
	a := &assistant.Assistant{
		MCP: []assistant.MCPRef{{ServerID: "gh"}, {ServerID: "web"}, {ServerID: "db", Tools: []string{"query"}}},
		MCPServers: map[string]*assistant.MCPServer{
			"gh":  {Command: "gh-mcp", Args: []string{"--stdio"}, Env: map[string]string{"GH_TOKEN": "ghp_SECRET"}},
			"web": {URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer web_SECRET"}},
			"db":  {Command: "db-mcp"},
		},
	}
	mcp, err := agentcli.ResolveMCP(a, nil, func(string) (string, bool) { return "", false }, format, "/agentbox")
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
