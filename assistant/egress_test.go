package assistant

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeApp writes files (path -> content) under a new app folder.
func writeApp(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const claudeConn = `{"type": "anthropic", "options": {"key": "$ENV.ANTHROPIC_API_KEY", "model": "claude-sonnet-4-5"}}`

func TestLoadEgress(t *testing.T) {
	t.Parallel()
	dir := writeApp(t, map[string]string{
		"connectors/claude.conn.yao": claudeConn,
		"app.jsonc":                  `{"sandbox": {"network": {"allow": ["registry.npmjs.org", "proxy.golang.org"]}}}`,
		// Inherits the app's policy.
		"assistants/inherits/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"}}`,
		// Its own policy, secrets in both forms.
		"assistants/own/package.yao": `{"connector": "claude", "sandbox": {"command": "claude",
			"network": {"allow": ["api.github.com", "*.git.test:8443", "127.0.0.1:9000"], "hosts": {"A.Git.Test": "127.0.0.1"}},
			"secrets": {
				"GITHUB_TOKEN": {"value": "$ENV.GH_TOKEN", "hosts": ["api.github.com"], "required": true},
				"GIT_TOKEN": {"value": "literal-token-value", "hosts": ["*.git.test:8443"]},
				"YAO_STYLE": "$ENV.YAO_SECRET",
				"YAO_V2": {"value": "$ENV.YAO_V2", "label": "Token", "description": "for the API", "multiline": false},
				"API_KEY": {"value": "$ENV.API_KEY", "hosts": ["api.github.com"], "headers": ["x-api-key", "Authorization"]}
			}}}`,
		// Plain strings still work, and override the app's policy.
		"assistants/hostnet/package.yao": `{"connector": "claude", "sandbox": {"command": "claude", "network": "host"}}`,
	})
	app, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := app.Assistants["inherits"].Sandbox
	if in.Network != "none" || in.Egress == nil || len(in.Egress.Allow) != 2 || in.Egress.Allow[1].String() != "proxy.golang.org" {
		t.Errorf("inherited policy: %q %+v", in.Network, in.Egress)
	}
	if h := app.Assistants["hostnet"].Sandbox; h.Network != "host" || h.Egress != nil {
		t.Errorf("host network: %q %+v", h.Network, h.Egress)
	}
	own := app.Assistants["own"].Sandbox
	if own.Network != "none" || len(own.Egress.Allow) != 3 || own.Egress.Hosts["a.git.test"].String() != "127.0.0.1" {
		t.Errorf("own policy: %+v", own.Egress)
	}
	if got := keys(own.Secrets); got != "API_KEY GITHUB_TOKEN GIT_TOKEN YAO_STYLE YAO_V2" {
		t.Fatalf("secrets: %v", got)
	}
	// Named headers, canonical; the others name none (Authorization).
	if h := own.Secrets["API_KEY"].Headers; strings.Join(h, " ") != "X-Api-Key Authorization" || own.Secrets["GITHUB_TOKEN"].Headers != nil {
		t.Errorf("headers: %v, %v", h, own.Secrets["GITHUB_TOKEN"].Headers)
	}
	gh, git, yao, v2 := own.Secrets["GITHUB_TOKEN"], own.Secrets["GIT_TOKEN"], own.Secrets["YAO_STYLE"], own.Secrets["YAO_V2"]
	if len(gh.Hosts) != 1 || gh.Hosts[0].String() != "api.github.com" || gh.AllHosts || !gh.Required {
		t.Errorf("GITHUB_TOKEN: %v", gh)
	}
	// Yao's forms: every allowed host, optional.
	if !yao.AllHosts || len(yao.Hosts) != 3 || yao.Value != "$ENV.YAO_SECRET" || yao.Required {
		t.Errorf("YAO_STYLE: %v", yao)
	}
	if !v2.AllHosts || v2.Label != "Token" || v2.Description != "for the API" || v2.Required {
		t.Errorf("YAO_V2: %+v", v2)
	}
	// A literal value is never printed or logged.
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secret", git)
	for _, s := range []string{fmt.Sprint(git), fmt.Sprintf("%+v", *own), fmt.Sprintf("%#v", git), logged.String()} {
		if strings.Contains(s, "literal-token-value") {
			t.Errorf("the value shows: %s", s)
		}
	}
	if v, ok, err := git.Resolve("GIT_TOKEN"); err != nil || !ok || v != "literal-token-value" {
		t.Errorf("literal resolve = %q, %v, %v", v, ok, err)
	}
}

func TestSecretResolve(t *testing.T) {
	t.Setenv("AB_EGRESS_SECRET", "s3cr3t-value")
	if v, ok, err := (Secret{Value: "$ENV.AB_EGRESS_SECRET"}).Resolve("TOKEN"); err != nil || !ok || v != "s3cr3t-value" {
		t.Errorf("= %q, %v, %v", v, ok, err)
	}
	// Unset: an optional secret is left out, a required one names the
	// variable.
	if v, ok, err := (Secret{Value: "$ENV.AB_EGRESS_MISSING"}).Resolve("TOKEN"); err != nil || ok || v != "" {
		t.Errorf("optional, unset: %q, %v, %v", v, ok, err)
	}
	_, _, err := Secret{Value: "$ENV.AB_EGRESS_MISSING", Required: true}.Resolve("TOKEN")
	if !errors.Is(err, ErrEnvNotSet) || !strings.Contains(err.Error(), "secret TOKEN is required: AB_EGRESS_MISSING") {
		t.Errorf("required, unset: %v", err)
	}
}

func TestLoadEgressProblems(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(appsDir, "bad-egress"))
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("want a LoadError, got %v", err)
	}
	// Every problem has a position; the golden file of agentbox check
	// (cmd/agentbox/testdata/check/bad-egress.golden) holds the messages.
	for _, p := range le.Problems {
		if p.Line == 0 {
			t.Errorf("no position: %s", p)
		}
	}
	if len(le.Problems) < 20 {
		t.Errorf("only %d problems:\n%v", len(le.Problems), le)
	}
}

// TestLoadMCPCredentials: a stdio MCP server's "$ENV.NAME" env value is a
// credential the sandbox holds only as the placeholder of the sandbox
// secret with that value; an assistant that declares none does not load.
func TestLoadMCPCredentials(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"connectors/claude.conn.yao": claudeConn,
		"mcps/github.mcp.yao":        `{"transport": "stdio", "command": "github-mcp-server", "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "$ENV.GH_TOKEN", "LOG_LEVEL": "info"}}`,
		"mcps/web.mcp.yao":           `{"transport": "http", "url": "https://mcp.example.com/mcp", "authorization_token": "$ENV.WEB_TOKEN"}`,
		"assistants/declared/package.yao": `{"connector": "claude", "mcp": {"servers": ["github", "web"]}, "sandbox": {"command": "claude",
			"network": {"allow": ["api.github.com"]}, "secrets": {"GH": {"value": "$ENV.GH_TOKEN", "hosts": ["api.github.com"]}}}}`,
		// A remote server's credentials stay on the host: nothing to declare.
		"assistants/remote/package.yao": `{"connector": "claude", "mcp": {"servers": ["web"]}, "sandbox": {"command": "claude"}}`,
	}
	app, err := Load(writeApp(t, files))
	if err != nil {
		t.Fatal(err)
	}
	a := app.Assistants["declared"]
	def := a.MCPServers["github"]
	if name, ok, err := a.MCPSecret(def, "GITHUB_PERSONAL_ACCESS_TOKEN", "$ENV.GH_TOKEN"); name != "GH" || !ok || err != nil {
		t.Errorf("MCPSecret = %q, %v, %v", name, ok, err)
	}
	if _, ok, err := a.MCPSecret(def, "LOG_LEVEL", "info"); ok || err != nil {
		t.Errorf("a plain value: %v, %v", ok, err)
	}

	files["assistants/undeclared/package.yao"] = `{"connector": "claude", "mcp": {"servers": ["github"]}, "sandbox": {"command": "claude"}}`
	_, err = Load(writeApp(t, files))
	var le *LoadError
	if !errors.As(err, &le) || len(le.Problems) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	p := le.Problems[0]
	if !strings.HasPrefix(p.File, "assistants/undeclared/") || !strings.Contains(p.Msg, "env GITHUB_PERSONAL_ACCESS_TOKEN reads $ENV.GH_TOKEN, a credential") ||
		!strings.Contains(p.Msg, `"GH_TOKEN": {"value": "$ENV.GH_TOKEN"`) {
		t.Errorf("problem %s", p)
	}
}
