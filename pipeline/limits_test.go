package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/scripted"
)

// withLimits sets the app's limits.
func withLimits(l assistant.Limits) func(*Config) {
	return func(c *Config) { c.App.Current().Config.Limits = l }
}

// gate is an executor run that blocks until released (or its ctx ends),
// counting the runs in progress and the most at once.
type gate struct {
	release chan struct{}
	started chan string
	now     atomic.Int32
	most    atomic.Int32
}

func newGate() *gate { return &gate{release: make(chan struct{}), started: make(chan string, 100)} }

func (g *gate) run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	in := req.Input[len(req.Input)-1].Content
	g.started <- in
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &executor.Result{Content: "answer to " + in}, nil
}

func codeOf(err error) string {
	var ce *chat.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// TestTurnsPerUser: a user's turns beyond the limit are refused at once
// with too_many_turns and a Retry-After; another user is not affected.
func TestTurnsPerUser(t *testing.T) {
	e := newEnvWith(t, &scripted.Script{}, "", withLimits(assistant.Limits{TurnsPerUser: 2}))
	g := newGate()
	e.ex.run = g.run
	errs := make(chan error, 3)
	for i := range 2 {
		go func() {
			_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: fmt.Sprint("c", i), AssistantID: "coder", Messages: user("go")}, nil)
			errs <- err
		}()
		<-g.started
	}
	var rec struct{ events []chat.Event }
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c9", AssistantID: "coder", Messages: user("go")},
		func(ev chat.Event) { rec.events = append(rec.events, ev) })
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrTooManyTurns || ce.RetryAfter <= 0 || !strings.Contains(ce.Message, "limits.turns_per_user") {
		t.Fatalf("third turn: err = %v, want too_many_turns with RetryAfter", err)
	}
	if last := rec.events[len(rec.events)-1]; last.Event != chat.Done || last.Final.Error != chat.ErrTooManyTurns {
		t.Errorf("refused turn ends with %+v", last)
	}
	if e.rt.Created() != 2 {
		t.Errorf("%d sandboxes created, want 2", e.rt.Created())
	}
	// Another user still gets a turn.
	go func() {
		_, err := e.p.Chat(context.Background(), &Request{UserID: "u2", ChatID: "c0", AssistantID: "coder", Messages: user("go")}, nil)
		errs <- err
	}()
	<-g.started
	close(g.release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// The slots came back.
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c9", AssistantID: "coder", Messages: user("go")}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestChatTurnsAreSerialised: concurrent turns on one chat run one at a
// time, in arrival order, and each answer lands right after its own
// question in the history; the queue and the wait are bounded.
func TestChatTurnsAreSerialised(t *testing.T) {
	e := newEnvWith(t, &scripted.Script{}, "", withLimits(assistant.Limits{ChatQueue: 2, ChatWait: time.Minute}))
	g := newGate()
	e.ex.run = g.run
	errs := make(chan error, 4)
	turn := func(i int) {
		_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user(fmt.Sprint("q", i))}, nil)
		errs <- err
	}
	go turn(1)
	if got := <-g.started; got != "q1" {
		t.Fatalf("first run = %s", got)
	}
	for i := 2; i <= 3; i++ {
		go turn(i)
		waitFor(t, func() bool { return testutil.ToFloat64(e.p.metrics.waiting) == float64(i-1) })
	}
	// The queue holds two: a fourth is refused at once.
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("q4")}, nil)
	if codeOf(err) != chat.ErrChatBusy || !strings.Contains(err.Error(), "limits.chat_queue") {
		t.Fatalf("fourth turn: %v, want chat_busy (queue full)", err)
	}
	for i := 1; i <= 3; i++ {
		if i > 1 {
			if got := <-g.started; got != fmt.Sprint("q", i) {
				t.Fatalf("run %d = %s: not in arrival order", i, got)
			}
		}
		g.release <- struct{}{}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m := g.most.Load(); m != 1 {
		t.Errorf("%d turns of one chat ran at once", m)
	}
	h, _ := e.p.cfg.History.History(context.Background(), "u1", "c1")
	var got []string
	for _, m := range h {
		got = append(got, m.Content)
	}
	want := "q1|answer to q1|q2|answer to q2|q3|answer to q3"
	if strings.Join(got, "|") != want {
		t.Errorf("history = %v, want %s", got, want)
	}
}

