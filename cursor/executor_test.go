package cursor

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
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/skills"
)

const testKey = "crsr_test_SECRET_7f3a9c41"

// fakeEnv runs the stand-in CLI (testdata/cursor/fake-cursor-agent) in a
// real Docker sandbox: the sandbox image with the stand-in mounted as
// /usr/local/bin/cursor-agent and the transcripts at /opt/fake-cursor.
type fakeEnv struct {
	t   *testing.T
	rt  *docker.Runtime
	img string
	wss *sandbox.Workspaces
	ctx context.Context
}

func newFakeEnv(t *testing.T) *fakeEnv {
	t.Helper()
	img := testenv.Image(t)
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	rt, err := docker.New(ctx, docker.Options{Instance: "cursor-test", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeEnv{t: t, rt: rt, img: img, wss: wss, ctx: ctx}
}

// sandbox creates a sandbox for the chat; it is removed at cleanup.
func (f *fakeEnv) sandbox(chatID string) (sandbox.Sandbox, *sandbox.Workspace) {
	t := f.t
	t.Helper()
	ws, release, err := f.wss.Acquire(f.ctx, "alice", chatID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	dir, err := filepath.Abs(testdataDir)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := f.rt.Create(f.ctx, sandbox.Spec{UserID: "alice", ChatID: chatID, Workspace: ws, Image: f.img,
		Network: sandbox.NetworkNone, Mounts: []sandbox.Mount{
			{Source: filepath.Join(dir, "fake-cursor-agent"), Target: "/usr/local/bin/cursor-agent"},
			{Source: dir, Target: "/opt/fake-cursor"},
		}})
	t.Cleanup(func() { sb.Remove(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
	return sb, ws
}

// fakeOptions configure the stand-in for one run.
func fakeOptions(transcript string, env map[string]string) Options {
	e := map[string]string{
		"FAKE_CURSOR_TRANSCRIPT":   "/opt/fake-cursor/" + transcript,
		"FAKE_CURSOR_EXPECT_KEY":   testKey,
		"FAKE_CURSOR_EXPECT_MODEL": "gpt-5",
	}
	for k, v := range env {
		e[k] = v
	}
	return Options{Env: e, GracePeriod: time.Second}
}

func newRequest(sb sandbox.Sandbox, chatID, input string, log *chattest.Recorder) *executor.Request {
	return &executor.Request{
		Assistant: &assistant.Assistant{ID: "coder"},
		UserID:    "alice", ChatID: chatID,
		System:    "You are a careful coding assistant.",
		Input:     []chat.Message{{Role: chat.RoleUser, Content: input}},
		Connector: executor.Connection{Type: "cursor", Key: testKey, Model: "gpt-5"},
		Sandbox:   sb, Timeout: time.Minute, Emit: log.Emit,
	}
}

// TestDockerRunResume: a turn in a fresh chat passes every documented flag
// and the key in the environment only, maps the stream, and saves the
// chat id; the next turn, in a new container, resumes it with its input
// inline; a chat without a session gets its history through the prompt
// file.
func TestDockerRunResume(t *testing.T) {
	f := newFakeEnv(t)
	skillDir := filepath.Join(t.TempDir(), "code-check")
	if err := os.MkdirAll(skillDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skillDir, "SKILL.md"), []byte("---\nname: code-check\ndescription: Check code.\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &assistant.Assistant{ID: "coder",
		Skills:     []*skills.Skill{{Name: "code-check", Description: "Check code.", Dir: skillDir}},
		MCP:        []assistant.MCPRef{{ServerID: "gh"}},
		MCPServers: map[string]*assistant.MCPServer{"gh": {ID: "gh", Transport: "stdio", Command: "gh-mcp", Env: map[string]string{"GITHUB_TOKEN": "ghp_SECRETTOKEN123"}}},
	}

	sb, ws := f.sandbox("chat-1")
	log1 := &chattest.Recorder{}
	req := newRequest(sb, "chat-1", "make hello.txt", log1)
	req.Assistant = a
	req.History = []chat.Message{{Role: chat.RoleUser, Content: "earlier"}, {Role: chat.RoleAssistant, Content: "EARLIER-ANSWER"}}
	res, err := New(fakeOptions("partial_output.jsonl", map[string]string{
		"FAKE_CURSOR_EXPECT_RESUME": "none", "FAKE_CURSOR_EXPECT_MCP": "1",
		"FAKE_CURSOR_EXPECT_PROMPT_FILE": "1", "FAKE_CURSOR_EXPECT_INPUT": "EARLIER-ANSWER",
	})).Run(f.ctx, req)
	if err != nil {
		t.Fatalf("turn 1: %v", err)
	}
	const sid = "5b0f7c8e-1111-4c59-9f3e-6a1d2c7b8e41"
	if res.SessionID != sid || res.Content != "I'll create hello.txt first.\n\nDone: hello.txt says hello." ||
		len(res.ToolCalls) != 2 || res.ToolCalls[0].Name != "write" || res.Usage.InputTokens != 5968 {
		t.Errorf("turn 1: %+v", res)
	}
	if s := log1.Starts(chat.TypeSession); len(s) != 1 || s[0].Props["session_id"] != sid {
		t.Errorf("session events %+v", s)
	}
	if got := agentcli.ReadSession(context.Background(), ws, StateDir, "coder", "chat-1"); got != sid {
		t.Errorf("session file has %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws.Dir(), PromptFile)); !os.IsNotExist(err) {
		t.Errorf("prompt file left behind: %v", err)
	}
	mcp, _ := os.ReadFile(filepath.Join(ws.Dir(), MCPConfigFile))
	if strings.Contains(string(mcp), "ghp_") || !strings.Contains(string(mcp), "${env:AGENTBOX_MCP_GH_ENV_GITHUB_TOKEN}") {
		t.Errorf("mcp.json:\n%s", mcp)
	}
	for _, p := range []string{".cursor/skills/code-check/SKILL.md", RulesDir + "/skills.mdc", RulesDir + "/system.mdc"} {
		if _, err := os.Stat(filepath.Join(ws.Dir(), p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}

	// Turn 2, a new container: resumes, the input goes inline.
	sb2, _ := f.sandbox("chat-1")
	log2 := &chattest.Recorder{}
	req2 := newRequest(sb2, "chat-1", "what did you do?", log2)
	req2.Assistant = a
	req2.History = append(req.History, chat.Message{Role: chat.RoleUser, Content: "make hello.txt"})
	res2, err := New(fakeOptions("docs_example.jsonl", map[string]string{
		"FAKE_CURSOR_EXPECT_RESUME": sid, "FAKE_CURSOR_EXPECT_PROMPT_FILE": "0", "FAKE_CURSOR_EXPECT_INPUT": "what did you do?",
	})).Run(f.ctx, req2)
	if err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	if !strings.HasPrefix(res2.Content, "I'll read the README.md file") || len(res2.ToolCalls) != 2 {
		t.Errorf("turn 2: %+v", res2)
	}
	clitest.CheckNoSecret(t, testKey, ws.Dir(), log1, log2)
}

// TestDockerLargeInput: a 2 MB message reaches the CLI through the prompt
// file; the command line stays small.
func TestDockerLargeInput(t *testing.T) {
	f := newFakeEnv(t)
	sb, _ := f.sandbox("chat-big")
	big := "BEGIN-" + strings.Repeat("lorem ipsum ", 2<<20/12) + "-END"
	_, err := New(fakeOptions("docs_example.jsonl", map[string]string{
		"FAKE_CURSOR_EXPECT_PROMPT_FILE": "1", "FAKE_CURSOR_EXPECT_INPUT": "ipsum -END",
	})).Run(f.ctx, newRequest(sb, "chat-big", big, &chattest.Recorder{}))
	if err != nil {
		t.Fatal(err)
	}
}

// TestDockerFailures covers the ways a run ends badly.
func TestDockerFailures(t *testing.T) {
	f := newFakeEnv(t)
	tests := []struct {
		name       string
		transcript string
		env        map[string]string
		timeout    time.Duration
		cancel     time.Duration
		code       string // "" for success
		msg        string
		maxDur     time.Duration
	}{
		{name: "missing result and non-zero exit", transcript: "missing_result.jsonl",
			env:  map[string]string{"FAKE_CURSOR_MODE": "cut", "FAKE_CURSOR_EXIT": "1", "FAKE_CURSOR_STDERR": "ConnectError: getaddrinfo ENOTFOUND api2.cursor.sh"},
			code: chat.ErrNetwork, msg: "exited with code 1 without a result: ConnectError", maxDur: 20 * time.Second},
		{name: "error result", transcript: "error_result.jsonl", env: map[string]string{"FAKE_CURSOR_EXIT": "1"},
			code: chat.ErrRateLimit, msg: "usage limit", maxDur: 20 * time.Second},
		{name: "timeout", transcript: "docs_example.jsonl", env: map[string]string{"FAKE_CURSOR_MODE": "hang"},
			timeout: 3 * time.Second, code: chat.ErrTimeout, msg: "timeout", maxDur: 20 * time.Second},
		{name: "canceled", transcript: "docs_example.jsonl", env: map[string]string{"FAKE_CURSOR_MODE": "hang"},
			cancel: 2 * time.Second, code: chat.ErrCanceled, msg: "canceled", maxDur: 20 * time.Second},
		{name: "lingers after result", transcript: "docs_example.jsonl", env: map[string]string{"FAKE_CURSOR_MODE": "linger"},
			maxDur: 20 * time.Second},
		{name: "stand-in refuses a wrong model", transcript: "docs_example.jsonl", env: map[string]string{"FAKE_CURSOR_EXPECT_MODEL": "other"},
			code: chat.ErrExecutor, msg: "fake cursor-agent: --model is 'gpt-5', want 'other'", maxDur: 20 * time.Second},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chatID := "chat-f" + string(rune('a'+i))
			sb, ws := f.sandbox(chatID)
			log := &chattest.Recorder{}
			req := newRequest(sb, chatID, "hi", log)
			if tc.timeout > 0 {
				req.Timeout = tc.timeout
			}
			ctx := f.ctx
			if tc.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(tc.cancel, cancel)
			}
			start := time.Now()
			_, err := New(fakeOptions(tc.transcript, tc.env)).Run(ctx, req)
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
			if ev := log.Starts(chat.TypeError); len(ev) != 1 || ev[0].Props["code"] != tc.code {
				t.Errorf("error events %+v", ev)
			}
			if agentcli.ReadSession(context.Background(), ws, StateDir, "coder", chatID) != "" {
				t.Error("a failed run saved its session")
			}
			clitest.CheckNoSecret(t, testKey, ws.Dir(), log)
		})
	}
}
