package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/checkpoint"
	"github.com/agentbox/agentbox/scripted"
)

// TestRewindAndForkInDocker: the real Claude Code CLI in a kept Docker
// sandbox writes files, then wrecks them; a rewind to turn 1 brings the
// files, the history and the CLI's session back (the next turn resumes
// the session of turn 1, tool call included), and keeps turn 2 on another
// branch; a fork at turn 1 diverges from its parent without touching it,
// its CLI going on from a fork of the parent's session (--fork-session);
// an edited message sent again makes another version of its turn, and
// switching back brings the other version's files and session.
func TestRewindAndForkInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var cps *checkpoint.Store
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "create"}, ToolCalls: []scripted.ToolCall{{Name: "Bash",
			Input: map[string]any{"command": "printf one > a.txt && mkdir -p src && printf code-7731 > src/main.go"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Created."},
		{When: &scripted.Match{Contains: "wreck"}, ToolCalls: []scripted.ToolCall{{Name: "Bash",
			Input: map[string]any{"command": "rm -rf a.txt src && printf junk > junk.txt"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Wrecked."},
		{When: &scripted.Match{Contains: "again"}, Text: "Back again."},
		{When: &scripted.Match{Contains: "fork"}, Text: "Forked."},
		{When: &scripted.Match{Contains: "edited"}, ToolCalls: []scripted.ToolCall{{Name: "Bash",
			Input: map[string]any{"command": "printf edited > a.txt"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Edited."},
		{When: &scripted.Match{Contains: "which"}, Text: "This one."},
	}, func(c *Config) {
		var err error
		if cps, err = checkpoint.Open(filepath.Join(t.TempDir(), "checkpoints"), checkpoint.Options{}); err != nil {
			t.Fatal(err)
		}
		c.Checkpoints = cps
	})
	e.app.Config.Cleanup.Checkpoints = 10
	file := func(chatID, name string) string {
		dir, _ := e.ws.Path("alice", chatID)
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if got, _ := e.turn(t, ctx, "c1", "create the files"); got != "Created." {
		t.Fatalf("turn 1: %q", got)
	}
	if got, _ := e.turn(t, ctx, "c1", "wreck them"); got != "Wrecked." {
		t.Fatalf("turn 2: %q", got)
	}
	if a, junk := file("c1", "a.txt"), file("c1", "junk.txt"); a != "<none>" || junk != "junk" {
		t.Fatalf("after turn 2: a.txt %q, junk.txt %q", a, junk)
	}
	all, err := e.p.Checkpoints(ctx, "alice", "c1")
	if err != nil || !all[0].Before || all[0].Turn != 0 {
		t.Fatalf("checkpoints = %+v, %v (the state before turn 1 first)", all, err)
	}
	// The states after the turns (a kept CLI's late writes may make a
	// Before state of turn 2 as well).
	list := afterTurns(all)
	if len(list) != 2 || list[0].Turn != 1 || list[1].Turn != 2 || !list[1].Head {
		t.Fatalf("checkpoints = %+v", all)
	}

	rw, err := e.p.Rewind(ctx, "alice", "c1", Target{Turn: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rw.Turn != 1 || rw.Messages != 2 {
		t.Errorf("rewind = %+v", rw)
	}
	for name, want := range map[string]string{"a.txt": "one", "src/main.go": "code-7731", "junk.txt": "<none>", "creates.txt": "1"} {
		if got := file("c1", name); got != want {
			t.Errorf("after the rewind %s = %q, want %q", name, got, want)
		}
	}
	h, _ := e.p.cfg.History.History(ctx, "alice", "c1")
	if len(h) != 2 || h[1].Content != "Created." {
		t.Errorf("history after the rewind: %+v", h)
	}
	if list := afterTurns(mustCheckpoints(t, e.p, "c1")); len(list) != 2 || !list[0].Current || list[1].Current {
		t.Errorf("after the rewind, turn 2 is kept off the current branch: %+v", list)
	}

	// The next turn resumes turn 1's session: the model sees turn 1's tool
	// call, and nothing of turn 2.
	if got, tm := e.turn(t, ctx, "c1", "again"); got != "Back again." || tm.Sandbox != chat.SandboxCold {
		t.Fatalf("turn after the rewind: %q on %s (the kept sandbox goes with the rewind)", got, tm.Sandbox)
	}
	reqs := e.srv.TurnRequests()
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "printf one > a.txt") || strings.Contains(last, "wreck") {
		t.Errorf("the turn after the rewind did not resume turn 1's session:\n%s", last)
	}

	// A fork at turn 1 has turn 1's files and history, and its own turns.
	fork, err := e.p.Fork(ctx, "alice", "c1", Target{Turn: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := file(fork, "src/main.go"); got != "code-7731" {
		t.Errorf("fork's src/main.go = %q", got)
	}
	if got, _ := e.turn(t, ctx, fork, "fork it"); got != "Forked." {
		t.Fatalf("fork's turn: %q", got)
	}
	// The fork's CLI went on from the parent's session of turn 1 (its
	// tool call is there, which a history in the prompt would not carry).
	reqs = e.srv.TurnRequests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "printf one > a.txt") || strings.Contains(last, "Back again") {
		t.Errorf("the fork's turn did not fork turn 1's session:\n%s", last)
	}
	fh, _ := e.p.cfg.History.History(ctx, "alice", fork)
	ph, _ := e.p.cfg.History.History(ctx, "alice", "c1")
	if len(fh) != 4 || fh[2].Content != "fork it" || len(ph) != 4 || ph[2].Content != "again" {
		t.Errorf("fork's history %+v, parent's %+v", fh, ph)
	}
	if got := file("c1", "creates.txt"); got != "2" {
		t.Errorf("the fork's turn touched its parent: creates.txt = %q", got)
	}
	if got := file(fork, "creates.txt"); got != "2" {
		t.Errorf("fork's creates.txt = %q, want 2", got)
	}
	if fl := afterTurns(mustCheckpoints(t, e.p, fork)); len(fl) != 2 || fl[0].ID != list[0].ID {
		t.Errorf("fork's checkpoints: %+v", fl)
	}

	// Edit turn 2 ("again") and send it again: from turn 1's state, a
	// third version of turn 2; switching to the second brings its files
	// and session back.
	var rec chattest.Recorder
	if resp, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("edited message"), Edit: 2}, rec.Emit); err != nil || resp.Content != "Edited." {
		t.Fatalf("edited turn 2: %v, %v", resp, err)
	}
	if a, h := file("c1", "a.txt"), mustHistory(t, e.p, "c1"); a != "edited" || len(h) != 4 || h[2].Content != "edited message" {
		t.Fatalf("after the edit: a.txt %q, history %+v", a, h)
	}
	bs, err := e.p.Branches(ctx, "alice", "c1")
	if err != nil || len(bs) != 2 || len(bs[1].Versions) != 3 || bs[1].Current != 2 {
		t.Fatalf("branches after the edit: %+v, %v", bs, err)
	}
	if _, err := e.p.Switch(ctx, "alice", "c1", 2, 2); err != nil {
		t.Fatal(err)
	}
	if a, h := file("c1", "a.txt"), mustHistory(t, e.p, "c1"); a != "one" || len(h) != 4 || h[2].Content != "again" {
		t.Errorf("switched to version 2: a.txt %q, history %+v", a, h)
	}
	if got, _ := e.turn(t, ctx, "c1", "which one is this"); got != "This one." {
		t.Fatalf("turn after the switch: %q", got)
	}
	reqs = e.srv.TurnRequests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "Back again") || strings.Contains(last, "printf edited") {
		t.Errorf("the turn after the switch did not resume version 2's session:\n%s", last)
	}

	// Bad targets say what was wrong.
	for _, to := range []Target{{}, {Turn: 9}, {Turn: 1, ID: list[0].ID}, {ID: "nope"}} {
		if _, err := e.p.Rewind(ctx, "alice", "c1", to); chat.AsError(err).Code != chat.ErrInvalidRequest {
			t.Errorf("rewind to %+v: %v", to, err)
		}
	}

	// Deleting the chats frees their checkpoints.
	before, _ := cps.UserBytes(ctx, "alice")
	for _, c := range []string{"c1", fork} {
		if err := e.p.DeleteChat(ctx, "alice", c); err != nil {
			t.Fatal(err)
		}
	}
	e.p.measuring.Wait()
	if after, _ := cps.UserBytes(ctx, "alice"); after >= before {
		t.Errorf("checkpoints took %d bytes before the chats were deleted, %d after", before, after)
	}
}

func mustHistory(t *testing.T, p *Pipeline, chatID string) []chat.Message {
	t.Helper()
	h, err := p.cfg.History.History(context.Background(), "alice", chatID)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustCheckpoints(t *testing.T, p *Pipeline, chatID string) []CheckpointInfo {
	t.Helper()
	l, err := p.Checkpoints(context.Background(), "alice", chatID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// afterTurns are the checkpoints of list taken after turns.
func afterTurns(list []CheckpointInfo) []CheckpointInfo {
	var out []CheckpointInfo
	for _, c := range list {
		if !c.Before {
			out = append(out, c)
		}
	}
	return out
}