func TestChatWaitIsBounded(t *testing.T) {
	e := newEnvWith(t, &scripted.Script{}, "", withLimits(assistant.Limits{ChatQueue: 1, ChatWait: 100 * time.Millisecond}))
	g := newGate()
	e.ex.run = g.run
	done := make(chan error, 1)
	go func() {
		_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("q1")}, nil)
		done <- err
	}()
	<-g.started
	start := time.Now()
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("q2")}, nil)
	if codeOf(err) != chat.ErrChatBusy || !strings.Contains(err.Error(), "limits.chat_wait") || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("waiting turn: %v after %s, want chat_busy after the wait", err, time.Since(start))
	}
	// A canceled waiter leaves the line at once.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("q3")}, nil); codeOf(err) != chat.ErrCanceled {
		t.Fatalf("canceled waiter: %v", err)
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(e.p.metrics.rejects.WithLabelValues("chat_wait")); n != 1 {
		t.Errorf("chat_wait rejections = %v", n)
	}
}

// TestSandboxCap: beyond the live sandbox cap a turn waits for a slot, up
// to sandbox_wait, then fails with server_busy (503 with Retry-After).
func TestSandboxCap(t *testing.T) {
	e := newEnvWith(t, &scripted.Script{}, "", withLimits(assistant.Limits{Sandboxes: 1, SandboxWait: 150 * time.Millisecond}))
	g := newGate()
	e.ex.run = g.run
	first := make(chan error, 1)
	go func() {
		_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("q1")}, nil)
		first <- err
	}()
	<-g.started
	if n := testutil.ToFloat64(e.p.metrics.sandboxes); n != 1 {
		t.Errorf("live sandboxes gauge = %v", n)
	}
	var rec chattest.Recorder
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u2", ChatID: "c1", AssistantID: "coder", Messages: user("q2")}, rec.Emit)
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrServerBusy || ce.RetryAfter <= 0 {
		t.Fatalf("second turn: %v, want server_busy", err)
	}
	// It said it waited in line, and stopped saying so.
	var queued []string
	for _, ev := range rec.Events() {
		if ev.Type == chat.TypeLoading && (ev.Event == chat.Start && ev.Props["step"] == "queue" || ev.Event == chat.End) {
			queued = append(queued, ev.Event+" "+ev.Text)
		}
	}
	if len(queued) != 2 || queued[0] != chat.Start+" Waiting for a free sandbox…" || queued[1] != chat.End+" " {
		t.Errorf("loading events %q, want the wait in line started and ended", queued)
	}
	if e.rt.Created() != 1 {
		t.Fatalf("%d sandboxes created, want 1", e.rt.Created())
	}
	// A turn that waits gets the slot when the first sandbox goes.
	second := make(chan error, 1)
	go func() {
		_, err := e.p.Chat(context.Background(), &Request{UserID: "u2", ChatID: "c1", AssistantID: "coder", Messages: user("q3")}, nil)
		second <- err
	}()
	time.Sleep(30 * time.Millisecond)
	g.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-g.started
	g.release <- struct{}{}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if m := g.most.Load(); m != 1 {
		t.Errorf("%d sandboxes at once, want 1", m)
	}
	if n := testutil.ToFloat64(e.p.metrics.sandboxes); n != 0 {
		t.Errorf("live sandboxes gauge = %v after all ended", n)
	}
}

// TestChatBelongsToItsAssistant: a chat stays with the assistant that
// started it; naming another is refused with chat_assistant, naming both,
// and the chat's history is untouched.
func TestChatBelongsToItsAssistant(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "Paris."}}}, "")
	ctx := context.Background()
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: user("Capital of France?")}, nil); err != nil {
		t.Fatal(err)
	}
	for _, msgs := range [][]chat.Message{user("write code"), {{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}, {Role: "user", Content: "c"}}} {
		_, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: msgs}, nil)
		if codeOf(err) != chat.ErrChatAssistant || !strings.Contains(err.Error(), `belongs to assistant "qa"`) || !strings.Contains(err.Error(), `names "coder"`) {
			t.Fatalf("coder on qa's chat: %v", err)
		}
	}
	if e.rt.Created() != 0 {
		t.Error("a sandbox was created for the refused turn")
	}
	h, _ := e.p.cfg.History.History(ctx, "u1", "c1")
	if len(h) != 2 || h[1].Content != "Paris." {
		t.Errorf("history = %v", h)
	}
	// The same chat id of another user is another chat.
	if _, err := e.p.Chat(ctx, &Request{UserID: "u2", ChatID: "c1", AssistantID: "coder", Messages: user("go")}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCloseRemovesStuckSandboxes: a turn stuck where cancellation does not
// reach does not hold a shutdown: Close cancels, waits the grace, removes
// the sandbox itself and returns.
func TestCloseRemovesStuckSandboxes(t *testing.T) {
	e := newEnvWith(t, &scripted.Script{}, "", func(c *Config) { c.CleanupGrace = 200 * time.Millisecond })
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	started := make(chan struct{})
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		close(started)
		<-stuck // ignores ctx, like a read of a FIFO
		return nil, ctx.Err()
	}
	go func() {
		_, _ = e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
	}()
	<-started
	if e.rt.Live() != 1 {
		t.Fatal("no live sandbox")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.p.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %s", took)
	}
	if e.rt.Live() != 0 {
		t.Fatal("the stuck turn's sandbox is still live")
	}
	// A second Close returns the first one's result at once.
	if err := e.p.Close(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second Close = %v", err)
	}
	_, err = e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c2", AssistantID: "qa", Messages: user("hi")}, nil)
	if codeOf(err) != chat.ErrShuttingDown {
		t.Errorf("turn after Close: %v", err)
	}
}

