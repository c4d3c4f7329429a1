package claude

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/llmtest"
	"github.com/agentbox/agentbox/skills"
)

var record = flag.Bool("record", false, "re-record testdata/claude transcripts from the real CLI (then run -update)")

// recordScenario is one transcript recorded from the real CLI.
type recordScenario struct {
	name  string
	args  chat.Arguments
	setup func(t *testing.T, sb *hostSandbox, a *assistant.Assistant)
	turns func(ws string) []llmtest.Turn
}

var recordScenarios = []recordScenario{
	{
		name: "write_bash",
		turns: func(ws string) []llmtest.Turn {
			return []llmtest.Turn{
				{Thinking: "The user wants a file.", Text: "I'll create hello.txt.", ToolCalls: []llmtest.ToolCall{{
					Name: "Write", Input: map[string]any{"file_path": filepath.Join(ws, "hello.txt"), "content": "hello\n"}}}},
				{When: &llmtest.Match{AfterToolResult: "Write"}, ToolCalls: []llmtest.ToolCall{{
					Name: "Bash", Input: map[string]any{"command": "cat hello.txt && echo ok", "description": "Show the file"}}}},
				{When: &llmtest.Match{AfterToolResult: "Bash"}, Text: "Done: hello.txt says hello."},
			}
		},
	},
	{
		name: "max_turns",
		args: chat.Arguments{MaxTurns: 2},
		turns: func(string) []llmtest.Turn {
			var ts []llmtest.Turn
			for i := 0; i < 4; i++ {
				ts = append(ts, llmtest.Turn{ToolCalls: []llmtest.ToolCall{{
					Name: "Bash", Input: map[string]any{"command": "echo step", "description": "step"}}}})
			}
			return ts
		},
	},
	{
		name: "tool_failures",
		turns: func(string) []llmtest.Turn {
			var ts []llmtest.Turn
			for i := 0; i < 3; i++ {
				ts = append(ts, llmtest.Turn{Text: "Trying the build.", ToolCalls: []llmtest.ToolCall{{
					Name: "Bash", Input: map[string]any{"command": "echo build failed >&2; exit 2", "description": "build"}}}})
			}
			return append(ts, llmtest.Turn{Text: "The build keeps failing."})
		},
	},
	{
		name: "api_error",
		turns: func(string) []llmtest.Turn {
			return []llmtest.Turn{{Error: &llmtest.HTTPError{Status: 400, Message: "prompt is too long"}}}
		},
	},
	{
		name: "permission_denied",
		args: chat.Arguments{PermissionMode: "dontAsk"},
		turns: func(string) []llmtest.Turn {
			return []llmtest.Turn{
				{ToolCalls: []llmtest.ToolCall{{Name: "Bash", Input: map[string]any{"command": "rm -rf build", "description": "clean"}}}},
				{Text: "I am not allowed to run that."},
			}
		},
	},
	{
		name: "mcp_skills",
		setup: func(t *testing.T, sb *hostSandbox, a *assistant.Assistant) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "code-check"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeHostFile(t, filepath.Join(dir, "code-check", "SKILL.md"), "---\nname: code-check\ndescription: Check code for bugs.\n---\n# Code check\n")
			a.Skills = []*skills.Skill{{Name: "code-check", Description: "Check code for bugs.", Dir: filepath.Join(dir, "code-check")}}
			a.MCP = []assistant.MCPRef{{ServerID: "broken"}}
			a.MCPServers = map[string]*assistant.MCPServer{"broken": {ID: "broken", Transport: "stdio", Command: "/nonexistent/mcp-server"}}
		},
		turns: func(string) []llmtest.Turn { return []llmtest.Turn{{Text: "Hello."}} },
	},
}

// TestRecord re-records the transcripts with the real CLI. It runs only
// with -record.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("records transcripts only with -record (not a CI test)")
	}
	bin := testenv.ClaudeBin(t)
	for _, sc := range recordScenarios {
		t.Run(sc.name, func(t *testing.T) {
			sb := newHostSandbox(t)
			srv := llmtest.NewServer(&llmtest.Script{Turns: sc.turns(sb.ws.Dir())})
			t.Cleanup(srv.Close)
			a := &assistant.Assistant{ID: "recorder"}
			if sc.setup != nil {
				sc.setup(t, sb, a)
			}
			var out bytes.Buffer
			sb.host.Tee = &out
			e := New(Options{Binary: bin, GracePeriod: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := e.Run(ctx, &executor.Request{
				Assistant: a, UserID: "u1", ChatID: "c-" + sc.name,
				System:    "You are a test assistant.",
				Input:     []chat.Message{{Role: chat.RoleUser, Content: "Please do the task."}},
				Connector: executor.Connection{Type: "anthropic", Host: srv.URL, Key: "sk-ant-record", Model: "claude-test"},
				Arguments: sc.args, Sandbox: sb, Timeout: time.Minute,
				Emit: func(chat.Event) {},
			})
			t.Logf("%s: err=%v, %d bytes", sc.name, err, out.Len())
			if out.Len() == 0 {
				t.Fatal("no output recorded")
			}
			if err := os.WriteFile(filepath.Join(testdataDir, sc.name+".jsonl"), out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}
