package assistant

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/images"
)

const yaoApp = "../testdata/apps/yao-app"

// TestLoadYaoApp: a Yao app folder loads with Yao's meaning: nested ids,
// Yao's connector and MCP ids, roles, proxy as host, metadata, prompts
// and presets, locales, and both sandbox forms.
func TestLoadYaoApp(t *testing.T) {
	t.Parallel()
	app, err := Load(yaoApp)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(app.Assistants); got != "builder chat coder team.reviewer team.writer" {
		t.Errorf("assistants: %s", got)
	}
	if got := keys(app.Connectors); got != "anthropic.claude local.ollama openai.deepseek openai.gpt-4o" {
		t.Errorf("connectors: %s", got)
	}
	if got := keys(app.Skipped); got != "db.cache db.main" || app.Skipped["db.main"] != "mysql" {
		t.Errorf("skipped: %v", app.Skipped)
	}
	if got := keys(app.MCPServers); got != "echo search tools.files" {
		t.Errorf("app MCP servers: %s", got)
	}
	if app.Agent.Roles["default"] != "openai.gpt-4o" || app.Agent.DefaultAssistant != "chat" || len(app.Agent.GlobalPrompts) != 1 {
		t.Errorf("agent settings: %+v", app.Agent)
	}
	if len(app.Warnings) < 40 {
		t.Errorf("only %d warnings", len(app.Warnings))
	}

	// Connectors: proxy is the host; options that are not request fields
	// never become request fields.
	ds := app.Connectors["openai.deepseek"].Options
	if ds.Host != "https://api.deepseek.example" || ds.HostFrom != "proxy" || ds.Extra != nil {
		t.Errorf("deepseek: %+v", ds)
	}
	gpt := app.Connectors["openai.gpt-4o"].Options
	if fmt.Sprint(gpt.Extra) != "map[reasoning_effort:low temperature:0.3]" || gpt.Capabilities["tool_calls"] != true || gpt.HostFrom != "" {
		t.Errorf("gpt-4o: extra %v caps %v", gpt.Extra, gpt.Capabilities)
	}
	cl := app.Connectors["anthropic.claude"]
	if cl.Options.Host != "https://gateway.example/anthropic/" || cl.Options.AuthMode != "x-api-key" || cl.Options.APIVersion != "2023-06-01" ||
		cl.Options.Params["max_tokens"].Max == nil || cl.Label != "Claude" {
		t.Errorf("claude: %+v", cl)
	}

	chatA := app.Assistants["chat"]
	if chatA.Connector != "openai.gpt-4o" || chatA.ConnectorRaw != "" {
		t.Errorf("chat connector %q (raw %q)", chatA.Connector, chatA.ConnectorRaw)
	}
	m := chatA.Meta
	if m.Type != "assistant" || m.Sort != 2 || !m.Public || !m.Mentionable || m.Share != "everyone" || m.Capabilities != "" ||
		!slices.Equal(m.Tags, []string{"Chat", "Demo"}) || !slices.Equal(m.Modes, []string{"chat", "task"}) || m.CreatedAt != "2025-01-31T12:00:00Z" {
		t.Errorf("chat metadata: %+v", m)
	}
	if name, desc, ph := chatA.Localized("zh-CN"); name != "聊天" || desc != "回答问题。" || ph.Title != "新对话" || ph.Prompts[0] != "你能做什么？" {
		t.Errorf("zh-CN: %q %q %+v", name, desc, ph)
	}
	if name, _, _ := chatA.Localized(""); name != "Chat" {
		t.Errorf("default locale name %q (en-us serves en)", name)
	}
	p := chatA.Prompts
	if len(p) != 4 || p[0].Name != "guide" || !strings.Contains(p[0].Content, "$CTX.ASSISTANT_NAME") ||
		p[1].Content != "# Style\nBe friendly.\n" || p[2].Content != "" || p[3].Role != chat.RoleDeveloper {
		t.Errorf("prompts: %+v", p)
	}
	if got := keys(chatA.PromptPresets); got != "chat.friendly short" {
		t.Errorf("presets: %s", got)
	}
	if chatA.ConnectorOptions == nil || !*chatA.ConnectorOptions.Optional || len(chatA.MCP) != 2 || chatA.MCP[0].ServerID != "search" ||
		chatA.MCPServers["search"].Headers["Authorization"] != "$ENV.SEARCH_TOKEN" || chatA.MCP[1].ServerID != "echo" {
		t.Errorf("chat connector_options %+v, mcp %+v", chatA.ConnectorOptions, chatA.MCP)
	}

	writer := app.Assistants["team.writer"]
	if writer.Connector != "openai.gpt-4o" || writer.ConnectorRaw != "use::light" || writer.Description != "" {
		t.Errorf("writer: %+v", writer)
	}
	if rv := app.Assistants["team.reviewer"]; rv.ConnectorEnv != "AGENTBOX_YAO_FIXTURE_CONNECTOR" || rv.Connector != "" || len(rv.MCP) != 1 ||
		rv.OwnMCPServers["agents.team.reviewer.checks"] == nil || rv.ToolLoop.MaxTurns != DefaultMaxToolTurns {
		t.Errorf("reviewer: %+v", rv)
	}
	// Process servers: their tools with the mapping folder's schemas
	// (an app server's by its id, an assistant's by its path under mcps/),
	// and the samples Yao reads by the server's id.
	echo := app.MCPServers["echo"].Process
	if ping, ok := echo.Tool("ping"); !ok || ping.Process != "scripts.echo.Ping" || ping.Description != "Answer pong, to check that the server is there" ||
		!strings.Contains(string(ping.InputSchema), `"minimum":1`) || len(ping.Samples) != 1 || ping.Samples[0].Metadata["description"] != "a single pong" ||
		ping.File != "mcps/mapping/echo/schemes/ping.in.yao" {
		t.Errorf("echo ping: %+v", ping)
	}
	checks := app.Assistants["team.reviewer"].OwnMCPServers["agents.team.reviewer.checks"].Process
	if lint, ok := checks.Tool("lint"); !ok || lint.Process != "agents.team.reviewer.checks.Lint" || lint.File != "assistants/team/reviewer/mcps/mapping/checks/schemes/lint.in.yao" {
		t.Errorf("reviewer lint: %+v", lint)
	}

	sb := app.Assistants["coder"].Sandbox
	if sb.Image != "agentbox/sandbox-claude:latest" || sb.MemoryBytes != 2<<30 || sb.CPUs != 1.5 || sb.Timeout != 5*time.Minute ||
		!slices.Equal(sb.Arguments.AllowedTools, []string{"Bash", "Read", "Write"}) || !slices.Equal(sb.Arguments.DisallowedTools, []string{"WebFetch"}) ||
		sb.Secrets["GITHUB_TOKEN"].Value != "$ENV.GITHUB_TOKEN" || sb.File != "assistants/coder/package.yao" {
		t.Errorf("coder sandbox: %+v", sb)
	}
	if c := app.Assistants["coder"]; len(c.MCP) != 1 || c.MCP[0].ServerID != "tools.files" || c.MCPServers["tools.files"].Command != "npx" ||
		!slices.Equal(c.MCPServers["tools.files"].Args, []string{"-y", "@modelcontextprotocol/server-filesystem", "/workspace"}) {
		t.Errorf("coder mcp: %+v %+v", c.MCP, c.MCPServers)
	}
	v2 := app.Assistants["builder"].Sandbox
	if v2.Version != "2.0" || v2.Command != "claude" || v2.MemoryBytes != 2<<30 || v2.CPUs != 2 || v2.Arguments.MaxTurns != 8 ||
		v2.Environment["NODE_ENV"] != "test" || v2.Secrets["NPM_TOKEN"].Value != "$ENV.NPM_TOKEN" || len(v2.Prepare) != 3 ||
		v2.Prepare[0].Action != "copy" || !v2.Prepare[1].Once || !v2.Prepare[2].IgnoreError || v2.File != "assistants/builder/sandbox.yao" {
		t.Errorf("builder sandbox: %+v", v2)
	}
	// lifecycle session with idle_timeout 15m: the chat is kept 15m.
	if v2.KeepAlive != 15*time.Minute {
		t.Errorf("builder keep_alive %s, want 15m (lifecycle session, idle_timeout)", v2.KeepAlive)
	}
}

