package gemini

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

func TestSettingsJSON(t *testing.T) {
	mcp := clitest.MCPAssistant(t, mcpFormat)
	b, err := settingsJSON(mcp, 7, "/agentbox")
	if err != nil {
		t.Fatal(err)
	}
	clitest.CheckNoMCPSecret(t, b)
	var s struct {
		Security struct {
			Auth struct {
				SelectedType string `json:"selectedType"`
			} `json:"auth"`
		} `json:"security"`
		Model struct {
			MaxSessionTurns int `json:"maxSessionTurns"`
		} `json:"model"`
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Security.Auth.SelectedType != "gemini-api-key" || s.Model.MaxSessionTurns != 7 {
		t.Errorf("settings %s", b)
	}
	if gh := s.MCPServers["gh"]; gh.Command != "gh-mcp" || !strings.HasPrefix(gh.Env["GH_TOKEN"], "${AGENTBOX_MCP_") {
		t.Errorf("gh %+v", gh)
	}
	if web := s.MCPServers["web"]; web.HTTPURL != "https://mcp.example.com/mcp" {
		t.Errorf("web %+v", web)
	}
	if db := s.MCPServers["db"]; db.Command != "/agentbox" || !strings.Contains(strings.Join(db.Args, " "), "mcp-filter --allow query") {
		t.Errorf("db %+v", db)
	}
}
