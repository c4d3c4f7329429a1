package opencode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

func TestConfigJSON(t *testing.T) {
	mcp := clitest.MCPAssistant(t, mcpFormat)
	b, err := configJSON("openai", "http://127.0.0.1:41880", "gpt-5", "/workspace/sys.md", modes["acceptEdits"], 9, mcp, "/agentbox")
	if err != nil {
		t.Fatal(err)
	}
	clitest.CheckNoMCPSecret(t, b)
	var c struct {
		Provider map[string]struct {
			Options map[string]string `json:"options"`
		} `json:"provider"`
		Model        string   `json:"model"`
		Instructions []string `json:"instructions"`
		Agent        map[string]struct {
			Steps int `json:"steps"`
		} `json:"agent"`
		Permission map[string]string `json:"permission"`
		MCP        map[string]struct {
			Type        string            `json:"type"`
			Command     []string          `json:"command"`
			Environment map[string]string `json:"environment"`
			URL         string            `json:"url"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	o := c.Provider["openai"].Options
	if o["baseURL"] != "http://127.0.0.1:41880/v1" || o["apiKey"] != "{env:"+keyEnv+"}" || c.Model != "openai/gpt-5" ||
		c.Agent["build"].Steps != 9 || c.Permission["edit"] != "allow" || c.Instructions[0] != "/workspace/sys.md" {
		t.Errorf("config %s", b)
	}
	if gh := c.MCP["gh"]; gh.Type != "local" || strings.Join(gh.Command, " ") != "gh-mcp --stdio" || !strings.HasPrefix(gh.Environment["GH_TOKEN"], "{env:AGENTBOX_MCP_") {
		t.Errorf("gh %+v", gh)
	}
	if web := c.MCP["web"]; web.Type != "remote" || web.URL != "https://mcp.example.com/mcp" {
		t.Errorf("web %+v", web)
	}
	if db := c.MCP["db"]; db.Command[0] != "/agentbox" || !strings.Contains(strings.Join(db.Command, " "), "mcp-filter --allow query") {
		t.Errorf("db %+v", db)
	}
}