// TestYaoLifecycle: a v2 sandbox's lifecycle session keeps the chat's
// sandbox and CLI between requests (keep_alive): idle_timeout long, or
// DefaultSessionKeepAlive; oneshot does not; a bad idle_timeout is an error.
func TestYaoLifecycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sandbox string
		want    time.Duration
		err     string
	}{
		{`{"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session"}`, DefaultSessionKeepAlive, ""},
		{`{"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session", "idle_timeout": "90s"}`, 90 * time.Second, ""},
		{`{"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "oneshot", "idle_timeout": "90s"}`, 0, ""},
		{`{"version": "2.0", "runner": {"name": "claude"}}`, 0, ""},
		{`{"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session", "idle_timeout": "1s"}`, 0, "idle_timeout"},
	} {
		app, err := loadFiles(t, map[string]string{"assistants/a/sandbox.yao": tc.sandbox})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want one naming %s", tc.sandbox, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.sandbox, err)
		}
		if got := app.Assistants["a"].Sandbox.KeepAlive; got != tc.want {
			t.Errorf("%s: keep_alive %s, want %s", tc.sandbox, got, tc.want)
		}
	}
}

// TestYaoRunner: Yao's yao runner (yaocode, its default) loads as
// CommandYao: the sandbox is the hooks', in the base image (Yao's own
// images are replaced as for any runner), and no CLI runs.
func TestYaoRunner(t *testing.T) {
	t.Parallel()
	for _, sb := range []string{
		`{"version": "2.0"}`,
		`{"version": "2.0", "runner": {"name": "yao"}, "computer": {"image": "yaoapp/tai-sandbox-claude:latest", "memory": "2GB", "cpus": 1, "work_dir": "/workspace"}, "lifecycle": "oneshot"}`,
		`{"version": "2.0", "runner": {"name": "yaocode"}}`,
	} {
		app, err := loadFiles(t, map[string]string{"assistants/a/sandbox.yao": sb, "assistants/a/package.yao": `{"connector": "c.x"}`})
		if err != nil {
			t.Fatalf("%s: %v", sb, err)
		}
		if s := app.Assistants["a"].Sandbox; s.Command != CommandYao || s.Image != images.Base {
			t.Errorf("%s: command %q image %q, want %q in %s", sb, s.Command, s.Image, CommandYao, images.Base)
		}
	}
}

