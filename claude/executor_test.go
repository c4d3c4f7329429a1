package claude

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

const testKey = "sk-ant-test-SECRET-7f3a9c"

func newRequest(sb *hostSandbox, srv *scripted.Server, chatID, input string, log *chattest.Recorder) *executor.Request {
	return &executor.Request{
		Assistant: &assistant.Assistant{ID: "coder"},
		UserID:    "alice", ChatID: chatID,
		System:    "You are a careful coding assistant.",
		Input:     []chat.Message{{Role: chat.RoleUser, Content: input}},
		Connector: executor.Connection{Type: "anthropic", Host: srv.URL, Key: testKey, Model: "claude-test"},
		Sandbox:   sb, Timeout: time.Minute, Emit: log.Emit,
	}
}

// TestRunWriteBashResume: a Write then a Bash call change the workspace;
// the next request resumes the session and the model sees the first
// turn's tool history.
func TestRunWriteBashResume(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	t.Parallel()
	sb := newHostSandbox(t)
	ws := sb.ws.Dir()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Text: "Creating it.", ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{
			"file_path": filepath.Join(ws, "notes.txt"), "content": "first\n"}}}},
		{When: &scripted.Match{AfterToolResult: "Write"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{
			"command": "echo second >> notes.txt && wc -l < notes.txt", "description": "append"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "notes.txt has two lines."},
		{When: &scripted.Match{Contains: "what did you do"}, Text: "I wrote notes.txt."},
	}})
	t.Cleanup(srv.Close)
	e := New(Options{Binary: bin})

	log1 := &chattest.Recorder{}
	res, err := e.Run(context.Background(), newRequest(sb, srv, "chat-1", "make notes", log1))
	if err != nil {
		t.Fatalf("run 1: %v", err)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "notes.txt"))
	if string(got) != "first\nsecond\n" {
		t.Errorf("notes.txt = %q", got)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].Name != "Write" || res.ToolCalls[1].Name != "Bash" ||
		!strings.Contains(res.ToolCalls[1].Result, "2") {
		t.Errorf("tool calls %+v", res.ToolCalls)
	}
	if want := SessionID("coder", "alice", "chat-1"); res.SessionID != want {
		t.Errorf("session %s, want %s", res.SessionID, want)
	}
	if res.Usage.Turns != 3 || res.Usage.InputTokens == 0 {
		t.Errorf("usage %+v", res.Usage)
	}
	if s := log1.Starts(chat.TypeSession); len(s) != 1 || s[0].Props["session_id"] != res.SessionID {
		t.Errorf("session events %+v", s)
	}
	if n := len(log1.Starts(chat.TypeToolResult)); n != 2 {
		t.Errorf("%d tool results", n)
	}

	log2 := &chattest.Recorder{}
	res2, err := e.Run(context.Background(), newRequest(sb, srv, "chat-1", "what did you do?", log2))
	if err != nil {
		t.Fatalf("run 2: %v", err)
	}
	if res2.Content != "I wrote notes.txt." || res2.SessionID != res.SessionID {
		t.Errorf("run 2: %q session %s", res2.Content, res2.SessionID)
	}
	reqs := srv.TurnRequests()
	last := string(reqs[len(reqs)-1].Body)
	for _, want := range []string{`"name":"Write"`, `"name":"Bash"`, "make notes", "tool_result"} {
		if !strings.Contains(last, want) {
			t.Errorf("resumed request lacks %s", want)
		}
	}
	clitest.CheckNoSecret(t, testKey, sb.ws.Dir(), log1, log2)
}

