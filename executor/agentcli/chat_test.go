package agentcli_test

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
)

func TestChat(t *testing.T) {
	var log chattest.Recorder
	c := agentcli.NewChat(log.Emit, agentcli.ChatOptions{IDPrefix: "x", MaxEventContent: 8})
	c.Session(agentcli.Session{ID: "s1", Model: "m", MCPServers: []agentcli.ServerStatus{{Name: "gh", Status: "failed"}}})
	c.Thinking("hmm")
	c.Text("Hel")
	c.Text("lo.")
	c.ToolCall("t1", "shell", "command", chat.RawJSON(`{"cmd":"ls"}`))
	c.ToolCall("t1", "shell", "command", nil) // repeated: once
	c.ToolResult("t1", "", "a very long output", false)
	c.ToolResult("t1", "", "again", false) // once
	c.ToolResult("t2", "read", "x", true)  // never announced
	c.Text("Done.")
	c.AddUsage(chat.Usage{InputTokens: 3, OutputTokens: 2, Turns: 1})
	c.AddUsage(chat.Usage{InputTokens: 1, OutputTokens: 1, Turns: 1})
	c.Result("success")
	out := c.Close()
	chattest.Check(t, log.Events())
	if out.SessionID != "s1" || out.Content != "Hello.\n\nDone." || out.Usage.InputTokens != 4 || out.Usage.Turns != 2 || !out.GotResult {
		t.Errorf("outcome %+v", out)
	}
	if len(out.ToolCalls) != 2 || out.ToolCalls[0].Result != "a very l" || !out.ToolCalls[1].IsError || string(out.ToolCalls[1].Input) != "{}" {
		t.Errorf("tool calls %+v", out.ToolCalls)
	}
	if strings.Join(out.Notices, ",") != agentcli.NoticeMCPFailed {
		t.Errorf("notices %v", out.Notices)
	}
	res := log.Starts(chat.TypeToolResult)
	if len(res) != 2 || res[0].Props["truncated"] != true || res[0].Props["content_bytes"] != 18 {
		t.Errorf("results %+v", res)
	}
}

func TestChatFail(t *testing.T) {
	var log chattest.Recorder
	c := agentcli.NewChat(log.Emit, agentcli.ChatOptions{})
	c.Text("partial")
	c.Fail(chat.ErrAuth, "bad key")
	c.Fail(chat.ErrUpstream, "later")
	c.Result("error")
	out := c.Close()
	chattest.Check(t, log.Events())
	if out.Err == nil || out.Err.Code != chat.ErrAuth || out.Subtype != "error" {
		t.Errorf("outcome %+v", out)
	}
}

func TestPrompt(t *testing.T) {
	in := []chat.Message{{Role: chat.RoleUser, Content: "and now?"}}
	hist := []chat.Message{{Role: chat.RoleUser, Content: "hi"}, {Role: chat.RoleAssistant, Content: "hello"}}
	if got := agentcli.Prompt(hist, in, "sess"); got != "and now?" {
		t.Errorf("resumed: %q", got)
	}
	got := agentcli.Prompt(hist, in, "")
	if !strings.Contains(got, "<user>\nhi\n</user>") || !strings.Contains(got, "<assistant>\nhello\n</assistant>") || !strings.HasSuffix(got, "and now?") {
		t.Errorf("new session: %q", got)
	}
}

func TestClassify(t *testing.T) {
	for msg, want := range map[string]string{
		"unexpected status 401 Unauthorized: invalid api key":  chat.ErrAuth,
		`[API Error: {"code":401,"status":"UNAUTHENTICATED"}]`: chat.ErrAuth,
		"Rate limit reached":                         chat.ErrRateLimit,
		"Reached max session turns for this session": chat.ErrMaxTurns,
		"error sending request for url":              chat.ErrNetwork,
		"something odd":                              chat.ErrExecutor,
	} {
		if got := agentcli.Classify(msg); got != want {
			t.Errorf("Classify(%q) = %s, want %s", msg, got, want)
		}
	}
	if agentcli.StatusCode(429, "") != chat.ErrRateLimit || agentcli.StatusCode(503, "") != chat.ErrUpstream || agentcli.StatusCode(0, "quota exceeded") != chat.ErrRateLimit {
		t.Error("StatusCode")
	}
}

func TestStateDir(t *testing.T) {
	if got := agentcli.StateDir("codex", "coder"); got != ".agentbox/codex/assistants/coder" {
		t.Errorf("StateDir = %s", got)
	}
	if got := agentcli.FolderName("../x"); !strings.HasPrefix(got, "id-") || strings.Contains(got, "/") {
		t.Errorf("FolderName = %s", got)
	}
}

// TestChatFailureThreshold: a Chat takes the threshold it is given (the
// driver's Plan.FailureThreshold), and a refused call is no failure.
func TestChatFailureThreshold(t *testing.T) {
	t.Parallel()
	log := &chattest.Recorder{}
	c := agentcli.NewChat(log.Emit, agentcli.ChatOptions{FailureThreshold: 2})
	c.ToolResult("a", "shell", "exit 1", true)
	c.ToolResult("b", "shell", "exec command rejected by user", true)
	if n := len(log.Starts(chat.TypeNotice)); n != 0 {
		t.Fatalf("%d notices after a failure and a refusal", n)
	}
	c.ToolResult("c", "shell", "exit 1", true)
	ev := log.Starts(chat.TypeNotice)
	if len(ev) != 1 || ev[0].Props["code"] != agentcli.NoticeRepeatedToolFailure || ev[0].Props["count"] != 2 {
		t.Fatalf("notices %+v, want repeated_tool_failure at 2", ev)
	}
}
