package pipeline

import (
	"context"
	"github.com/agentbox/agentbox/assistant"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/scripted"
)

// fakeWarm is a kept CLI of the fake executor.
type fakeWarm struct{ closed atomic.Bool }

func (w *fakeWarm) Alive() bool { return !w.closed.Load() }
func (w *fakeWarm) Close()      { w.closed.Store(true) }

// keptFake makes e's coder keep its chats for keepAlive; its executor keeps
// a fakeWarm per chat and reports whether a turn ran on one.
func keptFake(t *testing.T, keepAlive time.Duration, mod func(*Config)) (*env, *atomic.Int32) {
	t.Helper()
	e := newEnvWith(t, &scripted.Script{}, "", mod)
	e.app.Assistants["coder"].Sandbox.KeepAlive = keepAlive
	var warmTurns atomic.Int32
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		res := &executor.Result{Content: "ok", SessionID: "s"}
		w, _ := req.Warm.(*fakeWarm)
		if w != nil && w.Alive() {
			warmTurns.Add(1)
		} else {
			w = &fakeWarm{}
			res.Timings.Started = time.Now()
		}
		if ctx.Err() != nil {
			w.Close()
			return res, ctx.Err()
		}
		if req.KeepAlive {
			res.Warm = w
		}
		return res, nil
	}
	t.Cleanup(func() { _ = e.p.Close(context.Background()) })
	return e, &warmTurns
}

func (e *env) chatTurn(t *testing.T, chatID string) *chat.Timings {
	t.Helper()
	var rec chattest.Recorder
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: chatID, AssistantID: "coder", Messages: user("hi")}, rec.Emit); err != nil {
		t.Fatal(err)
	}
	return rec.Last().Final.Timings
}

func TestKeptChatStopsAfterKeepAlive(t *testing.T) {
	e, warm := keptFake(t, 150*time.Millisecond, nil)
	if tm := e.chatTurn(t, "c1"); tm.Sandbox != chat.SandboxCold {
		t.Fatalf("first turn on %q", tm.Sandbox)
	}
	if tm := e.chatTurn(t, "c1"); tm.Sandbox != chat.SandboxWarm || warm.Load() != 1 {
		t.Fatalf("second turn on %q (warm turns %d)", tm.Sandbox, warm.Load())
	}
	if e.rt.Live() != 1 || e.rt.Created() != 1 {
		t.Fatalf("live %d, created %d; want the one sandbox kept", e.rt.Live(), e.rt.Created())
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.rt.Live() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if e.rt.Live() != 0 {
		t.Fatal("the kept sandbox was not stopped after keep_alive")
	}
	if kept, idle := e.p.kept.stats(); kept != 0 || idle != 0 {
		t.Errorf("kept %d, idle %d after expiry", kept, idle)
	}
	if tm := e.chatTurn(t, "c1"); tm.Sandbox != chat.SandboxCold {
		t.Errorf("turn after expiry on %q, want a new sandbox", tm.Sandbox)
	}
}

func TestKeptChatsCapStopsLeastRecentlyUsed(t *testing.T) {
	e, _ := keptFake(t, time.Minute, nil)
	e.app.Config.Limits = assistant.Limits{KeptChats: 2}.WithDefaults()
	for _, id := range []string{"a", "b", "c"} {
		e.chatTurn(t, id)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.rt.Live() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if kept, idle := e.p.kept.stats(); kept != 2 || idle != 2 || e.rt.Live() != 2 {
		t.Fatalf("kept %d, idle %d, live %d; want 2 each", kept, idle, e.rt.Live())
	}
	if tm := e.chatTurn(t, "a"); tm.Sandbox != chat.SandboxCold {
		t.Errorf("chat a (least recently used) on %q, want stopped and started anew", tm.Sandbox)
	}
	if tm := e.chatTurn(t, "c"); tm.Sandbox != chat.SandboxWarm {
		t.Errorf("chat c on %q, want kept", tm.Sandbox)
	}
	// By memory: each sandbox's limit counts (the fake runtime cannot
	// tell its use).
	e2, _ := keptFake(t, time.Minute, nil)
	e2.app.Config.Limits = assistant.Limits{KeptMemory: 1 << 20}.WithDefaults()
	e2.app.Assistants["coder"].Sandbox.MemoryBytes = 2 << 20
	e2.chatTurn(t, "x")
	if tm := e2.chatTurn(t, "x"); tm.Sandbox != chat.SandboxCold {
		t.Errorf("over the memory cap: turn on %q, want nothing kept", tm.Sandbox)
	}
}

// TestKeptChatCapsFromTheApp: the caps come from app.jsonc's limits, a
// share of the host's memory by default; a reload applies new ones and
// stops the idle chats of changed assistants at once.
func TestKeptChatCapsFromTheApp(t *testing.T) {
	k := newKeptChats()
	if host := hostMemory(); k.maxCount != assistant.DefaultKeptChats || (host > 0 && k.maxMemory != int64(assistant.DefaultKeptMemoryShare*float64(host))) {
		t.Errorf("default caps %d chats, %d bytes (host %d)", k.maxCount, k.maxMemory, host)
	}
	e, _ := keptFake(t, time.Minute, nil)
	for _, id := range []string{"a", "b", "c"} {
		e.chatTurn(t, id)
	}
	if kept, _ := e.p.kept.stats(); kept != 3 {
		t.Fatalf("kept %d, want 3", kept)
	}
	// A reload with a lower cap, and coder changed: all stop.
	next := *e.app
	cfg := *e.app.Config
	cfg.Limits = assistant.Limits{KeptChats: 1}.WithDefaults()
	next.Config = &cfg
	changed := *e.app.Assistants["coder"]
	next.Assistants = map[string]*assistant.Assistant{"coder": &changed}
	e.p.AppReloaded(&next)
	deadline := time.Now().Add(5 * time.Second)
	for e.rt.Live() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if kept, idle := e.p.kept.stats(); kept != 0 || idle != 0 || e.rt.Live() != 0 || e.p.kept.maxCount != 1 {
		t.Fatalf("after the reload: kept %d, idle %d, live %d, cap %d; want 0, 0, 0, 1", kept, idle, e.rt.Live(), e.p.kept.maxCount)
	}
}

func TestKeptChatRestartsOnChangeAndCloses(t *testing.T) {
	e, _ := keptFake(t, time.Minute, nil)
	e.chatTurn(t, "c1")
	changed := *e.app.Assistants["coder"]
	e.app.Assistants["coder"] = &changed
	if tm := e.chatTurn(t, "c1"); tm.Sandbox != chat.SandboxCold || e.rt.Created() != 2 {
		t.Fatalf("changed assistant: turn on %q, created %d", tm.Sandbox, e.rt.Created())
	}
	if err := e.p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.rt.Live() != 0 {
		t.Errorf("%d sandboxes live after Close", e.rt.Live())
	}
}
