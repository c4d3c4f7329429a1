package claude

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/skills"
)

// plantConfig writes, as an agent could, settings with hooks and env,
// memory files, skills, agents and commands into the workspace and into
// the assistant's config folder; hooks touch files named hook-WHERE in
// the workspace, env sets FORGED_WHERE, text carries MARKER-WHAT.
func plantConfig(t *testing.T, ws, assistantID string) {
	t.Helper()
	hook := func(where string) string {
		return `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch ` + ws + `/hook-` + where + `"}]}],` +
			`"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"touch ` + ws + `/hook-` + where + `"}]}]},` +
			`"env":{"FORGED_` + strings.ToUpper(where) + `":"1"}}`
	}
	cfg := filepath.Join(ws, ConfigPaths(assistantID).Config)
	enc := strings.ReplaceAll(ws, "/", "-")
	for f, c := range map[string]string{
		ws + "/.claude/settings.json":                          hook("project"),
		ws + "/.claude/settings.local.json":                    hook("local"),
		ws + "/CLAUDE.md":                                      "MARKER-CLAUDEMD-PROJECT",
		ws + "/CLAUDE.local.md":                                "MARKER-CLAUDEMD-LOCAL",
		ws + "/.claude/CLAUDE.md":                              "MARKER-CLAUDEMD-DOTCLAUDE",
		ws + "/.claude/agents/evilproj.md":                     "---\nname: evilproj\ndescription: MARKER-AGENT-PROJECT\n---\nx\n",
		ws + "/.claude/commands/evilcmdproj.md":                "MARKER-CMD-PROJECT",
		ws + "/.claude/skills/evilskillproj/SKILL.md":          "---\nname: evilskillproj\ndescription: MARKER-SKILL-PROJECT\n---\nx\n",
		cfg + "/settings.json":                                 hook("user"),
		cfg + "/CLAUDE.md":                                     "MARKER-CLAUDEMD-USER",
		cfg + "/agents/eviluser.md":                            "---\nname: eviluser\ndescription: MARKER-AGENT-USER\n---\nx\n",
		cfg + "/commands/evilcmduser.md":                       "MARKER-CMD-USER",
		cfg + "/skills/evilskilluser/SKILL.md":                 "---\nname: evilskilluser\ndescription: MARKER-SKILL-USER\n---\nx\n",
		cfg + "/projects/" + enc + "/memory/MEMORY.md":         "MARKER-AUTOMEM",
		filepath.Join(ws, ConfigRoot, "settings.json"):         hook("former"),
		filepath.Join(ws, ConfigRoot, "skills/old/SKILL.md"):   "---\nname: old\ndescription: MARKER-SKILL-FORMER\n---\nx\n",
		filepath.Join(ws, ConfigRoot, "CLAUDE.md"):             "MARKER-CLAUDEMD-FORMER",
		filepath.Join(ws, ".agentbox/claude/agents/former.md"): "---\nname: former\ndescription: MARKER-AGENT-FORMER\n---\nx\n",
	} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		writeHostFile(t, f, c)
	}
}

// TestOnlyDefinitionConfigures: settings, hooks, env, memory files,
// skills, agents and commands an agent wrote into the workspace or the
// config folder are not loaded by the next run, of this assistant or
// another one in the same chat; the session still resumes.
func TestOnlyDefinitionConfigures(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		ws := sb.ws.Dir()
		skillDir := filepath.Join(t.TempDir(), "defined")
		if err := os.MkdirAll(skillDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeHostFile(t, filepath.Join(skillDir, "SKILL.md"), "---\nname: defined\ndescription: The assistant's own skill.\n---\nx\n")
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "env | grep FORGED_; echo END", "description": "env"}}}},
			{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "First answer."},
			{When: &scripted.Match{Contains: "again"}, Text: "Second answer."},
			{When: &scripted.Match{Contains: "other"}, Text: "Other assistant's answer."},
		}})
		t.Cleanup(srv.Close)
		e := New(Options{Binary: cli.Bin})
		a := &assistant.Assistant{ID: "coder", Skills: []*skills.Skill{{Name: "defined", Description: "The assistant's own skill.", Dir: skillDir}}}
		turn := func(a *assistant.Assistant, input string) (*chattest.Recorder, string) {
			log := &chattest.Recorder{}
			req := newRequest(sb, srv, "chat-iso", input, log)
			req.Assistant = a
			req.Timeout = time.Minute
			res, err := e.Run(t.Context(), req)
			if err != nil {
				t.Fatalf("%s %q: %v", a.ID, input, err)
			}
			return log, res.Content
		}

		// What the agent could leave behind, before the first run and
		// between the runs.
		plantConfig(t, ws, "coder")
		log1, _ := turn(a, "show the environment")
		plantConfig(t, ws, "coder")
		log2, answer := turn(a, "again please")
		plantConfig(t, ws, "coder")
		b := &assistant.Assistant{ID: "reviewer"}
		log3, _ := turn(b, "the other one")

		seen := ""
		for _, r := range srv.Requests() {
			seen += string(r.Body)
		}
		for _, l := range []*chattest.Recorder{log1, log2, log3} {
			for _, ev := range l.Events() {
				seen += ev.Text
				if c, ok := ev.Props["content"].(string); ok {
					seen += c
				}
			}
		}
		for _, m := range []string{"MARKER-", "FORGED_PROJECT=", "FORGED_LOCAL=", "FORGED_USER=", "FORGED_FORMER=", "evilskill", "eviluser", "evilproj", "evilcmd"} {
			if i := strings.Index(seen, m); i >= 0 {
				t.Errorf("planted configuration was loaded: %q", seen[i:min(len(seen), i+40)])
			}
		}
		for _, where := range []string{"project", "local", "user", "former"} {
			if _, err := os.Stat(filepath.Join(ws, "hook-"+where)); err == nil {
				t.Errorf("the %s hook ran", where)
			}
		}
		if answer != "Second answer." {
			t.Errorf("second turn: %q", answer)
		}
		if last := srv.TurnRequests()[2]; !strings.Contains(string(last.Body), "show the environment") {
			t.Error("the second turn did not resume the first")
		}
		skillsOf := func(l *chattest.Recorder) []string {
			s := l.Starts(chat.TypeSession)
			if len(s) != 1 {
				t.Fatalf("%d session events", len(s))
			}
			list, _ := s[0].Props["skills"].([]string)
			return list
		}
		if s := skillsOf(log2); !slices.Contains(s, "defined") {
			t.Errorf("the assistant's skill is missing: %v", s)
		}
		if s := skillsOf(log3); slices.Contains(s, "defined") {
			t.Errorf("another assistant's skill was loaded: %v", s)
		}
	})
}
