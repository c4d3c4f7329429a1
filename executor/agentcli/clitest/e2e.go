package clitest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/skills"
)

// EndToEnd is the Docker end-to-end scenario every CLI executor passes,
// in terms of its CLI's tools.
type EndToEnd struct {
	// CLI is the sandbox command ("codex"); Exec its executor.
	CLI  string
	Exec executor.Executor
	// Type is the upstream connector's type.
	Type string
	// Shell is the CLI's shell tool as the model calls it, and Input
	// turns a command into its input.
	Shell string
	Input func(command string) map[string]any
	// HostTool is the name the model calls the bridge's lookup_order
	// host tool by.
	HostTool string
	// Skills reports whether the CLI's requests show the assistant's
	// skill (the CLI supports skills).
	Skills bool
}

// hasNotice reports whether log has a notice with code whose prop key is
// value.
func hasNotice(log *chattest.Recorder, code, key, value string) bool {
	for _, e := range log.Starts("notice") {
		if e.Props["code"] == code && e.Props[key] == value {
			return true
		}
	}
	return false
}

// Denied is the Docker scenario of a permission_mode that leaves the
// shell to a user's approval: the model calls the shell, the CLI refuses
// (a headless run cannot ask), and the turn raises a permission_denied
// notice for it. Run returns the turn's result and error for the CLI's
// own checks (opencode ends the turn, the Gemini CLI goes on).
type Denied struct {
	CLI  string
	Exec executor.Executor
	Type string
	// Shell is the shell tool as the model calls it (and the notice
	// names it), Input turns a command into its input.
	Shell string
	Input func(command string) map[string]any
	// Mode is the permission_mode.
	Mode string
}

// Run runs the scenario.
func (d Denied) Run(t *testing.T) (*executor.Result, *chattest.Recorder, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*turnTimeout)
	defer cancel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Text: "Running.", ToolCalls: []scripted.ToolCall{{Name: d.Shell, Input: d.Input("echo hi > x.txt")}}},
		{When: &scripted.Match{AfterToolResult: d.Shell}, Text: "Could not run it."},
	}})
	t.Cleanup(srv.Close)
	dk := NewDocker(t, ctx, d.CLI, d.Exec, srv, d.Type)
	res, log, ws, err := dk.Turn(ctx, &assistant.Assistant{ID: "a"}, "chat-denied", "write x.txt", chat.Arguments{PermissionMode: d.Mode})
	if !hasNotice(log, agentcli.NoticePermissionDenied, "tool", d.Shell) {
		t.Errorf("no permission_denied notice for %s: %v", d.Shell, log.Starts("notice"))
	}
	if _, serr := os.Stat(filepath.Join(ws.Dir(), "x.txt")); serr == nil {
		t.Errorf("the refused command ran: x.txt exists")
	}
	return res, log, err
}

// Run runs the scenario: turn one calls the shell (which writes to the
// persistent workspace) and the host tool through the bridge, then
// answers; turn two, in a fresh container, resumes the session, so the
// model sees turn one's tool history; a broken MCP server does not stop
// a turn. No real key reaches the sandbox or the events.
func (e EndToEnd) Run(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*turnTimeout)
	defer cancel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Text: "Writing.", ToolCalls: []scripted.ToolCall{{Name: e.Shell, Input: e.Input("echo first > notes.txt && id -un")}}},
		{When: &scripted.Match{AfterToolResult: e.Shell}, ToolCalls: []scripted.ToolCall{{Name: e.HostTool, Input: map[string]any{"order_id": "A-17"}}}},
		{When: &scripted.Match{AfterToolResult: e.HostTool}, Text: "Done: A-17 shipped."},
		{When: &scripted.Match{Contains: "what changed"}, Text: "notes.txt has one line."},
	}})
	t.Cleanup(srv.Close)
	var called []string
	lookup := bridge.Tool{
		Name: "lookup_order", Description: "Look up an order's shipping status by id.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`),
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			called = append(called, string(args))
			return map[string]string{"order_id": "A-17", "status": "shipped"}, nil
		},
	}
	d := NewDocker(t, ctx, e.CLI, e.Exec, srv, e.Type, lookup)
	skillDir := filepath.Join(t.TempDir(), "code-check")
	if err := os.MkdirAll(skillDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skillDir, "SKILL.md"), []byte("---\nname: code-check\ndescription: Check code for bugs.\n---\n# Code check\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &assistant.Assistant{
		ID:         "coder",
		Skills:     []*skills.Skill{{Name: "code-check", Description: "Check code for bugs.", Dir: skillDir}},
		MCP:        []assistant.MCPRef{{ServerID: "broken"}},
		MCPServers: map[string]*assistant.MCPServer{"broken": {ID: "broken", Transport: "stdio", Command: "/nonexistent/mcp"}},
	}

	res, log, ws, err := d.Turn(ctx, a, "chat-e2e", "make notes", chat.Arguments{})
	if err != nil {
		t.Fatalf("turn 1: %v\nrequests: %d", err, len(srv.Requests()))
	}
	if got, err := os.ReadFile(filepath.Join(ws.Dir(), "notes.txt")); err != nil || string(got) != "first\n" {
		t.Errorf("notes.txt = %q, %v", got, err)
	}
	if len(res.ToolCalls) != 2 || !strings.Contains(res.ToolCalls[0].Result, "agent") || !strings.Contains(res.ToolCalls[1].Result, "shipped") {
		t.Errorf("tool calls %+v", res.ToolCalls)
	}
	if len(called) != 1 || !strings.Contains(called[0], "A-17") {
		t.Errorf("host tool calls %v; tools offered %v", called, srv.TurnRequests()[0].ToolNames())
	}
	if !strings.HasSuffix(res.Content, "Done: A-17 shipped.") || res.SessionID == "" {
		t.Errorf("content %q session %q", res.Content, res.SessionID)
	}
	if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v", res.Usage)
	}
	if s := log.Starts(chat.TypeSession); len(s) != 1 {
		t.Errorf("session events %+v", s)
	}
	if !hasNotice(log, agentcli.NoticeMCPFailed, "server", "broken") {
		t.Errorf("no mcp_server_failed notice for the broken MCP server: %v", log.Starts("notice"))
	}
	if e.Skills {
		first := srv.TurnRequests()[0]
		if !strings.Contains(string(first.Body), "code-check") {
			t.Errorf("the first request does not show the skill code-check")
		}
	}

	res2, _, _, err := d.Turn(ctx, a, "chat-e2e", "what changed?", chat.Arguments{},
		chat.Message{Role: chat.RoleUser, Content: "make notes"}, chat.Message{Role: chat.RoleAssistant, Content: res.Content})
	if err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	if res2.Content != "notes.txt has one line." || res2.SessionID != res.SessionID {
		t.Errorf("turn 2: %q session %s, want session %s", res2.Content, res2.SessionID, res.SessionID)
	}
	reqs := srv.TurnRequests()
	last := reqs[len(reqs)-1]
	if len(last.AllToolResults()) < 2 {
		t.Errorf("the resumed request lacks turn one's tool results: %d", len(last.AllToolResults()))
	}
	if strings.Contains(last.LastUserText(), "conversation so far") {
		t.Errorf("a resumed session got the history in its prompt")
	}
}