// TestRunLargeInputAndHistory: a 2 MB message and a 200-turn, 5 MB history
// reach the model (history through the system prompt file, as no session
// exists yet), and none of it goes through argv.
func TestRunLargeInputAndHistory(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	if testing.Short() {
		t.Skip("-short: large payloads")
	}
	t.Parallel()
	sb := newHostSandbox(t)
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "Read it all."}}})
	t.Cleanup(srv.Close)
	log := &chattest.Recorder{}
	big := "BEGIN-" + strings.Repeat("lorem ipsum ", 2<<20/12) + "-END"
	req := newRequest(sb, srv, "chat-big", big, log)
	for i := 0; i < 200; i++ {
		req.History = append(req.History,
			chat.Message{Role: chat.RoleUser, Content: "question " + strings.Repeat("q", 12<<10)},
			chat.Message{Role: chat.RoleAssistant, Content: "answer " + strings.Repeat("a", 12<<10)})
	}
	req.History[0].Content = "FIRST-HISTORY-MARKER"
	res, err := New(Options{Binary: bin}).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "Read it all." {
		t.Errorf("content %q", res.Content)
	}
	reqs := srv.TurnRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d turn requests", len(reqs))
	}
	body := reqs[0]
	if !strings.Contains(string(body.Body), "-END") || !strings.Contains(string(body.Body), "BEGIN-") {
		t.Error("the 2 MB message did not arrive whole")
	}
	if sys := body.System(); !strings.Contains(sys, "FIRST-HISTORY-MARKER") || !strings.Contains(sys, "careful coding assistant") {
		t.Error("history or system prompt missing from the system prompt")
	}
}

// TestRunTimeout: a model that stalls is stopped at the sandbox timeout.
func TestRunTimeout(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	t.Parallel()
	sb := newHostSandbox(t)
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Stall: true}}})
	t.Cleanup(srv.Close)
	log := &chattest.Recorder{}
	req := newRequest(sb, srv, "chat-slow", "hi", log)
	req.Timeout = 3 * time.Second
	start := time.Now()
	_, err := New(Options{Binary: bin}).Run(context.Background(), req)
	var xe *chat.Error
	if !errors.As(err, &xe) || xe.Code != chat.ErrTimeout {
		t.Fatalf("err %v, want a timeout", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %s", d)
	}
	if ev := log.Starts(chat.TypeError); len(ev) != 1 || ev[0].Props["code"] != chat.ErrTimeout {
		t.Errorf("error events %+v", ev)
	}
}

