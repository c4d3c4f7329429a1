package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// TestFailurePatternsInDocker runs the real Claude Code CLI in a Docker
// sandbox on a scripted model that goes in circles: the same command whose
// output never changes, then a tool its permissions refuse, again and
// again. The turn gets a no_progress and a tool_rejection notice at the
// thresholds of the assistant's package.yao "failures", each with a
// suggested action, and the done event lists them.
func TestFailurePatternsInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	// Bash is allowed; Write asks a permission no one gives.
	failurePatterns(t, loopCLI{command: "claude", arguments: `{"max_turns": 20, "permission_mode": "default", "allowed_tools": ["Bash"]}`,
		repeat:  scripted.ToolCall{Name: "Bash", Input: map[string]any{"command": "echo waiting", "description": "check"}},
		repeats: 4,
		refused: scripted.ToolCall{Name: "Write", Input: map[string]any{"file_path": "/workspace/out.txt", "content": "x\n"}}})
}

// TestFailurePatternsGeminiInDocker: the same with the Gemini CLI, whose
// executor knows nothing of the patterns. In its auto_edit approval mode
// (acceptEdits) a file write needs no confirmation, and its shell, which
// would, is not offered: calling it is refused.
func TestFailurePatternsGeminiInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	failurePatterns(t, loopCLI{command: "gemini", arguments: `{"max_turns": 20, "permission_mode": "acceptEdits"}`,
		// Created, then overwritten with the same words again and again.
		repeat:  scripted.ToolCall{Name: "write_file", Input: map[string]any{"file_path": "/workspace/out.txt", "content": "x\n"}},
		repeats: 5,
		refused: scripted.ToolCall{Name: "run_shell_command", Input: map[string]any{"command": "echo hi", "description": "check"}}})
}

// loopCLI is a coding-agent CLI, a call of it whose result stops changing
// after a while (made repeats times) and a call it refuses.
type loopCLI struct {
	command, arguments string
	repeat, refused    scripted.ToolCall
	repeats            int
}

func failurePatterns(t *testing.T, cli loopCLI) {
	image := testenv.CLIImage(t, cli.command)
	bin := testenv.Agentbox(t)

	var turns []scripted.Turn
	for range cli.repeats {
		turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{cli.repeat}})
	}
	for range 3 {
		turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{cli.refused}})
	}
	model := scripted.NewServer(&scripted.Script{Turns: append(turns, scripted.Turn{Text: "I am stuck."})})
	t.Cleanup(model.Close)

	dir := t.TempDir()
	files := map[string]string{
		"connectors/model.conn.yao": `{"type": "anthropic", "options": {"host": "` + model.URL + `", "key": "sk-model-key", "model": "claude-sonnet-4-5"}}`,
		"app.jsonc":                 `{"data_root": "data"}`,
		"assistants/coder/package.yao": `{
			"connector": "model",
			"sandbox": {
				"command": "` + cli.command + `", "image": "` + image + `", "timeout": "3m", "max_memory": "1g",
				"arguments": ` + cli.arguments + `
			},
			"failures": {"no_progress": 3, "tool_rejection": 3}
		}`,
	}
	for p, c := range files {
		abs := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	app, err := assistant.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f := app.Assistants["coder"].Failures; f.NoProgress != 3 || f.ToolRejection != 3 {
		t.Fatalf("failures loaded as %+v", f)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{Instance: "pipeline-loops-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	ws, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{
		App: Static{App: app}, Runtimes: map[string]sandbox.Runtime{"docker": rt}, DefaultRuntime: "docker",
		Workspaces: ws, Bridge: &BridgeConfig{Binary: bin, Dir: filepath.Join(os.TempDir(), "abp")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var rec chattest.Recorder
	if _, err := p.Chat(ctx, &Request{UserID: "alice", ChatID: "loop", AssistantID: "coder", Messages: user("Is the job done yet?")}, rec.Emit); err != nil {
		t.Fatalf("turn: %v (events %+v)", err, rec.Events())
	}
	chattest.Check(t, rec.Events())

	var results []string
	got := map[string]map[string]any{}
	for _, e := range rec.Events() {
		switch {
		case e.Event == chat.Start && e.Type == chat.TypeToolResult:
			c, _ := e.Props["content"].(string)
			results = append(results, e.Props["name"].(string)+": "+c)
		case e.Event == chat.Start && e.Type == chat.TypeNotice:
			code, _ := e.Props["code"].(string)
			if _, dup := got[code]; dup && (code == executor.NoticeNoProgress || code == executor.NoticeToolRejection) {
				t.Errorf("notice %s raised twice", code)
			}
			got[code] = e.Props
		}
	}
	t.Logf("tool results: %q", results)
	for code, want := range map[string]struct {
		tool  string
		count int
	}{executor.NoticeNoProgress: {cli.repeat.Name, 3}, executor.NoticeToolRejection: {cli.refused.Name, 3}} {
		n, ok := got[code]
		if !ok {
			t.Errorf("no %s notice; notices %v", code, got)
			continue
		}
		if n["tool"] != want.tool || n["count"] != want.count || n["suggested_action"] == "" || n["suggested_action"] == nil {
			t.Errorf("%s notice = %v, want tool %s, count %d and a suggested action", code, n, want.tool, want.count)
		}
	}
	// Refusals are not failures: no repeated_tool_failure for them.
	if n, ok := got["repeated_tool_failure"]; ok {
		t.Errorf("repeated_tool_failure raised for refusals: %v", n)
	}
	// The refused tool never ran: each call was refused.
	for _, r := range results {
		if c, ok := strings.CutPrefix(r, cli.refused.Name+": "); ok && !executor.IsDenial(c) {
			t.Errorf("a call was not refused: %q", r)
		}
	}
	last := rec.Last()
	if last.Event != chat.Done || last.Final == nil ||
		!slices.Contains(last.Final.Notices, executor.NoticeNoProgress) || !slices.Contains(last.Final.Notices, executor.NoticeToolRejection) {
		t.Errorf("done event = %+v: want both notices listed", last)
	}
}
