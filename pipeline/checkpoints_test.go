package pipeline

import (
	"context"
	"path/filepath"
	"testing"

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
	e := newEnvWith(t, &scripted.Script{}, memoryHooks, func(c *Config) {
		cps, err := checkpoint.Open(filepath.Join(t.TempDir(), "checkpoints"), checkpoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Checkpoints = cps
	})
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
	fork, err := e.p.Fork(ctx, "u1", "c", Target{ID: mustLog(t, e.p, "c").Entries[1].ID})
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

func mustLog(t *testing.T, p *Pipeline, chatID string) *checkpoint.ChatLog {
	t.Helper()
	l, err := p.cfg.Checkpoints.Log(context.Background(), "u1", chatID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
