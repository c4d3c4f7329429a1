package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/bridge/egress"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/claude"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/scripted"
)

// TestKeptChatToolsAndEgressInDocker: a kept chat's warm turns call host
// tools through the bridge (with the turn's user and chat) and reach only
// the hosts of the assistant's allow list through the egress proxy.
func TestKeptChatToolsAndEgressInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var seen atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		fmt.Fprint(w, "allowed-body-7731")
	}))
	t.Cleanup(api.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(api.URL, "http://"))
	var calls atomic.Int32
	var caller atomic.Value
	lookup := bridge.Tool{Name: "lookup", Description: "Look up an order.", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`),
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			calls.Add(1)
			ci, _ := bridge.CallFrom(ctx)
			caller.Store(ci.UserID + "/" + ci.ChatID)
			return map[string]any{"status": "shipped-4410"}, nil
		}}
	curl := "curl -sS --max-time 20 http://api.test:" + port + "/ok; echo; curl -sS --max-time 20 http://evil.test:" + port + "/ 2>&1; echo"
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{Contains: "order"}, ToolCalls: []scripted.ToolCall{{Name: "mcp__agentbox__lookup", Input: map[string]any{"id": "A-1"}}}},
		{When: &scripted.Match{AfterToolResult: "mcp__agentbox__lookup"}, Text: "Shipped."},
		{When: &scripted.Match{Contains: "fetch"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": curl}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Fetched."},
	}, func(c *Config) { c.Bridge.Tools = map[string]bridge.Tool{"lookup": lookup} })
	e.coder.Tools = []assistant.Tool{{Name: "lookup"}}
	rule, err := egress.ParseRule("api.test:" + port)
	if err != nil {
		t.Fatal(err)
	}
	e.coder.Sandbox.Egress = &assistant.Egress{Allow: []egress.Rule{rule},
		Hosts: map[string]netip.Addr{"api.test": netip.MustParseAddr("127.0.0.1"), "evil.test": netip.MustParseAddr("127.0.0.1")}}

	if got, tm := e.turn(t, ctx, "c1", "first"); got != "One." || tm.Sandbox != chat.SandboxCold {
		t.Fatalf("first: %q on %s", got, tm.Sandbox)
	}
	if got, tm := e.turn(t, ctx, "c1", "where is my order?"); got != "Shipped." || tm.Sandbox != chat.SandboxWarm {
		t.Fatalf("order: %q on %s", got, tm.Sandbox)
	}
	if calls.Load() != 1 || caller.Load() != "alice/c1" {
		t.Errorf("host tool: %d calls by %v, want 1 by alice/c1", calls.Load(), caller.Load())
	}
	var rec chattest.Recorder
	resp, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("fetch it")}, rec.Emit)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if tm := rec.Last().Final.Timings; resp.Content != "Fetched." || tm.Sandbox != chat.SandboxWarm {
		t.Fatalf("fetch: %q on %s", resp.Content, tm.Sandbox)
	}
	var out string
	for _, ev := range rec.Events() {
		if ev.Type == chat.TypeToolResult && ev.Event == chat.Start {
			out, _ = ev.Props["content"].(string)
		}
	}
	if !strings.Contains(out, "allowed-body-7731") || strings.Count(out, "allowed-body-7731") != 1 || seen.Load() != 1 {
		t.Errorf("Bash output %q (server saw %d requests): want the allowed host's body once and evil.test refused", out, seen.Load())
	}
	if eg := rec.Last().Final.Usage.Egress; len(eg) == 0 {
		t.Errorf("no egress usage in the warm turn's done event")
	}
}

// TestKeptChatCancelTimeoutConcurrentInDocker: on a kept chat, two turns
// sent at once run one after the other on the kept CLI; a turn canceled
// mid-answer, and one past its timeout, stop the CLI, and the next turn
// resumes the conversation in a new one.
func TestKeptChatCancelTimeoutConcurrentInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{Contains: "second"}, Text: "Two.", Delay: scripted.Duration(300 * time.Millisecond)},
		{When: &scripted.Match{Contains: "third"}, Text: "Three.", Delay: scripted.Duration(300 * time.Millisecond)},
		{When: &scripted.Match{Contains: "hang"}, Stall: true},
		{When: &scripted.Match{Contains: "after cancel"}, Text: "Back."},
		{When: &scripted.Match{Contains: "slow"}, Stall: true},
		{When: &scripted.Match{Contains: "after timeout"}, Text: "Again."},
	}, nil)
	if got, _ := e.turn(t, ctx, "c1", "first"); got != "One." {
		t.Fatalf("first: %q", got)
	}
	// Two at once: serialised, both on the kept CLI, both answered.
	var wg sync.WaitGroup
	res := map[string]*chat.Timings{}
	var mu sync.Mutex
	for _, m := range []string{"second", "third"} {
		wg.Go(func() {
			got, tm := e.turn(t, ctx, "c1", m)
			mu.Lock()
			res[got] = tm
			mu.Unlock()
		})
	}
	wg.Wait()
	two, three := res["Two."], res["Three."]
	if two == nil || three == nil {
		t.Fatalf("concurrent turns answered %v", res)
	}
	if two.Sandbox != chat.SandboxWarm || three.Sandbox != chat.SandboxWarm || max(two.ChatWaitMS, three.ChatWaitMS) < 200 {
		t.Errorf("concurrent turns: %+v and %+v; want both warm, one waiting for the other", two, three)
	}

	// Canceled while the model answers.
	cctx, ccancel := context.WithCancel(ctx)
	before := len(e.srv.TurnRequests())
	go func() {
		for len(e.srv.TurnRequests()) == before && cctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		ccancel()
	}()
	_, err := e.p.Chat(cctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("hang")}, nil)
	if ce := chat.AsError(err); err == nil || ce.Code != chat.ErrCanceled {
		t.Fatalf("canceled turn: %v", err)
	}
	got, tm := e.turn(t, ctx, "c1", "after cancel")
	if got != "Back." || tm.Sandbox == chat.SandboxWarm {
		t.Fatalf("after cancel: %q on %s, want an answer from a new CLI", got, tm.Sandbox)
	}
	if last := lastRequest(e.srv); !strings.Contains(last, "Three.") {
		t.Errorf("after cancel the session lacks the earlier turns: %.300s", last)
	}

	// Past the sandbox timeout.
	e.coder.Sandbox.Timeout = 8 * time.Second
	_, err = e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("slow")}, nil)
	if ce := chat.AsError(err); err == nil || ce.Code != chat.ErrTimeout {
		t.Fatalf("slow turn: %v", err)
	}
	e.coder.Sandbox.Timeout = 2 * time.Minute
	got, tm = e.turn(t, ctx, "c1", "after timeout")
	if got != "Again." || tm.Sandbox == chat.SandboxWarm {
		t.Fatalf("after timeout: %q on %s", got, tm.Sandbox)
	}
	if last := lastRequest(e.srv); !strings.Contains(last, "Back.") {
		t.Errorf("after the timeout the session lacks the earlier turns: %.300s", last)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("test deadline")
	}
}

func lastRequest(s *scripted.Server) string {
	reqs := s.TurnRequests()
	if len(reqs) == 0 {
		return ""
	}
	return string(reqs[len(reqs)-1].Body)
}

// TestKeptChatHungCLIInDocker: a kept CLI that is alive but prints nothing
// after the turn's message (stopped with SIGSTOP) is found hung, stopped,
// and a new CLI resuming the session answers the same turn; a warm turn
// whose CLI falls silent while no tool runs is stopped by the watchdog.
func TestKeptChatHungCLIInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{Contains: "second"}, Text: "Two."},
		{When: &scripted.Match{Contains: "silent"}, Stall: true},
		{When: &scripted.Match{Contains: "third"}, Text: "Three."},
	}, func(c *Config) {
		c.Executors = map[string]executor.Executor{"claude": claude.New(claude.Options{AckWait: 3 * time.Second, IdleTimeout: 30 * time.Second})}
	})
	// The watchdog counts a new CLI's start as silence, as a new chat's
	// does: 30s leave room for a host running the whole suite (a Claude
	// Code start took over 10s there).
	if got, _ := e.turn(t, ctx, "c1", "first"); got != "One." {
		t.Fatalf("first: %q", got)
	}
	c := e.p.kept.take("alice", "c1")
	if c == nil || !c.cli.Alive() {
		t.Fatal("no kept CLI after the first turn")
	}
	// The CLI writes its session transcript as it goes: the test's hang
	// comes once the first answer is on disk (a CLI stopped before that
	// would resume without it).
	flushed := `for i in $(seq 100); do grep -rqs "One." /workspace/.agentbox/claude && exit 0; sleep 0.1; done; exit 1`
	if res, err := c.sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", flushed}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("the first answer never reached the session transcript: %v %+v", err, res)
	}
	stop := `for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" = "$$" ] && continue; grep -q claude "$p/cmdline" 2>/dev/null && kill -STOP "$n"; done; exit 0`
	if res, err := c.sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", stop}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("SIGSTOP: %v %+v", err, res)
	}
	e.p.kept.put(c)
	got, tm := e.turn(t, ctx, "c1", "second")
	if got != "Two." || tm.Sandbox != chat.SandboxRestart {
		t.Fatalf("second (hung CLI): %q on %s, want an answer from a new CLI in the same sandbox", got, tm.Sandbox)
	}
	if last := lastRequest(e.srv); !strings.Contains(last, "One.") {
		t.Errorf("the new CLI lacks the session: %.300s", last)
	}
	_, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("silent")}, nil)
	if ce := chat.AsError(err); err == nil || ce.Code != chat.ErrTimeout || !strings.Contains(ce.Message, "printed nothing") {
		t.Fatalf("silent turn: %v, want the watchdog's timeout", err)
	}
	if got, _ := e.turn(t, ctx, "c1", "third"); got != "Three." {
		t.Fatalf("third: %q", got)
	}
}

