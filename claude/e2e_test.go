package claude

import (
	"context"
	"os"
	"path/filepath"
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
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/skills"
)

// TestDockerEndToEnd runs the real CLI of every supported version in its
// sandbox image against a scripted model: a Write and a Bash call change the persistent workspace,
// a second request in a fresh container resumes the session with the
// first turn's tool history, the assistant's skill shows up in the init
// event and an MCP server that cannot start yields a notice.
func TestDockerEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		dockerEndToEnd(t, testenv.RequireImage(t, cli.Image), cli.Version)
	})
}

func dockerEndToEnd(t *testing.T, img, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{Instance: "claude-e2e-" + version, Image: img, Network: sandbox.NetworkHost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	endToEnd(ctx, t, rt, img, nil)
}

// TestKubernetesEndToEnd runs the same turns in pods of the local cluster
// (the pinned version's image, which `make cluster` imports), with the
// node's network (allowed for the test) so the CLI reaches the scripted
// model on this host's loopback.
func TestKubernetesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts pods")
	}
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "claude-e2e-test", AllowHostNetwork: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	endToEnd(ctx, t, rt, k8stest.Image(), func(sb sandbox.Sandbox) {
		// Sizing figures for the README: what a turn of the CLI took.
		t.Logf("pod %s: peak memory %s bytes, CPU %s ns", sb.ID(),
			k8stest.PodCgroup(t, sb, "memory", "memory.max_usage_in_bytes"), k8stest.PodCgroup(t, sb, "cpuacct", "cpuacct.usage"))
	})
}

// endToEnd runs the turns on rt with image img; observe, when set, looks
// at each sandbox after its turn.
func endToEnd(ctx context.Context, t *testing.T, rt sandbox.Runtime, img string, observe func(sandbox.Sandbox)) {
	t.Helper()
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}

	skillDir := filepath.Join(t.TempDir(), "code-check")
	if err := os.MkdirAll(skillDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeHostFile(t, filepath.Join(skillDir, "SKILL.md"), "---\nname: code-check\ndescription: Check code for bugs.\n---\n# Code check\n")
	a := &assistant.Assistant{
		ID:         "coder",
		Skills:     []*skills.Skill{{Name: "code-check", Description: "Check code for bugs.", Dir: skillDir}},
		MCP:        []assistant.MCPRef{{ServerID: "broken"}},
		MCPServers: map[string]*assistant.MCPServer{"broken": {ID: "broken", Transport: "stdio", Command: "/nonexistent/mcp"}},
	}
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Text: "Writing.", ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{
			"file_path": "/workspace/src/notes.txt", "content": "first\n"}}}},
		{When: &scripted.Match{AfterToolResult: "Write"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{
			"command": "echo second >> src/notes.txt && id -un", "description": "append"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Done."},
		{When: &scripted.Match{Contains: "what changed"}, Text: "notes.txt has two lines."},
	}})
	t.Cleanup(srv.Close)
	e := New(Options{})

	turn := func(input string) (*executor.Result, *chattest.Recorder, *sandbox.Workspace) {
		ws, release, err := wss.Acquire(ctx, "alice", "chat-e2e")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		sb, err := rt.Create(ctx, sandbox.Spec{UserID: "alice", ChatID: "chat-e2e", Workspace: ws, Image: img, Network: sandbox.NetworkHost})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Remove(context.Background())
		log := &chattest.Recorder{}
		res, err := e.Run(ctx, &executor.Request{
			Assistant: a, UserID: "alice", ChatID: "chat-e2e",
			System:    "You are a careful coding assistant.",
			Input:     []chat.Message{{Role: chat.RoleUser, Content: input}},
			Connector: executor.Connection{Type: "anthropic", Host: srv.URL, Key: testKey, Model: "claude-test"},
			Sandbox:   sb, Timeout: 2 * time.Minute, Emit: log.Emit,
		})
		if err != nil {
			t.Fatalf("run %q: %v", input, err)
		}
		if observe != nil {
			observe(sb)
		}
		return res, log, ws
	}

	res, log1, ws := turn("make notes")
	got, err := os.ReadFile(filepath.Join(ws.Dir(), "src", "notes.txt"))
	if err != nil || string(got) != "first\nsecond\n" {
		t.Fatalf("notes.txt = %q, %v", got, err)
	}
	if len(res.ToolCalls) != 2 || !strings.Contains(res.ToolCalls[1].Result, "agent") {
		t.Errorf("tool calls %+v", res.ToolCalls)
	}
	sess := log1.Starts(chat.TypeSession)
	if len(sess) != 1 {
		t.Fatalf("session events %+v", sess)
	}
	if sk, _ := sess[0].Props["skills"].([]string); !contains(sk, "code-check") {
		t.Errorf("skill missing from init: %v", sess[0].Props["skills"])
	}
	var mcpNotice bool
	for _, n := range log1.Starts(chat.TypeNotice) {
		if n.Props["code"] == NoticeMCPFailed && n.Props["server"] == "broken" {
			mcpNotice = true
		}
	}
	if !mcpNotice {
		t.Errorf("no mcp_server_failed notice; notices %v", res.Notices)
	}

	res2, _, _ := turn("what changed?")
	if res2.Content != "notes.txt has two lines." || res2.SessionID != res.SessionID {
		t.Errorf("second turn: %q session %s vs %s", res2.Content, res2.SessionID, res.SessionID)
	}
	reqs := srv.TurnRequests()
	last := string(reqs[len(reqs)-1].Body)
	for _, want := range []string{`"name":"Write"`, `"name":"Bash"`, "make notes"} {
		if !strings.Contains(last, want) {
			t.Errorf("resumed request lacks %s", want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