// TestMetrics: finished turns, tokens, refusals and gauges are exported.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, &scripted.Script{Turns: []scripted.Turn{{Text: "Paris."}}}, "", func(c *Config) { c.Metrics = m })
	ctx := context.Background()
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: user("Capital?")}, nil); err != nil {
		t.Fatal(err)
	}
	_, _ = e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("x")}, nil)
	_, _ = e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c2", AssistantID: "made-up-name", Messages: user("x")}, nil)
	_, _ = e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "../c2", AssistantID: "another-made-up-name", Messages: user("x")}, nil)
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c3", AssistantID: "coder", Messages: user("x")}, nil); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP agentbox_turns_total Finished turns by assistant and outcome ("ok" or the error code).
# TYPE agentbox_turns_total counter
agentbox_turns_total{assistant="",outcome="invalid_request"} 2
agentbox_turns_total{assistant="coder",outcome="chat_assistant"} 1
agentbox_turns_total{assistant="coder",outcome="ok"} 1
agentbox_turns_total{assistant="qa",outcome="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentbox_turns_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(m.tokens.WithLabelValues("coder", "test.llm", "output")); n != 4 {
		t.Errorf("coder output tokens = %v", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"agentbox_turns_running", "agentbox_turns_waiting", "agentbox_sandboxes_live", "agentbox_turn_duration_seconds",
		"agentbox_turn_phase_duration_seconds", "agentbox_tokens_total", "agentbox_limit_rejections_total"} {
		if !names[n] {
			t.Errorf("metric %s missing", n)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBreakerFailsDirectTurnsFast: a connector whose upstream keeps
// failing gets its breaker opened; the next turns fail at once with
// circuit_open, without calling it.
func TestBreakerFailsDirectTurnsFast(t *testing.T) {
	fail := scripted.Turn{Error: &scripted.HTTPError{Status: 500}}
	e := newEnvWith(t, &scripted.Script{Turns: []scripted.Turn{fail, fail, fail, fail}}, "",
		withLimits(assistant.Limits{Breaker: assistant.BreakerLimits{Failures: 2, Cooldown: time.Minute}}))
	ctx := context.Background()
	_, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: user("hi")}, nil)
	if codeOf(err) != chat.ErrCircuitOpen {
		t.Fatalf("first turn: %v, want its retry refused by the opened breaker", err)
	}
	n := len(e.llm.Requests())
	_, err = e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c2", AssistantID: "qa", Messages: user("hi")}, nil)
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrCircuitOpen || ce.RetryAfter <= 0 || !strings.Contains(ce.Message, "test.llm") {
		t.Fatalf("second turn: %v", err)
	}
	if len(e.llm.Requests()) != n {
		t.Errorf("an open breaker still called the model (%d requests)", len(e.llm.Requests())-n)
	}
	st := e.p.Breakers()
	if len(st) != 1 || st[0].Name != "test.llm" || st[0].State != "open" {
		t.Errorf("breakers = %+v", st)
	}
}

func TestRunFiles(t *testing.T) {
	p, err := New(Config{App: Static{App: &assistant.App{Config: &assistant.AppConfig{}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.RunFiles()); got != "[.agentbox/claude/system-prompt.md .agentbox/cursor/prompt.md]" {
		t.Errorf("RunFiles = %s", got)
	}
}