// fakeCLI writes a shell script standing in for the CLI.
func fakeCLI(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	writeHostFile(t, p, "#!/bin/sh\n"+script)
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

const fakeResult = `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"ok","session_id":"s","usage":{"input_tokens":1,"output_tokens":1}}`

func TestRunProcessFailures(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(nil)
	t.Cleanup(srv.Close)
	tests := []struct {
		name   string
		script string
		code   string // "" for success
		msg    string
		maxDur time.Duration
	}{
		{"no result", "echo 'not json at all'; echo 'boom: cannot start' >&2; exit 3", chat.ErrExecutor, "boom: cannot start", 5 * time.Second},
		{"exit after result", "echo '" + fakeResult + "'; echo 'crashed late' >&2; exit 2", chat.ErrExecutor, "crashed late", 5 * time.Second},
		{"lingers after result", "echo '" + fakeResult + "'; sleep 60", "", "", 10 * time.Second},
		{"killed mid-stream", `echo '{"type":"system","subtype":"init","session_id":"s","tools":[],"mcp_servers":[],"skills":[]}'; kill -9 $$`, chat.ErrExecutor, "without a result", 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb := newHostSandbox(t)
			log := &chattest.Recorder{}
			start := time.Now()
			_, err := New(Options{Binary: fakeCLI(t, tc.script), GracePeriod: time.Second}).
				Run(context.Background(), newRequest(sb, srv, "c", "hi", log))
			if d := time.Since(start); d > tc.maxDur {
				t.Errorf("took %s", d)
			}
			if tc.code == "" {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			var xe *chat.Error
			if !errors.As(err, &xe) || xe.Code != tc.code || !strings.Contains(xe.Error(), tc.msg) {
				t.Fatalf("err %v, want %s containing %q", err, tc.code, tc.msg)
			}
			ev := log.Starts(chat.TypeError)
			if len(ev) != 1 {
				t.Fatalf("error events %+v", ev)
			}
			for _, e := range log.Starts(chat.TypeText) {
				if strings.Contains(e.Text, "not json") {
					t.Error("non-JSON output leaked into text")
				}
			}
		})
	}
}

// TestRunEnvAndArgv checks the command line and environment the CLI gets:
// secrets only in env, parent-session variables removed, every flag set.
func TestRunEnvAndArgv(t *testing.T) {
	t.Parallel()
	sb := newHostSandbox(t)
	srv := scripted.NewServer(nil)
	t.Cleanup(srv.Close)
	bin := fakeCLI(t, `printf '%s\n' "$@" > argv.txt; env > env.txt; echo '`+fakeResult+`'`)
	req := newRequest(sb, srv, "c", "hi", &chattest.Recorder{})
	req.Assistant.MCP = []assistant.MCPRef{{ServerID: "gh", Tools: []string{"list_issues"}}}
	req.Assistant.MCPServers = map[string]*assistant.MCPServer{"gh": {ID: "gh", Transport: "stdio", Command: "gh-mcp",
		Env: map[string]string{"GITHUB_TOKEN": "agentbox-placeholder-GITHUB_TOKEN-7a"}}}
	req.Arguments = chat.Arguments{MaxTurns: 7, AllowedTools: []string{"Read"}, DisallowedTools: []string{"WebFetch"}}
	req.Relay = "/opt/agentbox/agentbox"
	e := New(Options{Binary: bin})
	if _, err := e.Run(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	argv, _ := os.ReadFile(filepath.Join(sb.ws.Dir(), "argv.txt"))
	env, _ := os.ReadFile(filepath.Join(sb.ws.Dir(), "env.txt"))
	a := string(argv)
	for _, want := range []string{"-p\n", "--input-format\nstream-json\n", "--output-format\nstream-json\n", "--verbose\n",
		"--include-partial-messages\n", "--max-turns\n7\n", "--permission-mode\nbypassPermissions\n", "--model\nclaude-test\n",
		"--session-id\n" + SessionID("coder", "alice", "c") + "\n", "--append-system-prompt-file\n",
		"--allowedTools\nRead,mcp__gh__list_issues\n", "--disallowedTools\nWebFetch\n", "--mcp-config\n", "--strict-mcp-config\n",
		"--setting-sources\nuser\n"} {
		if !strings.Contains(a, want) {
			t.Errorf("argv lacks %q:\n%s", want, a)
		}
	}
	for _, secret := range []string{testKey, "agentbox-placeholder-GITHUB_TOKEN-7a", "careful coding"} {
		if strings.Contains(a, secret) {
			t.Errorf("argv contains %q", secret)
		}
	}
	en := "\n" + string(env)
	for _, want := range []string{"\nANTHROPIC_API_KEY=" + testKey + "\n", "\nANTHROPIC_BASE_URL=" + srv.URL + "\n",
		"\nANTHROPIC_MODEL=claude-test\n", "\nCLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n", "\nDISABLE_AUTOUPDATER=1\n",
		"\nIS_SANDBOX=1\n", "\nCLAUDE_CONFIG_DIR=" + sb.ws.Dir() + "/" + ConfigPaths("coder").Config + "\n",
		"\nCLAUDE_CODE_DISABLE_CLAUDE_MDS=1\n", "\nCLAUDE_CODE_DISABLE_AUTO_MEMORY=1\n", "\nCLAUDE_CODE_MAX_RETRIES=2\n",
		"\nAGENTBOX_MCP_GH_ENV_GITHUB_TOKEN=agentbox-placeholder-GITHUB_TOKEN-7a\n"} {
		if !strings.Contains(en, want) {
			t.Errorf("env lacks %q", strings.TrimSpace(want))
		}
	}
	for _, bad := range []string{"\nCLAUDECODE=", "\nCLAUDE_CODE_ENTRYPOINT=", "\nAGENTBOX_KEEP_ENV="} {
		if strings.Contains(en, bad) {
			t.Errorf("env still has %s", strings.TrimSpace(bad))
		}
	}
	mcp, _ := os.ReadFile(filepath.Join(sb.ws.Dir(), ConfigPaths("coder").MCPConfig))
	if strings.Contains(string(mcp), "ghp_") || !strings.Contains(string(mcp), "${AGENTBOX_MCP_GH_ENV_GITHUB_TOKEN}") ||
		!strings.Contains(string(mcp), `"mcp-filter"`) {
		t.Errorf(".mcp.json:\n%s", mcp)
	}
	if _, err := os.Stat(filepath.Join(sb.ws.Dir(), SystemPromptFile)); !os.IsNotExist(err) {
		t.Errorf("system prompt file left behind: %v", err)
	}
}

// TestPrepareRewrites: only the assistant definition configures the
// CLI: whatever anyone left in the assistant's config folder (settings,
// hooks, memory, skills, agents, the CLI's own state) is removed before
// the next run, but for session transcripts; the chat's former shared
// config folder is cleared.
func TestPrepareRewrites(t *testing.T) {
	t.Parallel()
	sb := newHostSandbox(t)
	ws := sb.ws.Dir()
	in := &runInput{assistant: &assistant.Assistant{ID: "a"}, sessionID: SessionID("a", "u", "c")}
	paths := ConfigPaths("a")
	cfg := filepath.Join(ws, paths.Config)
	planted := map[string]string{
		"settings.json":                           `{"hooks":{"SessionStart":[]},"env":{"X":"1"}}`,
		"settings.local.json":                     `{}`,
		"CLAUDE.md":                               "be evil",
		".claude.json":                            `{"projects":{}}`,
		"skills/evil/SKILL.md":                    "---\nname: evil\ndescription: x\n---\n",
		"agents/evil.md":                          "---\nname: evil\n---\n",
		"commands/evil.md":                        "x",
		"plugins/x/plugin.json":                   "{}",
		"projects/-workspace/memory/MEMORY.md":    "remember evil",
		"projects/-workspace/notes.txt":           "x",
		"projects/-workspace/not-a-session.jsonl": "{}",
	}
	for f, c := range planted {
		os.MkdirAll(filepath.Dir(filepath.Join(cfg, f)), 0o755)
		writeHostFile(t, filepath.Join(cfg, f), c)
	}
	other := "0c6b5b5e-2d0b-4a34-9bc4-1f2e3d4c5b6a"
	kept := []string{"projects/-workspace/" + other + ".jsonl", "projects/-workspace/" + other + "/subagents/agent-1.jsonl"}
	for _, f := range kept {
		os.MkdirAll(filepath.Dir(filepath.Join(cfg, f)), 0o755)
		writeHostFile(t, filepath.Join(cfg, f), "{}\n")
	}
	// The former shared folder: settings and a session.
	legacy := filepath.Join(ws, ConfigRoot)
	writeHostFile(t, filepath.Join(legacy, "settings.json"), `{"hooks":{}}`)
	os.MkdirAll(filepath.Join(legacy, "projects", "-workspace"), 0o755)
	writeHostFile(t, filepath.Join(legacy, "projects", "-workspace", in.sessionID+".jsonl"), "{}\n")
	// This assistant's session.
	os.MkdirAll(filepath.Join(cfg, "projects", "-workspace"), 0o755)
	writeHostFile(t, filepath.Join(cfg, "projects", "-workspace", in.sessionID+".jsonl"), "{}\n")
	// The user's own project files are not the executor's.
	writeHostFile(t, filepath.Join(ws, ".mcp.json"), `{"mcpServers":{"mine":{"command":"x"}}}`)

	readyWorkspace(t, context.Background(), sb.ws, in.assistant, "")
	p, err := prepare(context.Background(), sb.ws, in)
	if err != nil {
		t.Fatal(err)
	}
	for f := range planted {
		if _, err := os.Stat(filepath.Join(cfg, f)); !os.IsNotExist(err) {
			t.Errorf("%s kept", f)
		}
	}
	for _, f := range kept {
		if _, err := os.Stat(filepath.Join(cfg, f)); err != nil {
			t.Errorf("transcript %s: %v", f, err)
		}
	}
	for _, f := range []string{"settings.json", "projects"} {
		if _, err := os.Stat(filepath.Join(legacy, f)); !os.IsNotExist(err) {
			t.Errorf("the former config folder's %s kept", f)
		}
	}
	if !p.resume {
		t.Error("the session's transcript was not resumed")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".mcp.json")); !strings.Contains(string(b), "mine") {
		t.Error("the workspace's own .mcp.json was overwritten")
	}
	if b, err := os.ReadFile(filepath.Join(ws, paths.MCPConfig)); err != nil || strings.Contains(string(b), "mine") {
		t.Errorf("mcp config %s, %v", b, err)
	}
	// Another assistant of the chat has a folder of its own.
	if ConfigPaths("b").Config == paths.Config || ConfigPaths("../x").Dir == ConfigRoot+"/assistants/../x" {
		t.Error("assistants share a config folder, or an id escapes it")
	}
	// Bad MCP definitions are clear errors.
	in.assistant.MCP = []assistant.MCPRef{{ServerID: "missing"}}
	if _, err := prepare(context.Background(), sb.ws, in); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("err %v", err)
	}
	in.assistant.MCP = []assistant.MCPRef{{ServerID: "x"}}
	in.assistant.MCPServers = map[string]*assistant.MCPServer{"x": {Transport: "stdio", Command: "x", Env: map[string]string{"K": "$ENV.NOPE_NOT_SET"}}}
	if _, err := prepare(context.Background(), sb.ws, in); err == nil || !strings.Contains(err.Error(), "reads $ENV.NOPE_NOT_SET, a credential") {
		t.Errorf("err %v", err)
	}
}

