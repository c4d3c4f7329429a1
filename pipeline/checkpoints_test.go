package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/checkpoint"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/scripted"
)

const memoryHooks = `
function Create(ctx, messages, options) {
  const n = (ctx.memory.chat.Get("n") || 0) + 1;
  ctx.memory.chat.Set("n", n);
  return null;
}
`

// TestRewindRestoresHookMemoryAndWaitsForTheTurn: a chat's hook memory is
// restored with its turn by a rewind and copied by a fork; a rewind sent
// while a turn runs waits for it to end.
func TestRewindRestoresHookMemoryAndWaitsForTheTurn(t *testing.T) {
	e := newCheckpointEnv(t, memoryHooks)
	e.app.Config.Cleanup.Checkpoints = 10
	ctx := context.Background()
	turn := func(chatID, msg string) {
		t.Helper()
		if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: chatID, AssistantID: "coder", Messages: user(msg)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	memory := func(chatID string) string {
		t.Helper()
		v, _, err := e.p.cfg.Memory.Get(ctx, jsapi.NamespaceChat, jsapi.ChatOwner("u1", chatID), "n")
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	for _, m := range []string{"one", "two", "three"} {
		turn("c", m)
	}
	if got := memory("c"); got != "3" {
		t.Fatalf("memory after 3 turns: %s", got)
	}
	if _, err := e.p.Rewind(ctx, "u1", "c", Target{Turn: 1}); err != nil {
		t.Fatal(err)
	}
	if got := memory("c"); got != "1" {
		t.Errorf("memory after the rewind to turn 1: %s", got)
	}
	var turn2 string
	for _, c := range mustLog(t, e.p, "c").Entries {
		if c.Turn == 2 && !c.Before {
			turn2 = c.ID
		}
	}
	fork, err := e.p.Fork(ctx, "u1", "c", Target{ID: turn2})
	if err != nil {
		t.Fatal(err)
	}
	if got := memory(fork); got != "2" {
		t.Errorf("fork's memory at turn 2: %s", got)
	}
	turn(fork, "four")
	if got, parent := memory(fork), memory("c"); got != "3" || parent != "1" {
		t.Errorf("after the fork's turn: fork %s, parent %s", got, parent)
	}

	// A rewind sent while a turn runs waits for the turn, then rewinds.
	started, release := make(chan struct{}), make(chan struct{})
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		close(started)
		<-release
		return &executor.Result{Content: "late"}, nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c", AssistantID: "coder", Messages: user("slow")}, nil)
		done <- err
	}()
	<-started
	rewound := make(chan error, 1)
	go func() {
		_, err := e.p.Rewind(ctx, "u1", "c", Target{Turn: 1})
		rewound <- err
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-rewound; err != nil {
		t.Fatalf("rewind sent during a turn: %v", err)
	}
	h, _ := e.p.cfg.History.History(ctx, "u1", "c")
	if len(h) != 2 || memory("c") != "1" {
		t.Errorf("after the rewind that waited: history %+v, memory %s", h, memory("c"))
	}
	// The turn's checkpoint (turn 2 again) is in the log, off the branch.
	if l := mustLog(t, e.p, "c"); l.Entries[len(l.Entries)-1].Turn != 2 || l.Head == l.Entries[len(l.Entries)-1].ID {
		t.Errorf("log after the waited rewind: %+v", l)
	}

	// No checkpoints kept: rewind and fork say so.
	e.app.Config.Cleanup.Checkpoints = 0
	if _, err := e.p.Rewind(ctx, "u1", "c", Target{Turn: 1}); chat.AsError(err).Code != chat.ErrInvalidRequest {
		t.Errorf("rewind with checkpoints off: %v", err)
	}
}

// newCheckpointEnv is a pipeline with hooks that keeps checkpoints.
func newCheckpointEnv(t *testing.T, hooks string) *env {
	t.Helper()
	return newEnvWith(t, &scripted.Script{}, hooks, func(c *Config) {
		cps, err := checkpoint.Open(filepath.Join(t.TempDir(), "checkpoints"), checkpoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Checkpoints = cps
	})
}

func mustLog(t *testing.T, p *Pipeline, chatID string) *checkpoint.ChatLog {
	t.Helper()
	l, err := p.cfg.Checkpoints.Log(context.Background(), "u1", chatID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFailedTurnEditAndSwitch: the state a turn started from is kept when
// it was not the chat's last checkpoint (the first turn; a file uploaded
// after turn 1), so a failed turn can be undone; an edited message sent
// again runs from the state before the turn it edits, the old turns
// staying on another branch; switching between the versions brings each
// one's files, memory and history back.
func TestFailedTurnEditAndSwitch(t *testing.T) {
	e := newCheckpointEnv(t, memoryHooks)
	e.app.Config.Cleanup.Checkpoints = 20
	ctx := context.Background()
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		msg := req.Input[len(req.Input)-1].Content
		if err := req.Sandbox.Workspace().WriteFile(ctx, "f.txt", []byte(msg), 0o644); err != nil {
			return nil, err
		}
		if msg == "boom" {
			return nil, chat.Errorf(chat.ErrExecutor, "the agent broke")
		}
		return &executor.Result{Content: "re " + msg}, nil
	}
	send := func(msg string, edit int) error {
		_, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c", AssistantID: "coder", Messages: user(msg), Edit: edit}, nil)
		return err
	}
	dir, _ := e.p.cfg.Workspaces.Path("u1", "c")
	file := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "<none>"
		}
		return string(b)
	}
	users := func() string {
		h, _ := e.p.cfg.History.History(ctx, "u1", "c")
		var out []string
		for _, m := range h {
			if m.Role == chat.RoleUser {
				out = append(out, m.Content)
			}
		}
		return strings.Join(out, ",")
	}
	memory := func() string {
		v, _, _ := e.p.cfg.Memory.Get(ctx, jsapi.NamespaceChat, jsapi.ChatOwner("u1", "c"), "n")
		return string(v)
	}
	if err := send("one", 0); err != nil {
		t.Fatal(err)
	}
	// A file uploaded after turn 1; turn 2 fails after breaking f.txt.
	if err := os.WriteFile(filepath.Join(dir, "upload.txt"), []byte("up"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := send("boom", 0); err == nil {
		t.Fatal("turn 2 did not fail")
	}
	list, err := e.p.Checkpoints(ctx, "u1", "c")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range list {
		kinds = append(kinds, fmt.Sprintf("%d%s%s", c.Turn, map[bool]string{true: "b"}[c.Before], map[bool]string{true: "f"}[c.Failed]))
	}
	if got := strings.Join(kinds, " "); got != "0b 1 1b 2f" {
		t.Fatalf("checkpoints (turn, before, failed): %s", got)
	}
	// The state the failed turn started from: turn 1's files, the upload,
	// turn 1's memory and history.
	if _, err := e.p.Rewind(ctx, "u1", "c", Target{ID: list[2].ID}); err != nil {
		t.Fatal(err)
	}
	if f, u, h, m := file("f.txt"), file("upload.txt"), users(), memory(); f != "one" || u != "up" || h != "one" || m != "1" {
		t.Fatalf("before the failed turn: f.txt %q, upload.txt %q, history %q, memory %s", f, u, h, m)
	}
	if _, err := e.p.Rewind(ctx, "u1", "c", Target{ID: list[3].ID}); err != nil {
		t.Fatal(err)
	}
	if f, h, m := file("f.txt"), users(), memory(); f != "boom" || h != "one,boom" || m != "2" {
		t.Fatalf("back at the failed turn: f.txt %q, history %q, memory %s", f, h, m)
	}

	// Edit turn 2 and send it again: a second version of turn 2.
	if err := send("two", 2); err != nil {
		t.Fatal(err)
	}
	if f, u, h, m := file("f.txt"), file("upload.txt"), users(), memory(); f != "two" || u != "up" || h != "one,two" || m != "2" {
		t.Fatalf("after the edit: f.txt %q, upload.txt %q, history %q, memory %s", f, u, h, m)
	}
	if err := send("three", 0); err != nil {
		t.Fatal(err)
	}
	bs, err := e.p.Branches(ctx, "u1", "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 || len(bs[1].Versions) != 2 || bs[1].Current != 1 || !bs[1].Versions[0].Failed || len(bs[0].Versions) != 1 {
		t.Fatalf("branches: %+v", bs)
	}
	// Switch to the failed version and back to the newest.
	if _, err := e.p.Switch(ctx, "u1", "c", 2, 1); err != nil {
		t.Fatal(err)
	}
	if f, h := file("f.txt"), users(); f != "boom" || h != "one,boom" {
		t.Errorf("switched to version 1: f.txt %q, history %q", f, h)
	}
	if _, err := e.p.Switch(ctx, "u1", "c", 2, 2); err != nil {
		t.Fatal(err)
	}
	if f, h, m := file("f.txt"), users(), memory(); f != "three" || h != "one,two,three" || m != "3" {
		t.Errorf("switched back to version 2: f.txt %q, history %q, memory %s", f, h, m)
	}

	// Edit turn 1: the state before the chat's first turn, no files.
	if err := send("uno", 1); err != nil {
		t.Fatal(err)
	}
	if f, u, h, m := file("f.txt"), file("upload.txt"), users(), memory(); f != "uno" || u != "<none>" || h != "uno" || m != "1" {
		t.Errorf("after editing turn 1: f.txt %q, upload.txt %q, history %q, memory %s", f, u, h, m)
	}
	if bs, _ := e.p.Branches(ctx, "u1", "c"); len(bs) != 1 || len(bs[0].Versions) != 2 || bs[0].Current != 1 {
		t.Errorf("branches after editing turn 1: %+v", bs)
	}

	// Bad edits and switches say what was wrong.
	for _, bad := range []struct {
		msg  string
		edit int
	}{{"x", 5}, {"x", -1}} {
		if err := send(bad.msg, bad.edit); chat.AsError(err).Code != chat.ErrInvalidRequest {
			t.Errorf("edit %d: %v", bad.edit, err)
		}
	}
	for _, sw := range [][2]int{{0, 1}, {1, 3}, {4, 1}} {
		if _, err := e.p.Switch(ctx, "u1", "c", sw[0], sw[1]); chat.AsError(err).Code != chat.ErrInvalidRequest {
			t.Errorf("switch %v: %v", sw, err)
		}
	}
}

// TestBranchingWaitsForTheTurn: a rewind or fork sent while a turn runs
// waits for it to end; one whose wait runs out is refused with chat_busy,
// and the turn and the chat are untouched.
func TestBranchingWaitsForTheTurn(t *testing.T) {
	e := newCheckpointEnv(t, "")
	e.app.Config.Cleanup.Checkpoints = 10
	ctx := context.Background()
	for _, m := range []string{"one", "two"} {
		if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c", AssistantID: "coder", Messages: user(m)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	started, release := make(chan struct{}), make(chan struct{})
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		close(started)
		<-release
		return &executor.Result{Content: "late"}, nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c", AssistantID: "coder", Messages: user("slow")}, nil)
		done <- err
	}()
	<-started
	// The wait runs out: refused, nothing changed.
	e.p.branchWait = 50 * time.Millisecond
	if _, err := e.p.Rewind(ctx, "u1", "c", Target{Turn: 1}); chat.AsError(err).Code != chat.ErrChatBusy {
		t.Errorf("rewind during a turn that does not end: %v", err)
	}
	if _, err := e.p.Fork(ctx, "u1", "c", Target{Turn: 1}); chat.AsError(err).Code != chat.ErrChatBusy {
		t.Errorf("fork during a turn that does not end: %v", err)
	}
	// A fork that waits long enough gets the chat once the turn ended.
	e.p.branchWait = 10 * time.Minute
	forked := make(chan error, 1)
	go func() {
		_, err := e.p.Fork(ctx, "u1", "c", Target{Turn: 1})
		forked <- err
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-forked; err != nil {
		t.Fatalf("fork sent during a turn: %v", err)
	}
	if h, _ := e.p.cfg.History.History(ctx, "u1", "c"); len(h) != 6 || h[5].Content != "late" {
		t.Errorf("the parent after the waited fork: %+v", h)
	}
}
