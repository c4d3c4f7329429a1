// Package skills runs skill authoring end to end (issue 23): a real
// `agentbox serve` whose sandboxed coder runs the real Claude Code CLI in
// Docker against a scripted model. The agent drafts skills with the
// propose_skill host tool (a bad draft first, then fixed ones), a test
// turn tries a draft in a throwaway sandbox, and only an approved skill
// reaches the chat's workspace and the CLI's session init; an unapproved
// or rejected draft never does.
package skills

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/claude"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// skillsDir is where the coder's skills are installed in a chat's
// workspace.
var skillsDir = claude.ConfigPaths("coder").Skills

// The scripted model: one server for every turn of the test, its turns
// picked in order by what each request holds.
func script() *scripted.Script {
	propose := func(in map[string]any) scripted.Turn {
		return scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "mcp__agentbox__propose_skill", Input: in}}}
	}
	after := &scripted.Match{AfterToolResult: "mcp__agentbox__propose_skill"}
	good := propose(map[string]any{
		"name":         "release-notes",
		"description":  "Write release notes from the git log. Use when asked for release notes.",
		"instructions": "# Release notes\n\nRun scripts/notes.sh and group what it prints by kind.\n",
		"files":        []any{map[string]any{"path": "scripts/notes.sh", "content": "#!/bin/sh\necho NOTES-FROM-SCRIPT\n"}},
		"test_prompt":  "TRY-THE-SKILL: write the release notes.",
	})
	good.When = after
	second := propose(map[string]any{
		"name": "lint-fix", "description": "Fix lint errors. Use after a failing lint run.",
		"instructions": "Run the linter, then fix each error.\n",
	})
	second.When = after
	done := scripted.Turn{When: after, Text: "I proposed two skills."}
	return &scripted.Script{Turns: []scripted.Turn{
		// Turn 1 of chat c1: a bad draft, the fixed one, a second one.
		propose(map[string]any{"name": "Release Notes", "description": "notes", "instructions": "---\nname: x\n---\n",
			"files": []any{map[string]any{"path": "../escape.sh", "content": "x"}}}),
		good, second, done,
		// The test turn: the skill is loaded, then its script runs.
		{When: &scripted.Match{Contains: "TRY-THE-SKILL"}, ToolCalls: []scripted.ToolCall{{Name: "Skill", Input: map[string]any{"skill": "release-notes"}}}},
		{When: &scripted.Match{AfterToolResult: "Skill"}, ToolCalls: []scripted.ToolCall{{Name: "Bash",
			Input: map[string]any{"command": skillsDir + "/release-notes/scripts/notes.sh", "description": "run the skill's script"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Release notes: NOTES-FROM-SCRIPT"},
		// Later turns of c1.
		{When: &scripted.Match{Contains: "BEFORE-APPROVAL"}, Text: "Nothing new yet."},
		{When: &scripted.Match{Contains: "AFTER-APPROVAL"}, Text: "Now I have the skill."},
	}}
}

func TestSkillAuthoringEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	image := testenv.Image(t)
	testenv.ClaudeBin(t)
	bin := testenv.Agentbox(t)
	model := scripted.NewServer(script())
	t.Cleanup(model.Close)

	app := filepath.Join(t.TempDir(), "app")
	for name, body := range map[string]string{
		"app.jsonc": `{"data_root": "./data", "sandbox": {"runtime": "docker"},
			"auth": {"tokens": [{"token": "$ENV.T_ALICE", "user": "alice"}, {"token": "$ENV.T_BOB", "user": "bob"}]}}`,
		"connectors/llm/test.conn.yao": `{"type": "anthropic", "options": {"host": "` + model.URL + `", "key": "sk-ant-test", "model": "claude-sonnet-4-5"}}`,
		"assistants/coder/package.yao": `{
			"connector": "llm.test",
			"sandbox": {"command": "claude", "image": "` + image + `", "timeout": "3m",
				"arguments": {"max_turns": 8, "permission_mode": "bypassPermissions"}},
			"skills": {"authoring": true, "test": {"max_turns": 4, "timeout": "2m"}}
		}`,
		"assistants/coder/skills/house-style/SKILL.md": "---\nname: house-style\ndescription: The house style. Use for every change.\n---\nTabs.\n",
	} {
		p := filepath.Join(app, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := start(t, bin, app)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ws := filepath.Join(app, "data", "workspaces", "alice", "c1")

	// Turn 1: the bad draft is refused with what is wrong, the fixed ones
	// are proposed; the CLI's init and the workspace have only the app's
	// skill.
	r := srv.chat(ctx, e2etest.TokenAlice, "coder", "c1", "Make skills of what you did.")
	if r.Err != nil || r.Status != 200 || r.Final() == nil || r.Final().Error != "" {
		t.Fatalf("turn 1: %v %d %s %+v", r.Err, r.Status, r.Body, r.Final())
	}
	results := r.props(chat.TypeToolResult)
	if len(results) != 3 || results[0]["is_error"] != true || results[1]["is_error"] == true || results[2]["is_error"] == true {
		t.Fatalf("tool results = %+v", results)
	}
	refusal, _ := results[0]["content"].(string)
	for _, want := range []string{`name: invalid name "Release Notes"`, "instructions: instructions start with front matter", `files[0].path: path "../escape.sh"`} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, refusal)
		}
	}
	proposed := r.props(chat.TypeSkillProposed)
	if len(proposed) != 2 || proposed[0]["name"] != "release-notes" || proposed[0]["test"] != true || proposed[1]["name"] != "lint-fix" {
		t.Fatalf("skill_proposed = %+v", proposed)
	}
	notesID, lintID := proposed[0]["proposal_id"].(string), proposed[1]["proposal_id"].(string)
	if got := r.sessionSkills(); !slices.Contains(got, "house-style") || slices.Contains(got, "release-notes") || slices.Contains(got, "lint-fix") {
		t.Fatalf("turn 1 init skills = %v", got)
	}
	checkWorkspace(t, ws, []string{"house-style"})

	// The test turn ran after turn 1, in a sandbox of its own, and its
	// outcome is attached to the proposal.
	var p struct {
		Status string `json:"status"`
		Test   *struct {
			Status        string   `json:"status"`
			ChatID        string   `json:"chat_id"`
			Answer        string   `json:"answer"`
			SessionSkills []string `json:"session_skills"`
			SkillLoaded   bool     `json:"skill_loaded"`
			SkillUsed     bool     `json:"skill_used"`
			ToolCalls     []struct {
				Name    string `json:"name"`
				IsError bool   `json:"is_error"`
			} `json:"tool_calls"`
			Usage chat.Usage `json:"usage"`
			Error any        `json:"error"`
		} `json:"test"`
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		code, body := srv.do(t, "GET", "/api/skills/proposals/"+notesID, e2etest.TokenAlice, "")
		if code != 200 {
			t.Fatalf("proposal = %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		if p.Test != nil && p.Test.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test turn did not end: %s", body)
		}
		time.Sleep(250 * time.Millisecond)
	}
	tr := p.Test
	if tr.Status != "completed" || !tr.SkillLoaded || !tr.SkillUsed || !strings.Contains(tr.Answer, "NOTES-FROM-SCRIPT") || tr.Usage.InputTokens == 0 {
		t.Fatalf("test outcome = %+v", tr)
	}
	if len(tr.ToolCalls) != 2 || tr.ToolCalls[0].Name != "Skill" || tr.ToolCalls[1].Name != "Bash" || tr.ToolCalls[1].IsError {
		t.Fatalf("test tool calls = %+v", tr.ToolCalls)
	}
	if !slices.Contains(tr.SessionSkills, "house-style") || slices.Contains(tr.SessionSkills, "lint-fix") {
		t.Fatalf("test init skills = %v", tr.SessionSkills)
	}
	if _, err := os.Stat(filepath.Join(app, "data", "workspaces", "alice", tr.ChatID)); !os.IsNotExist(err) {
		t.Errorf("the test turn's workspace is left: %v", err)
	}
	if code, _ := srv.do(t, "GET", "/api/skills/proposals/"+notesID, e2etest.TokenBob, ""); code != 404 {
		t.Fatalf("bob reads alice's proposal: %d", code)
	}

	// Turn 2, before any decision: nothing proposed reaches the sandbox.
	r = srv.chat(ctx, e2etest.TokenAlice, "coder", "c1", "BEFORE-APPROVAL")
	if r.Err != nil || r.Final() == nil || r.Final().Error != "" {
		t.Fatalf("turn 2: %v %d %s", r.Err, r.Status, r.Body)
	}
	if got := r.sessionSkills(); slices.Contains(got, "release-notes") || slices.Contains(got, "lint-fix") {
		t.Fatalf("turn 2 init skills = %v", got)
	}
	checkWorkspace(t, ws, []string{"house-style"})

	// Approve one, reject the other (with a reason): only the approved
	// one is in turn 3's workspace and init.
	if code, body := srv.do(t, "POST", "/api/skills/proposals/"+notesID+"/approve", e2etest.TokenBob, ""); code != 404 {
		t.Fatalf("bob approves alice's proposal: %d %s", code, body)
	}
	if code, body := srv.do(t, "POST", "/api/skills/proposals/"+notesID+"/approve", e2etest.TokenAlice, ""); code != 200 || !strings.Contains(body, `"status":"approved"`) {
		t.Fatalf("approve = %d %s", code, body)
	}
	if code, body := srv.do(t, "POST", "/api/skills/proposals/"+lintID+"/reject", e2etest.TokenAlice, `{"reason":"It does not name the linter."}`); code != 200 || !strings.Contains(body, `"reason":"It does not name the linter."`) {
		t.Fatalf("reject = %d %s", code, body)
	}
	r = srv.chat(ctx, e2etest.TokenAlice, "coder", "c1", "AFTER-APPROVAL")
	if r.Err != nil || r.Final() == nil || r.Final().Error != "" {
		t.Fatalf("turn 3: %v %d %s", r.Err, r.Status, r.Body)
	}
	if got := r.sessionSkills(); !slices.Contains(got, "release-notes") || !slices.Contains(got, "house-style") || slices.Contains(got, "lint-fix") {
		t.Fatalf("turn 3 init skills = %v", got)
	}
	checkWorkspace(t, ws, []string{"house-style", "release-notes"})
	b, err := os.ReadFile(filepath.Join(ws, skillsDir, "release-notes", "SKILL.md"))
	if err != nil || !strings.HasPrefix(string(b), "---\nname: release-notes\n") {
		t.Fatalf("installed SKILL.md: %v\n%s", err, b)
	}
	if st, err := os.Stat(filepath.Join(ws, skillsDir, "release-notes", "scripts", "notes.sh")); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("installed script: %v %v", st, err)
	}
	if code, body := srv.do(t, "GET", "/api/skills", e2etest.TokenAlice, ""); code != 200 || !strings.Contains(body, `"name":"release-notes"`) || strings.Contains(body, "lint-fix") {
		t.Fatalf("alice's skills = %d %s", code, body)
	}
	// Bob's turns never get alice's skill.
	r = srv.chat(ctx, e2etest.TokenBob, "coder", "c1", "BEFORE-APPROVAL")
	if got := r.sessionSkills(); r.Final() == nil || slices.Contains(got, "release-notes") {
		t.Fatalf("bob's init skills = %v (%v %s)", got, r.Err, r.Body)
	}
}

