package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// TestApprovalCLIsInDocker: Codex, the Gemini CLI and opencode, real CLIs
// in Docker on a kept chat, ask through the same broker as Claude Code: a
// shell command asked (approval_requested with the rule that asked, the
// call as the rules name it: Bash and its command), allowed and run; one
// nobody answers denied when the policy's time is up, the model told so;
// one allowed with "remember", after which the rule is not asked again.
func TestApprovalCLIsInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	for _, c := range []struct {
		cli, conn, shell string
		input            func(string) map[string]any
	}{
		{"codex", "openai", "exec_command", func(c string) map[string]any { return map[string]any{"cmd": c} }},
		{"gemini", "anthropic", "run_shell_command", func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} }},
		{"opencode", "anthropic", "bash", func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} }},
	} {
		t.Run(c.cli, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			bash := func(msg, cmd string) scripted.Turn {
				return scripted.Turn{When: &scripted.Match{Contains: msg}, ToolCalls: []scripted.ToolCall{{Name: c.shell, Input: c.input(cmd)}}}
			}
			answered := scripted.Turn{When: &scripted.Match{AfterToolResult: c.shell}, Text: "Shell answered."}
			e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
				bash("run it", "touch /workspace/ran.txt && echo ran-7731"),
				bash("slow one", "touch /workspace/slow.txt && echo slow-5512"),
				bash("slow two", "touch /workspace/slow.txt && echo slow-5512"),
				bash("run again", "touch /workspace/again.txt && echo again-3307"),
				{When: &scripted.Match{Contains: "nobody answered"}, Text: "Timeout noted."},
				answered, answered, answered, answered, answered,
			}, nil)
			e.coder.Sandbox.Command, e.coder.Sandbox.Image = c.cli, testenv.CLIImage(t, c.cli)
			e.app.Connectors["real"].Type = c.conn
			pol, probs := approval.Parse(approval.Raw{Ask: []string{"Bash(touch:*)"}, Timeout: "20s"}, time.ParseDuration)
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			e.coder.Approval = pol

			at := startApprovalTurn(ctx, e.p, "c1", "run it")
			ev := at.next(t, ctx)
			id, _ := ev.Props["approval_id"].(string)
			if id == "" || ev.Props["tool"] != "Bash" || ev.Props["rule"] != "Bash(touch:*)" || !strings.Contains(fmt.Sprintf("%s", ev.Props["input"]), "ran-7731") {
				t.Fatalf("approval_requested props %v", ev.Props)
			}
			if err := e.p.Approve(ctx, "alice", "c1", id, false, approval.Answer{Decision: approval.Allow}); err != nil {
				t.Fatal(err)
			}
			if got := at.wait(t); !strings.Contains(got, "Shell answered.") {
				t.Fatalf("answer %q", got)
			}
			if r := at.resolved(); len(r) != 1 || r[0]["approval_id"] != id || r[0]["decision"] != "allow" || r[0]["by"] != "user" {
				t.Errorf("approval_resolved %v", r)
			}
			if !fileIn(t, e, "ran.txt") {
				t.Error("the allowed command did not run")
			}

			// Nobody answers: denied when the policy's time is up, the
			// model told so.
			pol.Timeout = 3 * time.Second
			at = startApprovalTurn(ctx, e.p, "c1", "slow one")
			at.next(t, ctx)
			if got := at.wait(t); !strings.Contains(got, "Timeout noted.") {
				t.Fatalf("answer %q: the model did not read the denial", got)
			}
			if r := at.resolved(); len(r) != 1 || r[0]["decision"] != "deny" || r[0]["by"] != "timeout" {
				t.Errorf("approval_resolved %v", r)
			}
			if fileIn(t, e, "slow.txt") {
				t.Error("the command nobody allowed ran")
			}
			pol.Timeout = 20 * time.Second

			// Allowed for the chat: the rule is not asked again.
			at = startApprovalTurn(ctx, e.p, "c1", "slow two")
			ev = at.next(t, ctx)
			if err := e.p.Approve(ctx, "alice", "c1", ev.Props["approval_id"].(string), false, approval.Answer{Decision: approval.Allow, Remember: true}); err != nil {
				t.Fatal(err)
			}
			at.wait(t)
			at = startApprovalTurn(ctx, e.p, "c1", "run again")
			at.wait(t)
			if r := at.resolved(); len(r) != 0 || len(at.asked) != 0 {
				t.Errorf("a remembered rule was asked again: %v", r)
			}
			if !fileIn(t, e, "again.txt") {
				t.Error("the remembered command did not run")
			}
		})
	}
}

// fileIn reports whether the chat c1's workspace has name.
func fileIn(t *testing.T, e *keptEnv, name string) bool {
	t.Helper()
	dir, err := e.ws.Path("alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(dir, name))
	return err == nil
}