// TestKeptChatGrowingAfterItsTurnIsEvictedInDocker: kept chats are
// counted at the memory they hold now, not at what they held when their
// turn ended. Two kept chats fit limits.kept_memory when their turns end
// (the second is admitted at its memory limit, the first at what it was
// measured to hold); then the agent's processes left in both grow (once
// the test writes the file they wait for). Measured again while idle,
// they hold more than the cap, and the least recently used one is stopped.
// The idle freeze is off: a frozen chat's processes cannot grow until its
// next turn (TestKeptChatFrozenInDocker), so the chats that grow between
// turns are the unfrozen ones (serving previews, or on a runtime without
// a freezer); left on, the freeze 5 s after a turn races the test's
// writes, and wins on a loaded host.
func TestKeptChatGrowingAfterItsTurnIsEvictedInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const limit, capBytes, growBytes = 1536 << 20, 2 << 30, 1000 << 20
	grow := fmt.Sprintf(`setsid sh -c 'while [ ! -e /workspace/grow ]; do sleep 0.2; done; exec python3 -c "import time; a = b\"x\" * %d; time.sleep(600)"' </dev/null >/dev/null 2>&1 &`, growBytes)
	start := []scripted.Turn{
		{When: &scripted.Match{Contains: "start"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": grow}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Started."},
	}
	e := newKeptEnv(t, ctx, 10*time.Minute, append(start, start...), nil)
	e.coder.Sandbox.MemoryBytes = limit
	e.app.Config.Limits = assistant.Limits{KeptMemory: capBytes}.WithDefaults()
	e.p.kept.measureEvery = time.Second
	e.p.kept.freezeAfter = 0
	counted := func() (n int, bytes int64, chats []string) {
		e.p.kept.mu.Lock()
		defer e.p.kept.mu.Unlock()
		for el := e.p.kept.idle.Front(); el != nil; el = el.Next() {
			chats = append(chats, el.Value.(*keptChat).chat)
		}
		return e.p.kept.count, e.p.kept.memory, chats
	}

	// Each turn leaves the waiting process; each chat is measured once its
	// turn ended (its limit counts until then), the two well under the cap.
	for i, c := range []string{"c1", "c2"} {
		if got, _ := e.turn(t, ctx, c, "start the job"); got != "Started." {
			t.Fatalf("turn in %s: %q", c, got)
		}
		waitUntil(t, 3*time.Minute, "the kept chats measured after their turns", func() bool {
			n, m, _ := counted()
			return n == i+1 && m < limit
		})
	}
	_, before, _ := counted()

	for _, c := range []string{"c1", "c2"} {
		ws, release, err := e.ws.Acquire(ctx, "alice", c)
		if err != nil {
			t.Fatal(err)
		}
		err = ws.WriteFile(ctx, "grow", nil, 0o644)
		release()
		if err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 5*time.Minute, fmt.Sprintf("c1, the least recently used, stopped: both chats grew after their turns (%d MiB counted when they ended), past limits.kept_memory (%d MiB)", before>>20, capBytes>>20),
		func() bool { n, _, chats := counted(); return n == 1 && slices.Equal(chats, []string{"c2"}) })
	if _, m, _ := counted(); m < growBytes {
		t.Errorf("c2 is counted at %d MiB, less than its grown process alone", m>>20)
	}
}

