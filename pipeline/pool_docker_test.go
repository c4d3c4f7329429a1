package pipeline

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// swapApp is an AppSource whose app a test replaces (a reload).
type swapApp struct{ app atomic.Pointer[assistant.App] }

func (s *swapApp) Current() *assistant.App { return s.app.Load() }

// waitPool waits until the pool holds ready sandboxes of coder.
func waitPool(t *testing.T, ctx context.Context, p *Pipeline, ready int) {
	t.Helper()
	for {
		if st := p.Pool(); st.Ready >= ready {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pool never held %d ready sandboxes: %+v", ready, p.Pool())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestPoolInDocker: new chats of an assistant with sandbox.pool claim
// sandboxes made ahead of demand, each with its own workspace and
// nothing of another chat's; a pooled sandbox that fails its check is
// dropped and the chat gets another; a reloaded assistant's pooled
// sandboxes are replaced; Close leaves none behind.
func TestPoolInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Root(t, "for the warm pool to attach workspaces with mounts")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := &swapApp{}
	lookTurns := []scripted.Turn{
		{When: &scripted.Match{Contains: "look"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{
			"command": "ls -A /workspace; cat /workspace/mine.txt 2>/dev/null; echo $PWD > /workspace/mine.txt; echo done"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Looked."},
	}
	var turns []scripted.Turn
	for range 2 {
		turns = append(turns, lookTurns...)
	}
	for range 4 {
		turns = append(turns, scripted.Turn{When: &scripted.Match{Contains: "hi"}, Text: "Hello."})
	}
	e := newKeptEnv(t, ctx, 0, turns, func(c *Config) { src.app.Store(c.App.Current()); c.App = src })
	e.coder.Sandbox.Pool = 2
	e.p.StartPool()
	waitPool(t, ctx, e.p, 2)
	var seen []string
	for _, ps := range e.p.pool.ready["coder"] {
		seen = append(seen, ps.sb.(*docker.Pooled).Name())
	}

	look := func(chatID string) string {
		t.Helper()
		var rec chattest.Recorder
		resp, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: chatID, AssistantID: "coder", Messages: user("look around")}, rec.Emit)
		if err != nil {
			t.Fatalf("%s: %v", chatID, err)
		}
		if tm := rec.Last().Final.Timings; resp.Content != "Looked." || tm.Sandbox != chat.SandboxPooled {
			t.Fatalf("%s: %q on %s, want Looked. on a pooled sandbox", chatID, resp.Content, tm.Sandbox)
		}
		for _, ev := range rec.Events() {
			if ev.Type == chat.TypeToolResult && ev.Event == chat.Start {
				out, _ := ev.Props["content"].(string)
				return out
			}
		}
		t.Fatalf("%s: no tool result", chatID)
		return ""
	}
	// Each chat sees its own workspace: the first sees nothing of the
	// other's file, the chat's own file stays in its workspace.
	for _, c := range []string{"c1", "c2"} {
		if out := look(c); strings.Contains(out, "mine.txt") || !strings.Contains(out, "done") {
			t.Errorf("%s's first look: %q, want an empty workspace", c, out)
		}
	}
	for _, c := range []string{"c1", "c2"} {
		ws, release, err := e.ws.Acquire(ctx, "alice", c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ws.ReadFile(ctx, "mine.txt", 100)
		release()
		if err != nil || strings.TrimSpace(string(b)) != "/workspace" {
			t.Errorf("%s's workspace holds %q, %v", c, b, err)
		}
	}

	// A pooled sandbox whose container died is dropped on claim; the
	// chat gets the next one, or its own.
	waitPool(t, ctx, e.p, 2)
	e.p.pool.mu.Lock()
	victim := e.p.pool.ready["coder"][0].sb.(*docker.Pooled)
	e.p.pool.mu.Unlock()
	rt := e.p.cfg.Runtimes["docker"].(*docker.Runtime)
	if err := rt.Client().ContainerKill(ctx, victim.ID(), "KILL"); err != nil {
		t.Fatal(err)
	}
	if got, tm := e.turn(t, ctx, "c3", "hi"); got != "Hello." || tm.Sandbox != chat.SandboxPooled {
		t.Errorf("after a dead pooled sandbox: %q on %s", got, tm.Sandbox)
	}
	if st := e.p.Pool(); st.Dropped != 1 || st.Claimed != 3 {
		t.Errorf("pool %+v: want 1 dropped, 3 claimed", st)
	}

	// A reloaded assistant gets pooled sandboxes of its own.
	waitPool(t, ctx, e.p, 2)
	e.p.pool.mu.Lock()
	for _, ps := range e.p.pool.ready["coder"] {
		seen = append(seen, ps.sb.(*docker.Pooled).Name())
	}
	e.p.pool.mu.Unlock()
	next := *e.app
	next.Assistants = map[string]*assistant.Assistant{}
	changed := *e.coder
	changed.Sandbox = new(*e.coder.Sandbox)
	next.Assistants["coder"] = &changed
	src.app.Store(&next)
	e.p.AppReloaded(&next)
	for {
		e.p.pool.mu.Lock()
		n := 0
		for _, ps := range e.p.pool.ready["coder"] {
			if ps.assistant == &changed {
				n++
			}
		}
		e.p.pool.mu.Unlock()
		if n == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no pooled sandboxes of the reloaded assistant: %+v", e.p.Pool())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got, tm := e.turn(t, ctx, "c4", "hi"); got != "Hello." || tm.Sandbox != chat.SandboxPooled {
		t.Errorf("reloaded: %q on %s", got, tm.Sandbox)
	}

	// Close removes every pooled sandbox and its slot.
	e.p.pool.mu.Lock()
	for _, ps := range e.p.pool.ready["coder"] {
		seen = append(seen, ps.sb.(*docker.Pooled).Name())
	}
	e.p.pool.mu.Unlock()
	if err := e.p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range seen {
		if _, err := rt.Client().ContainerInspect(ctx, name); err == nil {
			t.Errorf("pooled container %s left after Close", name)
		}
		if _, err := os.Stat(rt.PoolDir() + "/" + name); err == nil {
			t.Errorf("slot %s left after Close", name)
		}
	}
}

// TestKeptChatFrozenInDocker: an idle kept chat's sandbox is frozen
// (paused); its next message thaws it and the kept CLI answers it; a
// frozen chat stops cleanly (its CLI thawed to end its session) at Close.
func TestKeptChatFrozenInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{Contains: "second"}, Text: "Two."},
		{When: &scripted.Match{Contains: "third"}, Text: "Three."},
	}, nil)
	e.p.kept.freezeAfter = 0 // frozen by the test, not by the clock
	rt := e.p.cfg.Runtimes["docker"].(*docker.Runtime)
	freeze := func() *keptChat {
		t.Helper()
		e.p.kept.mu.Lock()
		c := e.p.kept.byKey[keptKey("alice", "c1")]
		e.p.kept.mu.Unlock()
		if c == nil {
			t.Fatal("no idle kept chat")
		}
		e.p.kept.freeze(c)
		ins, err := rt.Client().ContainerInspect(ctx, c.sb.ID())
		if err != nil || !ins.State.Paused {
			t.Fatalf("kept chat's container not paused: %v", err)
		}
		return c
	}
	if got, tm := e.turn(t, ctx, "c1", "first"); got != "One." || tm.Sandbox != chat.SandboxCold {
		t.Fatalf("first: %q on %s", got, tm.Sandbox)
	}
	c := freeze()
	if got, tm := e.turn(t, ctx, "c1", "second"); got != "Two." || tm.Sandbox != chat.SandboxWarm {
		t.Fatalf("after a freeze: %q on %s, want Two. on the kept CLI", got, tm.Sandbox)
	}
	if ins, err := rt.Client().ContainerInspect(ctx, c.sb.ID()); err != nil || ins.State.Paused {
		t.Errorf("kept chat's container still paused after its turn: %v", err)
	}
	freeze()
	closeStart := time.Now()
	if err := e.p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("close took %s", time.Since(closeStart))
	if _, err := rt.Client().ContainerInspect(ctx, c.sb.ID()); err == nil {
		t.Errorf("frozen kept chat's container left after Close")
	}
}
