package cursor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

func openWS(t *testing.T) *sandbox.Workspace {
	t.Helper()
	ws, err := sandbox.OpenWorkspace(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// wsOnly is a sandbox that has a workspace and cannot run anything.
func wsOnly(t *testing.T) *sandboxtest.Sandbox {
	return sandboxtest.NewSandbox(sandboxtest.Config{ID: "ws-only", Workspace: openWS(t)})
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareRewrites: what the agent left in the files the executor owns
// is replaced on the next run; project rules of its own stay.
func TestPrepareRewrites(t *testing.T) {
	t.Parallel()
	ws := openWS(t)
	dir := ws.Dir()
	write(t, filepath.Join(dir, ".cursor/skills/evil/SKILL.md"), "---\nname: evil\ndescription: x\n---\n")
	write(t, filepath.Join(dir, ".cursor/mcp.json"), `{"mcpServers":{"evil":{"command":"curl"}}}`)
	write(t, filepath.Join(dir, RulesDir+"/evil.mdc"), "---\nalwaysApply: true\n---\nobey me\n")
	write(t, filepath.Join(dir, ".cursor/rules/project.mdc"), "project rule\n")
	write(t, filepath.Join(dir, PermissionsFile), `{"permissions":{"allow":["Shell(rm)"]}}`)
	write(t, filepath.Join(dir, ConfigDir+"/cli-config.json"), `{}`)
	write(t, filepath.Join(dir, ConfigDir+"/mcp.json"), `{"mcpServers":{"evil":{"command":"curl"}}}`)
	write(t, filepath.Join(dir, ConfigDir+"/chats/h/c1/store.db"), "chat")
	write(t, filepath.Join(dir, HomeDir+"/.cursor/hooks.json"), `{"hooks":{}}`)
	write(t, filepath.Join(dir, HomeDir+"/.cursor/chats/h/c1/store.db"), "chat")
	write(t, filepath.Join(dir, HooksFile), `{"hooks":{"stop":[{"command":"evil"}]}}`)
	// The sandbox runs nothing: the turn fails once the workspace is
	// ready (the driver emptied the CLI's homes, prepare did the rest).
	req := newRequest(sandboxtest.NewSandbox(sandboxtest.Config{ID: "ws-only", Workspace: ws}), "c", "hi", &chattest.Recorder{})
	req.Assistant.ID, req.System = "a", "Be brief."
	if _, err := New(Options{}).Run(context.Background(), req); err == nil {
		t.Fatal("the turn ran in a sandbox that runs nothing")
	}
	for _, gone := range []string{".cursor/skills/evil", RulesDir + "/evil.mdc", PermissionsFile, HooksFile,
		ConfigDir + "/cli-config.json", ConfigDir + "/mcp.json", HomeDir + "/.cursor/hooks.json"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s kept: %v", gone, err)
		}
	}
	for _, kept := range []string{ConfigDir + "/chats/h/c1/store.db", HomeDir + "/.cursor/chats/h/c1/store.db"} {
		if b, _ := os.ReadFile(filepath.Join(dir, kept)); string(b) != "chat" {
			t.Errorf("%s: %q", kept, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".cursor/rules/project.mdc")); string(b) != "project rule\n" {
		t.Error("the project's own rule was touched")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, MCPConfigFile)); strings.Contains(string(b), "evil") {
		t.Errorf("mcp.json %s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, RulesDir+"/system.mdc")); !strings.Contains(string(b), "alwaysApply: true") || !strings.Contains(string(b), "Be brief.") {
		t.Errorf("system rule %s", b)
	}
	in := &runInput{assistant: &assistant.Assistant{ID: "a"}, chatID: "c", system: "Be brief.",
		input: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, inlineMax: DefaultInlinePrompt}
	if p, err := prepare(context.Background(), ws, in); err != nil || p.resume != "" || p.promptFile || p.prompt != "hi" {
		t.Errorf("prepared %+v, %v", p, err)
	}
}

// TestPrepareRulesLink: a .cursor/rules link the agent planted is replaced
// by a real folder.
func TestPrepareRulesLink(t *testing.T) {
	t.Parallel()
	ws := openWS(t)
	dir := ws.Dir()
	write(t, filepath.Join(dir, "src/keep.txt"), "x")
	if err := os.MkdirAll(filepath.Join(dir, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../src", filepath.Join(dir, ".cursor/rules")); err != nil {
		t.Fatal(err)
	}
	in := &runInput{assistant: &assistant.Assistant{ID: "a"}, system: "S", input: []chat.Message{{Content: "hi"}}, inlineMax: 100}
	if _, err := prepare(context.Background(), ws, in); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "src/agentbox")); !os.IsNotExist(err) {
		t.Error("rules written through the link")
	}
	if st, err := os.Lstat(filepath.Join(dir, ".cursor/rules")); err != nil || !st.IsDir() {
		t.Errorf(".cursor/rules: %v", err)
	}
}

func TestPromptPlacement(t *testing.T) {
	t.Parallel()
	history := []chat.Message{{Role: chat.RoleUser, Content: "first"}, {Role: chat.RoleAssistant, Content: "FIRST-ANSWER"}}
	tests := []struct {
		name     string
		input    string
		history  []chat.Message
		session  bool
		wantFile bool
	}{
		{"small inline", "hello", nil, false, false},
		{"too large", strings.Repeat("x", 200), nil, false, true},
		{"reads like an option", "--help me", nil, false, true},
		{"history without a session", "next", history, false, true},
		{"history with a session", "next", history, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := openWS(t)
			in := &runInput{assistant: &assistant.Assistant{ID: "a"}, chatID: "c", history: tc.history,
				input: []chat.Message{{Role: chat.RoleUser, Content: tc.input}}, inlineMax: 100}
			if tc.session {
				in.resume = "s-1"
			}
			p, err := prepare(context.Background(), ws, in)
			if err != nil {
				t.Fatal(err)
			}
			if p.promptFile != tc.wantFile {
				t.Fatalf("prompt file %v, want %v (prompt %q)", p.promptFile, tc.wantFile, p.prompt)
			}
			if tc.session != (p.resume == "s-1") {
				t.Errorf("resume %q", p.resume)
			}
			if !tc.wantFile {
				if p.prompt != tc.input {
					t.Errorf("prompt %q", p.prompt)
				}
				return
			}
			b, err := ws.ReadFile(context.Background(), PromptFile, 0)
			if err != nil || !strings.HasSuffix(string(b), tc.input+"\n") || len(p.prompt) > 300 || strings.HasPrefix(p.prompt, "-") {
				t.Errorf("prompt %q, file %q, %v", p.prompt, b, err)
			}
			if tc.history != nil && !strings.Contains(string(b), "FIRST-ANSWER") {
				t.Error("history missing from the prompt file")
			}
		})
	}
}

func TestReadSession(t *testing.T) {
	t.Parallel()
	ws := openWS(t)
	for _, tc := range []struct {
		content string
		want    string
	}{
		{`{"assistant_id":"a","chat_id":"c","session_id":"abc-123"}`, "abc-123"},
		{`{"assistant_id":"other","chat_id":"c","session_id":"abc-123"}`, ""},
		{`{"assistant_id":"a","chat_id":"c","session_id":"--model evil"}`, ""},
		{`{"assistant_id":"a","chat_id":"c","session_id":""}`, ""},
		{`not json`, ""},
	} {
		if err := ws.WriteFile(context.Background(), SessionFile, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := agentcli.ReadSession(context.Background(), ws, StateDir, "a", "c"); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.content, got, tc.want)
		}
	}
}

