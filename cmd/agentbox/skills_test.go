package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/skills"
	"github.com/agentbox/agentbox/store"
)

// skillsApp makes an app with a sandboxed coder (which has a skill
// "house-style") and a store holding proposals of user "dev": p1
// (release-notes), p2 (lint-fix) and p3 (house-style).
func skillsApp(t *testing.T) string {
	t.Helper()
	app := t.TempDir()
	for name, body := range map[string]string{
		"app.jsonc":                    `{"data_root": "data"}`,
		"assistants/coder/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"}, "skills": {"authoring": true}}`,
		"assistants/coder/skills/house-style/SKILL.md": "---\nname: house-style\ndescription: The house style.\n---\nTabs.\n",
		"connectors/claude.conn.yao":                   `{"type": "anthropic", "options": {"key": "$ENV.ANTHROPIC_API_KEY", "model": "claude-sonnet-4-5"}}`,
	} {
		p := filepath.Join(app, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(app, "data", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, name := range []string{"release-notes", "lint-fix", "house-style"} {
		sp := &store.SkillProposal{ID: "p" + string(rune('1'+i)), UserID: "dev", AssistantID: "coder", ChatID: "c1",
			Draft: skills.Draft{Name: name, Description: "Does " + name + ".", Instructions: "Steps for " + name + ".\n",
				Files: []skills.File{{Path: "scripts/run.sh", Content: "echo " + name}}},
			TestPrompt: "try " + name, Status: store.ProposalPending, CreatedAt: at.Add(time.Duration(i) * time.Hour)}
		if err := st.CreateSkillProposal(ctx, sp, 0); err != nil {
			t.Fatal(err)
		}
	}
	return app
}

func TestSkillsCommand(t *testing.T) {
	app := skillsApp(t)
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runCLI(append([]string{"skills"}, args...)...)
		if code != want {
			t.Fatalf("agentbox skills %v = %d, want %d\n%s\n%s", args, code, want, out, errs)
		}
		return out, errs
	}

	out, _ := run(0, "list", "--app", app, "--user", "dev")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[1], "p3 ") || !strings.Contains(lines[3], "release-notes  pending") {
		t.Fatalf("list:\n%s", out)
	}
	if out, _ := run(0, "list", "--app", app); !strings.Contains(out, "no skill proposals") {
		t.Fatalf("another user's list:\n%s", out)
	}
	out, _ = run(0, "show", "--app", app, "--user", "dev", "p1")
	for _, want := range []string{`proposal p1: skill "release-notes" for assistant coder, pending`, "---\nname: release-notes\ndescription: Does release-notes.\n---\n\nSteps for release-notes.\n", "--- scripts/run.sh\necho release-notes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if _, errs := run(1, "show", "--app", app, "p1"); !strings.Contains(errs, `skill proposal "p1": not found`) {
		t.Fatalf("another user's show: %s", errs)
	}
	if _, errs := run(1, "approve", "--app", app, "--user", "dev", "p3"); !strings.Contains(errs, "wins a name clash") {
		t.Fatalf("approving a name the assistant has: %s", errs)
	}
	if _, errs := run(1, "reject", "--app", app, "--user", "dev", "p2"); !strings.Contains(errs, "a reason is required") {
		t.Fatalf("rejecting without a reason: %s", errs)
	}
	if out, _ := run(0, "reject", "--app", app, "--user", "dev", "--reason", "Too vague.", "p2"); !strings.Contains(out, "rejected\nreason: Too vague.") {
		t.Fatalf("reject:\n%s", out)
	}
	if out, _ := run(0, "approve", "--app", app, "--user", "dev", "p1"); !strings.Contains(out, "approved") {
		t.Fatalf("approve:\n%s", out)
	}
	out, _ = run(0, "installed", "--app", app, "--user", "dev", "--json")
	var inst []map[string]any
	if err := json.Unmarshal([]byte(out), &inst); err != nil || len(inst) != 1 || inst[0]["name"] != "release-notes" {
		t.Fatalf("installed: %v\n%s", err, out)
	}
	run(0, "remove", "--app", app, "--user", "dev", "coder", "release-notes")
	if out, _ := run(0, "list", "--app", app, "--user", "dev", "--status", "retired"); !strings.Contains(out, "p1 ") {
		t.Fatalf("retired:\n%s", out)
	}
	run(2, "frobnicate")
	run(2, "approve", "--app", app)
	run(0, "help")
}
