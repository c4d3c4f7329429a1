package codex

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestConfigTOML(t *testing.T) {
	mcp := clitest.MCPAssistant(t, mcpFormat)
	b := configTOML(executor.Connection{Host: "http://127.0.0.1:41880", Key: "tok"}, "gpt-5", "Be \"careful\".\nAlways.", mcp, "/agentbox")
	clitest.CheckNoMCPSecret(t, b)
	var c struct {
		Model         string `toml:"model"`
		ModelProvider string `toml:"model_provider"`
		Developer     string `toml:"developer_instructions"`
		Providers     map[string]struct {
			BaseURL string `toml:"base_url"`
			EnvKey  string `toml:"env_key"`
			WireAPI string `toml:"wire_api"`
		} `toml:"model_providers"`
		MCP map[string]struct {
			Command string   `toml:"command"`
			Args    []string `toml:"args"`
			EnvVars []string `toml:"env_vars"`
			URL     string   `toml:"url"`
		} `toml:"mcp_servers"`
	}
	if _, err := toml.Decode(string(b), &c); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	p := c.Providers[providerID]
	if c.Model != "gpt-5" || c.ModelProvider != providerID || c.Developer != "Be \"careful\".\nAlways." ||
		p.BaseURL != "http://127.0.0.1:41880/v1" || p.EnvKey != keyEnv || p.WireAPI != "responses" {
		t.Errorf("config %+v", c)
	}
	gh := c.MCP["gh"]
	if gh.Command != "/bin/sh" || len(gh.EnvVars) != 1 || !strings.HasPrefix(gh.EnvVars[0], agentcli.MCPEnvPrefix) ||
		!strings.Contains(strings.Join(gh.Args, " "), "GH_TOKEN="+gh.EnvVars[0]+" -- gh-mcp --stdio") {
		t.Errorf("gh %+v", gh)
	}
	if web := c.MCP["web"]; web.URL != "https://mcp.example.com/mcp" {
		t.Errorf("web %+v", web)
	}
	if db := c.MCP["db"]; db.Command != "/agentbox" || !strings.Contains(strings.Join(db.Args, " "), "mcp-filter --allow query") {
		t.Errorf("db %+v", db)
	}
	if mcp.Env[gh.EnvVars[0]] != clitest.MCPSecrets[0] {
		t.Errorf("env %v", mcp.Env)
	}
}

func TestPermissionModeRefused(t *testing.T) {
	req := &executor.Request{Arguments: chat.Arguments{PermissionMode: "ask"}}
	_, err := (cli{}).Prepare(t.Context(), &agentcli.Prepared{Request: req})
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrInvalidRequest || !strings.Contains(ce.Message, `permission_mode "ask"`) {
		t.Fatalf("err = %v", err)
	}
	req.Arguments.PermissionMode = "plan"
	if _, err := (cli{}).Prepare(t.Context(), &agentcli.Prepared{Request: req}); err == nil || !strings.Contains(err.Error(), "read-only sandbox cannot run") {
		t.Fatalf("plan: %v", err)
	}
}

// TestImageArgs: the input's image files go with the prompt as --image
// when the model takes images, and not otherwise.
func TestImageArgs(t *testing.T) {
	req := &executor.Request{Images: []string{".attachments/c1/image-aa.png", ".attachments/c1/image-bb.jpg"}}
	if got := imageArgs(req); got != nil {
		t.Errorf("without vision: %q", got)
	}
	req.Vision = true
	want := []string{"--image", "/workspace/.attachments/c1/image-aa.png", "--image", "/workspace/.attachments/c1/image-bb.jpg"}
	if got := imageArgs(req); !slices.Equal(got, want) {
		t.Errorf("imageArgs = %q, want %q", got, want)
	}
}

// The execution policy rules of the approval rules make the real CLI ask
// before the commands they name, the ones it knows only read too.
func TestExecRules(t *testing.T) {
	rules := execRules([]string{"Bash(cat:*)", "Bash(git push:*)", "Bash(ls -la *)", "Bash", "Bash(*secret*)", "Edit(src/**)", "Bash(cat:*)"})
	want := "prefix_rule(pattern = [\"cat\"], decision = \"prompt\")\n" +
		"prefix_rule(pattern = [\"git\",\"push\"], decision = \"prompt\")\n" +
		"prefix_rule(pattern = [\"ls\",\"-la\"], decision = \"prompt\")\n"
	if string(rules) != want {
		t.Fatalf("rules\n%s\nwant\n%s", rules, want)
	}
	if execRules([]string{"Bash", "Write"}) != nil {
		t.Error("rules of no command words")
	}
	bin := testenv.CLIBin(t, "codex")
	f := filepath.Join(t.TempDir(), "agentbox.rules")
	if err := os.WriteFile(f, rules, 0o600); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{"cat secrets/key": "prompt", "git push origin main": "prompt", "ls -la /": "prompt", "git status": ""} {
		out, err := exec.Command(bin, append([]string{"execpolicy", "check", "--rules", f}, strings.Fields(cmd)...)...).Output()
		if err != nil {
			t.Fatalf("codex execpolicy check %s: %v", cmd, err)
		}
		if got := gjson.GetBytes(out, "decision").String(); got != want {
			t.Errorf("%s: decision %q, want %q (%s)", cmd, got, want, out)
		}
	}
}
