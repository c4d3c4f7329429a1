package assistant

import (
	"strings"
	"testing"
	"time"
)

// TestLoadApproval: app.jsonc's policy is the default of the assistants
// without one; a bad rule or timeout, a policy for a CLI that cannot ask
// and an ask rule Claude Code never asks are problems at their lines;
// the app's policy is left out, with a warning, for a CLI that cannot ask.
func TestLoadApproval(t *testing.T) {
	t.Parallel()
	dir := writeApp(t, map[string]string{
		"connectors/claude.conn.yao":      claudeConn,
		"app.jsonc":                       `{"approval": {"ask": ["Bash(git push:*)"], "timeout": "90s"}}`,
		"assistants/inherits/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"}}`,
		"assistants/own/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"},
			"approval": {"ask": ["Edit(src/**)"], "deny": ["Read(secrets/**)"]}}`,
		"assistants/badrule/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"},
			"approval": {"ask": ["Bash(git push:*"], "timeout": "forever"}}`,
		"assistants/readask/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"},
			"approval": {"ask": ["Read"]}}`,
		"assistants/cursor/package.yao": `{"connector": "claude", "sandbox": {"command": "cursor"},
			"approval": {"deny": ["Bash"]}}`,
		"assistants/cursorapp/package.yao": `{"connector": "claude", "sandbox": {"command": "cursor"}}`,
		"assistants/codexapp/package.yao":  `{"connector": "claude", "sandbox": {"command": "codex"}}`,
		"assistants/gemini/package.yao": `{"connector": "claude", "sandbox": {"command": "gemini"},
			"approval": {"ask": ["Bash(git push:*)", "Read"]}}`,
	})
	app, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := app.Assistants["inherits"].Approval; p == nil || len(p.Ask) != 1 || p.Ask[0].Text != "Bash(git push:*)" || p.Timeout != 90*time.Second {
		t.Errorf("inherited policy: %+v", p)
	}
	if p := app.Assistants["own"].Approval; p == nil || len(p.Ask) != 1 || len(p.Deny) != 1 || p.Timeout != 2*time.Minute {
		t.Errorf("own policy: %+v", p)
	}
	if a := app.Assistants["cursorapp"]; a == nil || a.Approval != nil {
		t.Errorf("cursor with the app's policy: %+v", a)
	}
	// The CLIs that ask through their own protocols keep the policy, the
	// app's too; an ask rule for a read is theirs to ask.
	if a := app.Assistants["codexapp"]; a == nil || a.Approval == nil || len(a.Approval.Ask) != 1 {
		t.Errorf("codex with the app's policy: %+v", a)
	}
	if a := app.Assistants["gemini"]; a == nil || a.Approval == nil || len(a.Approval.Ask) != 2 {
		t.Errorf("gemini with its policy: %+v (failed %v)", a, app.Failed["gemini"])
	}
	for id, want := range map[string][]string{
		"badrule": {`approval.ask[0] "Bash(git push:*": an argument pattern ends with ")"`, `approval.timeout "forever"`},
		"readask": {`approval.ask[0] "Read": Claude Code reads, lists and searches its workspace without asking`},
		"cursor":  {`approval: the cursor command's CLI runs its tools without asking agentbox`},
	} {
		f := app.Failed[id]
		if f == nil {
			t.Errorf("%s loaded", id)
			continue
		}
		var got []string
		for _, p := range f.Problems {
			got = append(got, p.String())
		}
		all := strings.Join(got, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: problems %s\nwant %s", id, all, w)
			}
		}
		if !strings.Contains(all, "package.yao:") {
			t.Errorf("%s: problems without positions: %s", id, all)
		}
	}
	var warned bool
	for _, w := range app.Warnings {
		warned = warned || strings.Contains(w.String(), "approval policy does not apply: the cursor command's CLI")
	}
	if !warned {
		t.Errorf("no warning for cursorapp: %v", app.Warnings)
	}
}