// waitUntil waits up to d for cond, failing with what was awaited.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKeptChatWritingPastItsLimitIsStoppedInDocker: where the disk limit
// is measured (a shared claim, a server without root), a kept chat's
// workspace is watched between its turns too: a process the agent left
// running that writes past sandbox.max_disk once the turn is over (when
// the test writes the file it waits for) has its sandbox stopped and what
// it wrote deleted until the workspace is within its limit; the chat is
// no longer kept, and its next turn runs in a new sandbox.
func TestKeptChatWritingPastItsLimitIsStoppedInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const limit = 48 << 20
	// 16 MiB every 0.2 s, 40 times at most (so a failing run cannot fill
	// the host's disk).
	writer := `setsid sh -c 'while [ ! -e /workspace/go ]; do sleep 0.2; done; i=0; while [ $i -lt 40 ]; do dd if=/dev/zero of=/workspace/w$i bs=1M count=16 2>/dev/null; i=$((i+1)); sleep 0.2; done' </dev/null >/dev/null 2>&1 &`
	var wss *sandbox.Workspaces
	e := newKeptEnv(t, ctx, 10*time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "start"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": writer}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Started."},
		{When: &scripted.Match{Contains: "again"}, Text: "Back."},
	}, func(c *Config) {
		var err error
		wss, err = sandbox.NewWorkspacesWith(filepath.Join(t.TempDir(), "data"), sandbox.WorkspacesOptions{UID: 1000, GID: 1000, Disk: sandbox.DiskWatch})
		if err != nil {
			t.Fatal(err)
		}
		c.Workspaces = wss
	})
	e.coder.Sandbox.DiskBytes = limit
	if got, _ := e.turn(t, ctx, "c1", "start the job"); got != "Started." {
		t.Fatalf("turn: %q", got)
	}
	if kept, _ := e.p.kept.stats(); kept != 1 {
		t.Fatalf("%d kept chats after the turn, want 1", kept)
	}
	ws, release, err := wss.Acquire(ctx, "alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	err = ws.WriteFile(ctx, "go", nil, 0o644)
	release()
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Minute, "the kept chat stopped: its workspace grew past its limit between turns", func() bool {
		kept, _ := e.p.kept.stats()
		return kept == 0
	})
	waitUntil(t, time.Minute, "its sandbox removed", func() bool {
		e.p.mu.Lock()
		defer e.p.mu.Unlock()
		return len(e.p.live) == 0
	})
	dir, _ := wss.Path("alice", "c1")
	var used int64
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if st, err := d.Info(); err == nil {
				used += st.Size()
			}
		}
		return err
	})
	if err != nil || used > limit {
		t.Errorf("the workspace holds %d bytes (%v), more than its limit %d", used, err, limit)
	}
	if got, tm := e.turn(t, ctx, "c1", "again"); got != "Back." || tm.Sandbox != chat.SandboxCold {
		t.Errorf("the next turn: %q on a %s sandbox, want an answer from a new one", got, tm.Sandbox)
	}
}

