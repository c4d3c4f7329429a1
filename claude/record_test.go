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
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/skills"
)

var record = flag.Bool("record", false, "re-record testdata/claude transcripts from the real CLI (then run -update)")

// recordScenario is one transcript recorded from the real CLI: the output
// of the last of its runs (one per input; a single "Please do the task."
// when none are given).
type recordScenario struct {
	name   string
	args   chat.Arguments
	inputs []string
	setup  func(t *testing.T, sb *hostSandbox, a *assistant.Assistant)
	turns  func(ws string) []scripted.Turn
}

var recordScenarios = []recordScenario{
	{
		name: "write_bash",
		turns: func(ws string) []scripted.Turn {
			return []scripted.Turn{
				{Thinking: "The user wants a file.", Text: "I'll create hello.txt.", ToolCalls: []scripted.ToolCall{{
					Name: "Write", Input: map[string]any{"file_path": filepath.Join(ws, "hello.txt"), "content": "hello\n"}}}},
				{When: &scripted.Match{AfterToolResult: "Write"}, ToolCalls: []scripted.ToolCall{{
					Name: "Bash", Input: map[string]any{"command": "cat hello.txt && echo ok", "description": "Show the file"}}}},
				{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Done: hello.txt says hello."},
			}
		},
	},
	{
		name: "max_turns",
		args: chat.Arguments{MaxTurns: 2},
		turns: func(string) []scripted.Turn {
			var ts []scripted.Turn
			for i := 0; i < 4; i++ {
				ts = append(ts, scripted.Turn{ToolCalls: []scripted.ToolCall{{
					Name: "Bash", Input: map[string]any{"command": "echo step", "description": "step"}}}})
			}
			return ts
		},
	},
	{
		name: "tool_failures",
		turns: func(string) []scripted.Turn {
			var ts []scripted.Turn
			for i := 0; i < 3; i++ {
				ts = append(ts, scripted.Turn{Text: "Trying the build.", ToolCalls: []scripted.ToolCall{{
					Name: "Bash", Input: map[string]any{"command": "echo build failed >&2; exit 2", "description": "build"}}}})
			}
			return append(ts, scripted.Turn{Text: "The build keeps failing."})
		},
	},
	{
		name: "api_error",
		turns: func(string) []scripted.Turn {
			return []scripted.Turn{{Error: &scripted.HTTPError{Status: 400, Message: "prompt is too long"}}}
		},
	},
	{
		name: "permission_denied",
		args: chat.Arguments{PermissionMode: "dontAsk"},
		turns: func(string) []scripted.Turn {
			return []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "rm -rf build", "description": "clean"}}}},
				{Text: "I am not allowed to run that."},
			}
		},
	},
	{
		name: "bg_bash",
		turns: func(string) []scripted.Turn {
			return []scripted.Turn{
				{Text: "Starting the job.", ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{
					"command": "sleep 2; echo done > bg.txt", "description": "slow job", "run_in_background": true}}}},
				{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "It runs in the background."},
				{When: &scripted.Match{Contains: "task-notification"}, Text: "The job finished."},
			}
		},
	},
	{
		name: "bg_subagent",
		turns: func(string) []scripted.Turn {
			return []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{{Name: "Task", Input: map[string]any{"description": "count files",
					"prompt": "SUBAGENT-PROMPT: count the files", "subagent_type": "general-purpose", "run_in_background": true}}}},
				{When: &scripted.Match{Contains: "SUBAGENT-PROMPT"}, Delay: scripted.Duration(2 * time.Second), Text: "No files."},
				{When: &scripted.Match{Contains: "task-notification"}, Text: "The subagent found no files."},
				{Text: "The subagent is counting."},
			}
		},
	},
	{
		name:   "resumed",
		inputs: []string{"first", "second"},
		turns: func(string) []scripted.Turn {
			u := &scripted.Usage{InputTokens: 10000, OutputTokens: 1000}
			return []scripted.Turn{{Text: "One.", Usage: u}, {Text: "Two.", Usage: u}}
		},
	},
	{
		name: "cut_stream",
		turns: func(string) []scripted.Turn {
			const answer = "This answer arrives whole on the second try."
			return []scripted.Turn{{Text: answer, CutAfter: 5}, {Text: answer}}
		},
	},
	{
		name: "model_500",
		turns: func(string) []scripted.Turn {
			var ts []scripted.Turn
			for range 4 {
				ts = append(ts, scripted.Turn{Error: &scripted.HTTPError{Status: 500}})
			}
			return ts
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
		turns: func(string) []scripted.Turn { return []scripted.Turn{{Text: "Hello."}} },
	},
}

// TestRecord re-records the transcripts of every supported CLI version
// into testdata/claude/VERSION. It runs only with -record.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("records transcripts only with -record (not a CI test)")
	}
	for _, cli := range testenv.ClaudeVersions(t) {
		dir := filepath.Join(testdataDir, cli.Version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, sc := range recordScenarios {
			t.Run(cli.Version+"/"+sc.name, func(t *testing.T) {
				sb := newHostSandbox(t)
				srv := scripted.NewServer(&scripted.Script{Turns: sc.turns(sb.ws.Dir())})
				t.Cleanup(srv.Close)
				a := &assistant.Assistant{ID: "recorder"}
				if sc.setup != nil {
					sc.setup(t, sb, a)
				}
				inputs := sc.inputs
				if len(inputs) == 0 {
					inputs = []string{"Please do the task."}
				}
				e := New(Options{Binary: cli.Bin, GracePeriod: time.Second})
				var out bytes.Buffer
				for _, in := range inputs {
					out.Reset()
					sb.host.Tee = &out
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					_, err := e.Run(ctx, &executor.Request{
						Assistant: a, UserID: "u1", ChatID: "c-" + sc.name,
						System:    "You are a test assistant.",
						Input:     []chat.Message{{Role: chat.RoleUser, Content: in}},
						Connector: executor.Connection{Type: "anthropic", Host: srv.URL, Key: "sk-ant-record", Model: "claude-test"},
						Arguments: sc.args, Sandbox: sb, Timeout: time.Minute,
						Emit: func(chat.Event) {},
					})
					cancel()
					t.Logf("%s %s: err=%v, %d bytes", cli.Version, sc.name, err, out.Len())
				}
				if out.Len() == 0 {
					t.Fatal("no output recorded")
				}
				if err := os.WriteFile(filepath.Join(dir, sc.name+".jsonl"), out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