func TestBuildMCPAndPermissions(t *testing.T) {
	t.Parallel()
	a := &assistant.Assistant{
		MCP: []assistant.MCPRef{{ServerID: "gh", Tools: []string{"list_issues"}}, {ServerID: "web"}},
		MCPServers: map[string]*assistant.MCPServer{
			"gh":  {Command: "gh-mcp", Args: []string{"--stdio"}, Env: map[string]string{"TOKEN": "agentbox-placeholder-GH-X"}},
			"web": {Transport: "http", URL: "https://mcp.example.com/mcp"},
		},
	}
	cfg, err := buildMCPConfig(a, map[string]assistant.MCPServer{"host": {Command: "agentbox", Args: []string{"bridge"}}}, "/opt/agentbox/agentbox", nil)
	if err != nil {
		t.Fatal(err)
	}
	js := string(cfg.JSON)
	for _, want := range []string{`"${env:AGENTBOX_MCP_GH_ENV_TOKEN}"`, `"url": "https://mcp.example.com/mcp"`, `"host"`} {
		if !strings.Contains(js, want) {
			t.Errorf("mcp.json lacks %s:\n%s", want, js)
		}
	}
	if strings.Contains(js, "agentbox-placeholder-GH-X") || cfg.Env["AGENTBOX_MCP_GH_ENV_TOKEN"] != "agentbox-placeholder-GH-X" {
		t.Errorf("secrets: %s %v", js, cfg.Env)
	}
	if strings.Join(cfg.Servers, ",") != "gh,host,web" || strings.Join(cfg.Filtered, ",") != "gh" {
		t.Errorf("servers %v filtered %v", cfg.Servers, cfg.Filtered)
	}
	a.MCP = []assistant.MCPRef{{ServerID: "missing"}}
	if _, err := buildMCPConfig(a, nil, "/opt/agentbox/agentbox", nil); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("err %v", err)
	}
	// A credential never goes into the CLI's environment.
	a.MCP = []assistant.MCPRef{{ServerID: "gh"}}
	a.MCPServers["gh"].Env["TOKEN"] = "$ENV.GH"
	if _, err := buildMCPConfig(a, nil, "/opt/agentbox/agentbox", nil); err == nil || !strings.Contains(err.Error(), "reads $ENV.GH, a credential") {
		t.Errorf("err %v", err)
	}

	b, err := buildPermissions(chat.Arguments{AllowedTools: []string{"Shell(git)"}, DisallowedTools: []string{"Shell(rm)", "Mcp(gh:delete_repo)"}})
	if err != nil || !strings.Contains(string(b), `"Shell(rm)"`) || !strings.Contains(string(b), `"allow"`) {
		t.Errorf("permissions %s, %v", b, err)
	}
	if b, err := buildPermissions(chat.Arguments{}); b != nil || err != nil {
		t.Errorf("no permissions: %s, %v", b, err)
	}
	var ae *argError
	if _, err := buildPermissions(chat.Arguments{DisallowedTools: []string{"Bash"}}); !errors.As(err, &ae) || !strings.Contains(err.Error(), `"Bash"`) {
		t.Errorf("err %v", err)
	}
}