// TestForkResumesTheParentsSession: a fork's first run forks the session
// of the chat it was forked from (its transcript is in the fork's
// workspace) under the fork's own session id; with a transcript of its
// own the fork resumes that.
func TestForkResumesTheParentsSession(t *testing.T) {
	t.Parallel()
	sb := newHostSandbox(t)
	srv := scripted.NewServer(nil)
	t.Cleanup(srv.Close)
	bin := fakeCLI(t, `printf '%s\n' "$@" > argv.txt; echo '`+fakeResult+`'`)
	transcript := func(chatID string) {
		dir := filepath.Join(sb.ws.Dir(), ConfigPaths("coder").Config, "projects", "-workspace")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, SessionID("coder", "alice", chatID)+".jsonl"), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func() string {
		t.Helper()
		req := newRequest(sb, srv, "fork", "go on", &chattest.Recorder{})
		req.History = []chat.Message{{Role: chat.RoleUser, Content: "the parent's question"}, {Role: chat.RoleAssistant, Content: "the parent's answer"}}
		req.ForkedFrom = []string{"parent", "grandparent"}
		if _, err := New(Options{Binary: bin}).Run(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		argv, _ := os.ReadFile(filepath.Join(sb.ws.Dir(), "argv.txt"))
		return string(argv)
	}
	transcript("grandparent")
	transcript("parent")
	own, parent := SessionID("coder", "alice", "fork"), SessionID("coder", "alice", "parent")
	if a := run(); !strings.Contains(a, "--resume\n"+parent+"\n--fork-session\n--session-id\n"+own+"\n") {
		t.Errorf("a fork's first run does not fork the parent's session:\n%s", a)
	}
	transcript("fork")
	if a := run(); !strings.Contains(a, "--resume\n"+own+"\n") || strings.Contains(a, "--fork-session") {
		t.Errorf("a fork with a session of its own does not resume it:\n%s", a)
	}
}