// checkWorkspace checks the skills in a chat's workspace.
func checkWorkspace(t *testing.T, ws string, want []string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(ws, skillsDir))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("workspace skills = %v, want %v", got, want)
	}
}

// server is a running `agentbox serve`.
type server struct{ *e2etest.Server }

// start runs `agentbox serve` on app and waits until it answers; cleanup
// stops it.
func start(t *testing.T, bin, app string) *server {
	t.Helper()
	return &server{e2etest.Serve(t, app, e2etest.Options{
		Bin:      bin,
		Env:      append([]string{"TMPDIR=" + e2etest.ShortDir(t)}, e2etest.TokenEnv()...),
		Args:     []string{"--runtime", "docker"},
		StopWait: 90 * time.Second,
	})}
}

// reply is one native chat turn.
type reply struct{ e2etest.Reply }

// props are the props of the messages of type typ, in order.
func (r reply) props(typ string) []map[string]any {
	var out []map[string]any
	for _, e := range r.Events {
		if e.Type == typ && e.Event == chat.Start {
			out = append(out, e.Props)
		}
	}
	return out
}

// sessionSkills are the skills of the CLI's session init.
func (r reply) sessionSkills() []string {
	var out []string
	for _, p := range r.props(chat.TypeSession) {
		list, _ := p["skills"].([]any)
		for _, s := range list {
			if name, ok := s.(string); ok {
				out = append(out, name)
			}
		}
	}
	return out
}

// chat sends one turn and reads its stream to the end.
func (s *server) chat(ctx context.Context, token, assistant, chatID, message string) reply {
	return reply{s.Chat(ctx, token, assistant, chatID, message)}
}

// do sends method path with token and a JSON body, and returns the
// status and the body of the answer.
func (s *server) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	return s.Send(t, method, path, token, "application/json", strings.NewReader(body))
}
