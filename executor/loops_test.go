package executor

import (
	"slices"
	"strconv"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

// step is one event a run sends: a tool result, or a permission_denied
// notice when denied is set.
type step struct {
	tool, content string
	isErr, denied bool
	parent        string
}

func play(w *Watch, steps []step) {
	for i, s := range steps {
		id := "t" + strconv.Itoa(i)
		if s.denied {
			chat.WholeDenial(w.Emit, "n"+id, NoticePermissionDenied, "denied", chat.Denial{Tool: s.tool, ToolUseID: id}, nil)
		}
		chat.WholeToolResult(w.Emit, "r"+id, chat.ToolResult{ToolCallID: id, Name: s.tool, Content: s.content, IsError: s.isErr, Parent: s.parent})
	}
}

// raised returns the notices Watch sent (not those passed through).
func raised(rec *chattest.Recorder) []chat.Event {
	var out []chat.Event
	for _, e := range rec.Starts(chat.TypeNotice) {
		if c := e.Props["code"]; c == NoticeNoProgress || c == NoticeToolRejection {
			out = append(out, e)
		}
	}
	return out
}

func TestWatch(t *testing.T) {
	t.Parallel()
	ok := func(tool, content string) step { return step{tool: tool, content: content} }
	denial := "Claude requested permissions to use Write, but you haven't granted it yet."
	tests := []struct {
		name     string
		failures assistant.Failures
		steps    []step
		want     []string // code:tool:count of each notice raised
	}{
		{"new results are progress", assistant.Failures{},
			[]step{ok("Bash", "a"), ok("Bash", "b"), ok("Read", "c"), ok("Grep", "d"), ok("Bash", "e")}, nil},
		{"the same result again and again", assistant.Failures{},
			[]step{ok("Bash", "x"), ok("Bash", "x"), ok("Read", " x\n"), ok("Bash", ""), ok("Bash", "x"), ok("Bash", "x")},
			[]string{"no_progress:Bash:4"}},
		{"empty results", assistant.Failures{NoProgress: 2},
			[]step{ok("Bash", ""), ok("Bash", "  ")}, []string{"no_progress:Bash:2"}},
		{"new content arms it again", assistant.Failures{NoProgress: 2},
			[]step{ok("Bash", ""), ok("Bash", ""), ok("Bash", ""), ok("Bash", "new"), ok("Bash", ""), ok("Bash", "new")},
			[]string{"no_progress:Bash:2", "no_progress:Bash:2"}},
		{"failures neither count nor reset", assistant.Failures{NoProgress: 2},
			[]step{ok("Bash", ""), {tool: "Bash", content: "exit 1", isErr: true}, ok("Bash", "")}, []string{"no_progress:Bash:2"}},
		{"a subagent's results are its own", assistant.Failures{NoProgress: 2},
			[]step{{tool: "Bash", parent: "task1"}, {tool: "Bash", parent: "task1"}}, nil},
		{"no progress off", assistant.Failures{NoProgress: assistant.Off},
			[]step{ok("Bash", ""), ok("Bash", ""), ok("Bash", ""), ok("Bash", ""), ok("Bash", "")}, nil},
		{"the same tool denied by its result", assistant.Failures{},
			[]step{{tool: "Write", content: denial, isErr: true}, {tool: "Write", content: denial, isErr: true}, {tool: "Write", content: denial, isErr: true}},
			[]string{"tool_rejection:Write:3"}},
		{"a notice and its result are one denial", assistant.Failures{ToolRejection: 2},
			[]step{{tool: "Write", content: denial, isErr: true, denied: true}, {tool: "Write", content: "refused", isErr: true, denied: true}},
			[]string{"tool_rejection:Write:2"}},
		{"other tools' denials count apart", assistant.Failures{ToolRejection: 2},
			[]step{{tool: "Write", content: denial, isErr: true}, {tool: "Bash", content: "Error: No such tool available: Bash", isErr: true}, {tool: "Write", content: denial, isErr: true}},
			[]string{"tool_rejection:Write:2"}},
		{"a success of the tool starts anew", assistant.Failures{ToolRejection: 2},
			[]step{{tool: "Write", content: denial, isErr: true}, ok("Write", "written"), {tool: "Write", content: denial, isErr: true}}, nil},
		{"a failure is no denial", assistant.Failures{ToolRejection: 2},
			[]step{{tool: "Bash", content: "cat: x: Permission denied", isErr: true}, {tool: "Bash", content: "cat: x: Permission denied", isErr: true}}, nil},
		{"rejection off", assistant.Failures{ToolRejection: assistant.Off},
			[]step{{tool: "Write", isErr: true, denied: true}, {tool: "Write", isErr: true, denied: true}, {tool: "Write", isErr: true, denied: true}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec chattest.Recorder
			w := NewWatch(rec.Emit, &assistant.Assistant{Failures: tt.failures})
			play(w, tt.steps)
			var got []string
			for _, e := range raised(&rec) {
				got = append(got, e.Props["code"].(string)+":"+e.Props["tool"].(string)+":"+strconv.Itoa(e.Props["count"].(int)))
				if s, _ := e.Props["suggested_action"].(string); s == "" || e.Text != e.Props["message"] {
					t.Errorf("notice %+v: want a message and a suggested_action", e.Props)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("notices = %q, want %q", got, tt.want)
			}
			if codes := w.Notices(); len(codes) != len(tt.want) {
				t.Errorf("Notices() = %q", codes)
			}
			chattest.Check(t, rec.Events())
		})
	}
}

// TestIsDenial: the refusals each CLI words (from their own sources) are
// denials; failures of a tool that ran are not.
func TestIsDenial(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		content string
		want    bool
	}{
		{"Claude requested permissions to write to /workspace/a.txt, but you haven't granted it yet.", true},
		{"<tool_use_error>Error: No such tool available: Write</tool_use_error>", true},
		{"Tool execution denied by policy.", true},
		{`Tool "run_shell_command" requires user confirmation, which is not supported in non-interactive mode.`, true},
		{"exec command rejected by user", true},
		{"The user rejected permission to use this specific tool call.", true},
		{"The user has specified a rule which prevents you from using this specific tool call.", true},
		{"Tool call rejected by the permission configuration", true},
		{`Tool "run_shell_command" not found. Did you mean one of: "update_topic"?`, true},
		{"cat: /root/x: Permission denied", false},
		{"exit status 1", false},
		{"", false},
	} {
		if got := IsDenial(tt.content); got != tt.want {
			t.Errorf("IsDenial(%q) = %v, want %v", tt.content, got, tt.want)
		}
	}
}

func TestFailureThreshold(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a    *assistant.Assistant
		want int
	}{
		{nil, assistant.DefaultRepeatedToolFailure},
		{&assistant.Assistant{}, assistant.DefaultRepeatedToolFailure},
		{&assistant.Assistant{Failures: assistant.Failures{RepeatedToolFailure: 5}}, 5},
		{&assistant.Assistant{Failures: assistant.Failures{RepeatedToolFailure: assistant.Off}}, int(^uint(0) >> 1)},
	} {
		if got := FailureThreshold(tt.a); got != tt.want {
			t.Errorf("FailureThreshold(%+v) = %d, want %d", tt.a, got, tt.want)
		}
	}
}