// TestYaoRefusals: what agentbox cannot honour and Yao would not load
// either, or that would change meaning silently, is an error.
func TestYaoRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"runner agentbox lacks", map[string]string{"assistants/a/sandbox.yao": `{"version": "2.0", "runner": {"name": "aider"}}`},
			`assistants/a/sandbox.yao:1:39: runner "aider" is not available in agentbox`},
		{"sandbox.yao version", map[string]string{"assistants/a/sandbox.yao": `{"version": "1.0", "runner": {"name": "claude"}}`},
			`version must be "2.0" in sandbox.yao`},
		{"two sandboxes", map[string]string{"assistants/a/sandbox.yao": `{"version": "2.0", "runner": {"name": "claude"}}`,
			"assistants/a/package.yao": `{"connector": "c.x", "sandbox": {"command": "claude"}}`}, "two sandbox definitions"},
		{"two sandbox files", map[string]string{"assistants/a/sandbox.yao": `{"version": "2.0", "runner": {"name": "claude"}}`,
			"assistants/a/sandbox.json": `{"version": "2.0", "runner": {"name": "claude"}}`}, "both sandbox.yao and sandbox.json"},
		{"sandbox.jsonc is read", map[string]string{"assistants/a/sandbox.jsonc": `{"version": "2.0", "runner": {"name": "pi"}}`},
			`assistants/a/sandbox.jsonc:1:39: runner "pi" is not available`},
		{"v2 field in v1", map[string]string{"assistants/a/package.yao": `{"connector": "c.x", "sandbox": {"command": "claude", "lifecycle": "session"}}`},
			`sandbox.lifecycle is a Yao v2 field`},
		{"v1 field in v2", map[string]string{"assistants/a/package.yao": `{"connector": "c.x", "sandbox": {"version": "2.0", "runner": {"name": "claude"}, "command": "claude"}}`},
			`sandbox.command is a Yao v1 field`},
		{"read-only mount", map[string]string{"assistants/a/sandbox.yao": `{"version": "2.0", "runner": {"name": "claude"}, "computer": {"mount_mode": "ro"}}`},
			`mount_mode ro`},
		{"process prepare", map[string]string{"assistants/a/sandbox.yao": `{"version": "2.0", "runner": {"name": "claude"}, "prepare": [{"action": "process", "name": "scripts.x"}]}`},
			`action process is not supported`},
		{"copy outside", map[string]string{"assistants/a/sandbox.yao": `{"version": "2.0", "runner": {"name": "claude"}, "prepare": [{"action": "copy", "src": "package.yao", "dst": "/etc/x"}]}`},
			`is outside the workspace`},
		{"secret without an allow list", map[string]string{"assistants/a/package.yao": `{"connector": "c.x", "sandbox": {"command": "claude", "secrets": {"T": "$ENV.T"}}}`},
			`sandbox.secrets need sandbox.network {"allow": [HOSTS]}`},
		{"reserved environment name", map[string]string{"assistants/a/sandbox.yao": `{"version": "2.0", "runner": {"name": "claude"}, "environment": {"HTTPS_PROXY": "x"}}`},
			`environment.HTTPS_PROXY: the sandbox's own settings use HTTPS_PROXY`},
		{"unknown package field", map[string]string{"assistants/a/package.yao": `{"connector": "c.x", "placehodler": {}}`},
			`unknown field "placehodler" (did you mean "placeholder"?)`},
		{"string placeholder", map[string]string{"assistants/a/package.yao": `{"connector": "c.x", "placeholder": "hi"}`},
			`placeholder: want an object, got a string`},
		{"numeric created_at", map[string]string{"assistants/a/package.yao": `{"connector": "c.x", "created_at": 1700000000}`},
			`created_at: want a date string`},
		{"unknown role", map[string]string{"assistants/a/package.yao": `{"connector": "use::fast"}`},
			`connector: unknown role "fast"`},
		{"role without agent.yml", map[string]string{"assistants/a/package.yao": `{"connector": "use::light"}`},
			`agent/agent.yml has no system.light and no system.default`},
		{"database connector", map[string]string{"assistants/a/package.yao": `{"connector": "c.db"}`, "connectors/c/db.conn.yao": `{"type": "sqlite3", "options": {"file": "x"}}`},
			`connector "c.db" is a sqlite3 connector, not a chat model`},
		{"unknown connector type", map[string]string{"connectors/c/es.conn.yao": `{"type": "es", "options": {}}`},
			`unknown connector type "es"`},
		{"unknown connector option", map[string]string{"connectors/c/y.conn.yao": `{"type": "openai", "options": {"model": "m", "hots": "https://x"}}`},
			`unknown option "hots" (did you mean "host"?)`},
		{"request field in options", map[string]string{"connectors/c/y.conn.yao": `{"type": "openai", "options": {"model": "m", "top_p": 0.5}}`},
			`unknown option "top_p" (a request field: put it in extra_body`},
		{"proxy not a URL", map[string]string{"connectors/c/y.conn.yao": `{"type": "openai", "options": {"model": "m", "proxy": "socks5://h:1"}}`},
			`options.proxy: want an http(s) URL`},
		{"bad auth_mode", map[string]string{"connectors/c/y.conn.yao": `{"type": "openai", "auth_mode": "basic", "options": {"model": "m"}}`},
			`auth_mode: unknown mode "basic"`},
		{"mcp arguments and args", map[string]string{"mcps/m.mcp.yao": `{"transport": "stdio", "command": "x", "arguments": ["a"], "args": ["b"]}`},
			`both arguments and args`},
		{"mcp unknown transport", map[string]string{"mcps/m.mcp.yao": `{"transport": "ws", "url": "ws://x"}`},
			`unknown transport "ws" (known: stdio, http, sse, process)`},
		{"mcp server form", map[string]string{"assistants/a/package.yao": `{"connector": "c.x", "mcp": {"servers": [{"a": 1, "b": 2}]}}`},
			`exactly one key`},
		{"asset outside", map[string]string{"assistants/a/prompts.yml": "- role: system\n  content: @assets/../package.yao.md\n"},
			`@assets/../package.yao.md is outside the assets folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadFiles(t, tt.files)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSpecName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"gpt-4o.conn.yao", "gpt-4o"},
		{"openai/gpt-3.5.conn.yao", "openai.gpt-3_5"},
		{"a.b/c/d.http.json", "a_b.c.d"},
		{"bar2.0.http.jsonc", "bar2_0"},
		{"x.conn.txt", "x_conn"},
		{"old.yao", ""},
	} {
		if got, _ := specName(tt.in); got != tt.want {
			t.Errorf("specName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	a := &Assistant{Locales: map[string]map[string]string{"en": {"name": "Bot", "chat.title": "Hi"}, "zh-cn": {"name": "机器人"}, "cn": {"name": "机器人"}}}
	for _, tt := range []struct{ locale, in, want string }{
		{"", "{{name}}", "Bot"}, {"en-GB", "{{ name }}", "Bot"}, {"zh-CN", "{{name}}", "机器人"},
		{"en", "name", "Bot"}, {"en", "Say {{chat.title}} to {{name}}", "Say Hi to Bot"}, {"en", "{{missing}}", "{{missing}}"},
		{"fr", "{{name}}", "{{name}}"},
	} {
		if got := a.Translate(tt.locale, tt.in); got != tt.want {
			t.Errorf("Translate(%q, %q) = %q, want %q", tt.locale, tt.in, got, tt.want)
		}
	}
}

func TestExpandAssetsPositions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "assets", "a.md"), []byte("one\ntwo"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "- role: system\n  content: @assets/a.md\n- role: robot\n  content: x\n"
	if err := os.WriteFile(filepath.Join(dir, "prompts.yml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	l := &loader{root: dir}
	l.loadPrompts(filepath.Join(dir, "prompts.yml"), dir)
	if len(l.probs) != 1 || l.probs[0].Line != 3 || !strings.Contains(l.probs[0].Msg, `unknown role "robot"`) {
		t.Fatalf("problems: %v (the bad role is on the file's line 3)", l.probs)
	}
}

// TestSymlinkedFolders: connectors/ and an assistant folder may be
// symlinks; files are named under the app folder.
func TestSymlinkedFolders(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	if err := os.MkdirAll(filepath.Join(shared, "conns", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "conns", "c", "x.conn.yao"), []byte(`{"type": "anthropic", "options": {"model": "m", "key": "k", "LANG": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(shared, "asst"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "asst", "package.yao"), []byte(`{"connector": "c.x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	app := t.TempDir()
	if err := os.Symlink(filepath.Join(shared, "conns"), filepath.Join(app, "connectors")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(app, "assistants", "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(shared, "asst"), filepath.Join(app, "assistants", "team", "a")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(app)
	var le *LoadError
	if !errors.As(err, &le) || len(le.Problems) != 2 || le.Problems[1].File != "connectors/c/x.conn.yao" {
		t.Fatalf("err = %v (the connector's problem is named under the app)", err)
	}
	// Open serves what loads: the assistant fails, named under the app.
	a, err := Open(app)
	if err != nil {
		t.Fatal(err)
	}
	if f := a.Failed["team.a"]; f == nil || f.Dir != "assistants/team/a" || f.Problems[0].File != "assistants/team/a/package.yao" {
		t.Fatalf("failed = %+v", a.Failed)
	}
}

// loadFiles loads an app of files (path: content) with a connector c.x
// and, unless given, assistants/a/package.yao using it.
func loadFiles(t *testing.T, given map[string]string) (*App, error) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"connectors/c/x.conn.yao": `{"type": "anthropic", "options": {"model": "m", "key": "k"}}`}
	if _, ok := given["assistants/a/package.yao"]; !ok {
		files["assistants/a/package.yao"] = `{"connector": "c.x"}`
	}
	for k, v := range given {
		files[k] = v
	}
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Load(dir)
}