// TestKeptGeminiMaxTurnsPerTurnInDocker: a kept Gemini CLI's max_turns
// bounds each turn, not the chat: three turns of two model steps each run
// under max_turns 2 on the same CLI (the CLI's own limit would count six),
// a turn that starts a third step ends with max_turns, and the CLI stays
// for the next turn.
func TestKeptGeminiMaxTurnsPerTurnInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shell := func(msg, cmd string) scripted.Turn {
		return scripted.Turn{When: &scripted.Match{PromptContains: msg},
			ToolCalls: []scripted.ToolCall{{Name: "run_shell_command", Input: map[string]any{"command": cmd, "description": "run"}}}}
	}
	stepped := scripted.Turn{When: &scripted.Match{AfterToolResult: "run_shell_command", PromptContains: "step "}, Text: "Stepped."}
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		stepped, shell("step one", "echo one"), stepped, shell("step two", "echo two"), stepped, shell("step three", "echo three"),
		{When: &scripted.Match{AfterToolResult: "run_shell_command", PromptContains: "too many"}, ToolCalls: []scripted.ToolCall{{Name: "run_shell_command", Input: map[string]any{"command": "echo again", "description": "run"}}}},
		shell("too many", "echo first"),
		{When: &scripted.Match{AfterToolResult: "run_shell_command", PromptContains: "too many"}, Text: "Too far."},
		{When: &scripted.Match{Contains: "still there"}, Text: "Here."},
	}, nil)
	e.coder.Sandbox.Command, e.coder.Sandbox.Image = "gemini", testenv.CLIImage(t, "gemini")
	e.coder.Sandbox.Arguments.MaxTurns = 2
	e.app.Connectors["real"].Type = "anthropic"
	for i, msg := range []string{"step one", "step two", "step three"} {
		got, tm := e.turn(t, ctx, "c1", msg)
		if got != "Stepped." || (i > 0 && tm.Sandbox != chat.SandboxWarm) {
			t.Fatalf("%s: %q on %s", msg, got, tm.Sandbox)
		}
	}
	rec := &chattest.Recorder{}
	_, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("too many steps")}, rec.Emit)
	if ce := chat.AsError(err); err == nil || ce.Code != chat.ErrMaxTurns {
		t.Fatalf("a turn past max_turns: %v %+v", err, rec.Events())
	}
	if got, tm := e.turn(t, ctx, "c1", "still there?"); got != "Here." || tm.Sandbox != chat.SandboxWarm {
		t.Errorf("after max_turns: %q on %s, want an answer on the same CLI", got, tm.Sandbox)
	}
}