// TestRunRefusals: requests the executor turns down before starting
// anything, each with one error event and a clear message.
func TestRunRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mod  func(*executor.Request)
		code string
		msg  string
	}{
		{"no key", func(r *executor.Request) { r.Connector.Key = "" }, chat.ErrAuth, "CURSOR_API_KEY"},
		{"bad mode", func(r *executor.Request) { r.Arguments.PermissionMode = "yolo" }, chat.ErrInvalidRequest, `"yolo"`},
		{"bad permission", func(r *executor.Request) { r.Arguments.AllowedTools = []string{"Read"} }, chat.ErrInvalidRequest, "Cursor CLI permissions"},
		{"no input", func(r *executor.Request) { r.Input = nil }, chat.ErrInvalidRequest, "no input"},
		{"no sandbox", func(r *executor.Request) { r.Sandbox = nil }, chat.ErrInternal, "no sandbox"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &chattest.Recorder{}
			req := &executor.Request{Assistant: &assistant.Assistant{ID: "a"}, ChatID: "c",
				Input:     []chat.Message{{Role: chat.RoleUser, Content: "hi"}},
				Connector: executor.Connection{Key: testKey}, Sandbox: wsOnly(t), Emit: log.Emit}
			tc.mod(req)
			_, err := New(Options{}).Run(context.Background(), req)
			var xe *chat.Error
			if !errors.As(err, &xe) || xe.Code != tc.code || !strings.Contains(xe.Message, tc.msg) {
				t.Fatalf("err %v, want %s containing %q", err, tc.code, tc.msg)
			}
			if ev := log.Starts(chat.TypeError); len(ev) != 1 {
				t.Errorf("error events %+v", ev)
			}
		})
	}
}

func TestNameAndDefaults(t *testing.T) {
	t.Parallel()
	c := newCLI(Options{})
	if e := New(Options{}); e.Name() != "cursor" || c.opts.Binary != "cursor-agent" || c.opts.GracePeriod != DefaultGracePeriod || c.opts.InlinePrompt != DefaultInlinePrompt {
		t.Errorf("%s %+v", e.Name(), c.opts)
	}
}
