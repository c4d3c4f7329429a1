package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// TestPoolPrimedInDocker: for each CLI that can be primed (Codex, the
// Gemini CLI), real in
// Docker behind the bridge: the pool learns the CLI's start from the
// assistant's first turn, its pooled sandbox then waits with the CLI
// started, and a new chat's turn goes to that CLI (timings say primed):
// the agent's shell runs in the chat's workspace (a relative path lands
// there), the model call passes the bridge with the pooled token, and
// another chat's workspace holds nothing of it.
func TestPoolPrimedInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Root(t, "for the warm pool to attach workspaces with mounts")
	for _, c := range []struct {
		cli benchCLI
		// shell is the CLI's shell tool and its input.
		shell string
		input func(string) map[string]any
	}{
		{benchCLI{"codex", "openai"}, "exec_command", func(c string) map[string]any { return map[string]any{"cmd": c} }},
		{benchCLI{"gemini", "anthropic"}, "run_shell_command", func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} }},
	} {
		t.Run(c.cli.command, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
			defer cancel()
			e := poolEnvOf(t, ctx, c.cli, 1, primedTurns(c.shell, c.input("pwd > where.txt && echo written-4411")))
			checkPrimed(t, ctx, e, c.cli.command)
			dir0, err := e.ws.Path("alice", "c0")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir0, "where.txt")); err == nil {
				t.Error("the other chat's workspace holds where.txt")
			}
			if st := e.p.Pool(); st.Claimed < 1 {
				t.Errorf("pool %+v", st)
			}
		})
	}
}

// primedTurns are the scripted model's turns of checkPrimed: the first
// chat's answer, and the agent's shell call with input, then its answer.
func primedTurns(shell string, input map[string]any) []scripted.Turn {
	return []scripted.Turn{
		{When: &scripted.Match{Contains: "learn"}, Text: "Learned."},
		{When: &scripted.Match{Contains: "write"}, ToolCalls: []scripted.ToolCall{{Name: shell, Input: input}}},
		{When: &scripted.Match{AfterToolResult: shell}, Text: "Written."},
	}
}

// checkPrimed runs the first chat of e's pooled coder (c0, which teaches
// the pool its CLI's start), waits for a primed sandbox, and runs a new
// chat (c1) on it: the turn goes to the primed CLI, whose shell writes
// where.txt (primedTurns) into the chat's workspace by a relative path,
// and the chat's session is kept in its workspace.
func checkPrimed(t *testing.T, ctx context.Context, e *keptEnv, cli string) {
	t.Helper()
	if got, _ := e.turn(t, ctx, "c0", "learn"); !strings.Contains(got, "Learned.") {
		t.Fatalf("first chat: %q", got)
	}
	waitPrimed(t, ctx, e.p, "coder")
	got, tm := e.turn(t, ctx, "c1", "write it")
	if !strings.Contains(got, "Written.") || tm.Sandbox != chat.SandboxPrimed {
		t.Fatalf("new chat: %q on %s, want Written. on a primed sandbox", got, tm.Sandbox)
	}
	if tm.CLIStartMS != 0 {
		t.Errorf("cli_start_ms %v on a primed CLI", tm.CLIStartMS)
	}
	dir, err := e.ws.Path("alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "where.txt")); err != nil || strings.TrimSpace(string(b)) != "/workspace" {
		t.Errorf("the chat's workspace holds where.txt %q, %v: the shell ran elsewhere", b, err)
	}
	// The CLI keeps the chat's session in the chat's workspace, where a
	// later CLI resumes it, not in the sandbox's own folder it started in.
	if !sessionIn(t, dir, cli) {
		t.Errorf("the chat's workspace holds no %s session", cli)
	}
}

// waitPrimed waits until the pool holds a sandbox of assistant whose
// CLI is started.
func waitPrimed(tb testing.TB, ctx context.Context, p *Pipeline, assistant string) {
	tb.Helper()
	for {
		p.pool.mu.Lock()
		n := 0
		for _, ps := range p.pool.ready[assistant] {
			if ps.primed != nil {
				n++
			}
		}
		p.pool.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("the pool never held a primed sandbox: %+v", p.Pool())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sessionIn reports whether the workspace dir holds a session file of
// cli's: Codex's rollout, the Gemini CLI's chat.
func sessionIn(t *testing.T, dir, cli string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		name := d.Name()
		switch cli {
		case "codex":
			found = found || strings.HasPrefix(name, "rollout-") && strings.HasSuffix(name, ".jsonl")
		case "gemini":
			found = found || strings.Contains(p, "/chats/") && strings.HasPrefix(name, "session-")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
