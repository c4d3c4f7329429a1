package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/scripted"
)

// fakeExecutor records its request and plays a scripted behaviour.
type fakeExecutor struct {
	mu   sync.Mutex
	reqs []*executor.Request
	run  func(ctx context.Context, req *executor.Request) (*executor.Result, error)
}

func (e *fakeExecutor) Name() string { return "claude" }
func (e *fakeExecutor) Run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	e.mu.Lock()
	e.reqs = append(e.reqs, req)
	e.mu.Unlock()
	if e.run != nil {
		return e.run(ctx, req)
	}
	req.Emit(chat.Event{Event: chat.Start, ID: "t1", Type: chat.TypeText})
	req.Emit(chat.Event{Event: chat.Delta, ID: "t1", Type: chat.TypeText, Text: "done in sandbox"})
	req.Emit(chat.Event{Event: chat.End, ID: "t1", Type: chat.TypeText})
	return &executor.Result{Content: "done in sandbox", SessionID: "s-1", Usage: chat.Usage{InputTokens: 3, OutputTokens: 4, Turns: 1}}, nil
}

type env struct {
	p   *Pipeline
	rt  *sandboxtest.Runtime
	ex  *fakeExecutor
	llm *scripted.Server
	app *assistant.App
}

// newEnv builds an app with a direct assistant "qa" (OpenAI connector on a
// scripted server) and a sandboxed assistant "coder" (fake executor and
// runtime); hooks is the coder's index.js source ("" for none).
func newEnv(t *testing.T, script *scripted.Script, hooks string) *env {
	t.Helper()
	return newEnvWith(t, script, hooks, nil)
}

// newEnvWith is newEnv with the app's config and the pipeline's config
// changed by mod before the pipeline is built.
func newEnvWith(t *testing.T, script *scripted.Script, hooks string, mod func(*Config)) *env {
	t.Helper()
	srv := scripted.NewServer(script)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	coder := &assistant.Assistant{
		ID: "coder", Dir: filepath.Join(dir, "coder"), Name: "Coder", Connector: "test.llm",
		Prompts: []chat.Message{{Role: chat.RoleSystem, Content: "You write code."}},
		Sandbox: &assistant.Sandbox{Command: "claude", Image: "img", Timeout: time.Minute,
			Arguments: chat.Arguments{MaxTurns: 5, PermissionMode: "acceptEdits"}},
		HookTimeout: 2 * time.Second,
	}
	if hooks != "" {
		writeHooks(t, coder, hooks)
	}
	app := &assistant.App{
		Root:   dir,
		Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{
			// A model Yao knows nothing of: it declares what it can do.
			"test.llm": {ID: "test.llm", Type: "openai", Options: assistant.ConnectorOptions{Host: srv.URL, Key: "sk-test", Model: "m1",
				Capabilities: map[string]any{"tool_calls": true, "vision": "openai"}}},
		},
		Assistants: map[string]*assistant.Assistant{
			"qa":    {ID: "qa", Name: "QA", Connector: "test.llm", Prompts: []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}}},
			"coder": coder,
		},
	}
	ws, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	rt := &sandboxtest.Runtime{Handler: sandboxtest.Echo}
	ex := &fakeExecutor{}
	cfg := Config{
		App:            Static{App: app},
		Runtimes:       map[string]sandbox.Runtime{"fake": rt},
		DefaultRuntime: "fake",
		Workspaces:     ws,
		Executors:      map[string]executor.Executor{"claude": ex},
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{p: p, rt: rt, ex: ex, llm: srv, app: app}
}

func user(text string) []chat.Message { return []chat.Message{{Role: chat.RoleUser, Content: text}} }

func TestDirectTurnStreamsAndKeepsHistory(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "Paris."}, {Text: "About 2 million."}}}, "")
	ctx := context.Background()
	var rec chattest.Recorder
	resp, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: user("Capital of France?")}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Paris." {
		t.Fatalf("content = %q", resp.Content)
	}
	done := rec.Last()
	if done.Event != chat.Done || done.Final == nil || done.Final.Error != "" {
		t.Fatalf("last event = %+v, want a successful done", done)
	}
	// A follow-up with only the new message carries the stored history.
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: user("Population?")}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := e.llm.TurnRequests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	body := string(reqs[1].Body)
	for _, want := range []string{"Be brief.", "Capital of France?", "Paris.", "Population?"} {
		if !strings.Contains(body, want) {
			t.Errorf("second request lacks %q: %s", want, body)
		}
	}
	// Another user's chat with the same id sees none of it.
	h, err := e.p.cfg.History.History(ctx, "u2", "c1")
	if err != nil || len(h) != 0 {
		t.Fatalf("u2 history = %v, %v; want empty", h, err)
	}
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	cases := []struct {
		name string
		req  Request
		code string
		// unknown is set for the error the HTTP API answers with 404 (its
		// cause is ErrUnknownAssistant); the others are 400s (see the
		// server's TestStatusOf).
		unknown bool
	}{
		{"unknown assistant", Request{UserID: "u", ChatID: "c", AssistantID: "nope", Messages: user("hi")}, chat.ErrInvalidRequest, true},
		{"traversal chat id", Request{UserID: "u", ChatID: "../x", AssistantID: "qa", Messages: user("hi")}, chat.ErrInvalidRequest, false},
		{"empty user", Request{UserID: "", ChatID: "c", AssistantID: "qa", Messages: user("hi")}, chat.ErrInvalidRequest, false},
		{"no messages", Request{UserID: "u", ChatID: "c", AssistantID: "qa"}, chat.ErrInvalidRequest, false},
		{"bad role", Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: []chat.Message{{Role: "robot", Content: "x"}}}, chat.ErrInvalidRequest, false},
		{"last not user", Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: []chat.Message{{Role: "user", Content: "x"}, {Role: "assistant", Content: "y"}}}, chat.ErrInvalidRequest, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec chattest.Recorder
			_, err := e.p.Chat(context.Background(), &tc.req, rec.Emit)
			var pe *chat.Error
			if !errors.As(err, &pe) || pe.Code != tc.code || errors.Is(err, ErrUnknownAssistant) != tc.unknown {
				t.Fatalf("err = %v, want %s (unknown assistant: %v)", err, tc.code, tc.unknown)
			}
			if d := rec.Last(); d.Event != chat.Done || d.Final.Error != tc.code {
				t.Fatalf("last event = %+v, want done with error %s", d, tc.code)
			}
			if got := rec.Types(chat.Start); len(got) != 1 || got[0] != chat.TypeError {
				t.Fatalf("started messages = %v, want one error", got)
			}
		})
	}
}

func TestSandboxedTurn(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	var rec chattest.Recorder
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder",
		Messages: []chat.Message{{Role: "system", Content: "Extra rule."}, {Role: "user", Content: "earlier"}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "write code"}}}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "done in sandbox" || resp.SessionID != "s-1" || resp.Usage.OutputTokens != 4 {
		t.Fatalf("resp = %+v", resp)
	}
	if e.rt.Live() != 0 || e.rt.Created() != 1 {
		t.Fatalf("live sandboxes = %d, created = %d; want 0, 1", e.rt.Live(), e.rt.Created())
	}
	req := e.ex.reqs[0]
	if req.System != "You write code.\n\nExtra rule." {
		t.Errorf("system = %q", req.System)
	}
	if len(req.History) != 2 || len(req.Input) != 1 || req.Input[0].Content != "write code" {
		t.Errorf("history = %v, input = %v", req.History, req.Input)
	}
	if req.Arguments.MaxTurns != 5 || req.Connector.Key != "sk-test" || req.Connector.Model != "m1" {
		t.Errorf("arguments = %+v, connector = %v", req.Arguments, req.Connector)
	}
	if got := rec.Types(chat.Start); got[0] != chat.TypeLoading {
		t.Errorf("first message = %v, want loading while the sandbox starts", got)
	}
}

func TestSandboxRemovedOnEveryPath(t *testing.T) {
	cases := []struct {
		name  string
		run   func(ctx context.Context, req *executor.Request) (*executor.Result, error)
		hooks string
		code  string
	}{
		{"executor error", func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
			chat.ErrorEvent(req.Emit, "e1", chat.ErrMaxTurns, "max turns reached")
			return nil, &chat.Error{Code: chat.ErrMaxTurns, Message: "max turns reached"}
		}, "", chat.ErrMaxTurns},
		{"panic", func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
			panic("boom")
		}, "", chat.ErrInternal},
		{"cancel", func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, "", chat.ErrCanceled},
		{"create hook throws", nil, `function Create(ctx, messages) { throw new Error("not today") }`, chat.ErrHook},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, &scripted.Script{}, tc.hooks)
			e.ex.run = tc.run
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.name == "cancel" {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			var rec chattest.Recorder
			_, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, rec.Emit)
			var pe *chat.Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			if e.rt.Live() != 0 {
				t.Fatal("sandbox left behind")
			}
			errs := 0
			for _, typ := range rec.Types(chat.Start) {
				if typ == chat.TypeError {
					errs++
				}
			}
			if errs != 1 {
				t.Fatalf("%d error messages, want exactly 1", errs)
			}
			if d := rec.Last(); d.Event != chat.Done || d.Final.Error != tc.code {
				t.Fatalf("last = %+v", d)
			}
		})
	}
}

func TestSandboxCreateFailure(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	e.rt.CreateErr = errors.New("engine is down")
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
	var pe *chat.Error
	if !errors.As(err, &pe) || pe.Code != chat.ErrSandbox || !strings.Contains(pe.Message, "engine is down") {
		t.Fatalf("err = %v", err)
	}
}

// TestUnsetKeyMakesNoWorkspace: a sandboxed turn whose connector's key is
// not set fails before its sandbox and workspace are made, and says what
// to do.
func TestUnsetKeyMakesNoWorkspace(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	e.app.Connectors["test.llm"].Options.Key = "$ENV.AGENTBOX_TEST_UNSET_KEY"
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
	var pe *chat.Error
	if !errors.As(err, &pe) || pe.Code != chat.ErrAuth || !strings.Contains(pe.Message, "AGENTBOX_TEST_UNSET_KEY: environment variable is not set (set it in agentbox's environment") {
		t.Fatalf("err = %v", err)
	}
	if e.rt.Created() != 0 || e.p.cfg.Workspaces.Exists("u", "c") {
		t.Fatalf("sandboxes created %d, workspace made %v; want none", e.rt.Created(), e.p.cfg.Workspaces.Exists("u", "c"))
	}
}

const hookSource = `
function Create(ctx, messages, options) {
  ctx.Send({type: "notice", props: {message: "hello " + ctx.user_id}});
  ctx.sandbox.WriteFile("note.txt", "from Create");
  ctx.memory.chat.Set("seen", (ctx.memory.chat.Get("seen") || 0) + 1);
  messages.push({role: "user", content: "and add tests"});
  return {messages: messages, options: {sandbox: {arguments: {max_turns: 9}}}};
}
function Next(ctx, payload, options) {
  return {data: "replaced: " + payload.completion + " / seen " + ctx.memory.chat.Get("seen") + " / " + ctx.sandbox.ReadFile("note.txt")};
}
`

func TestHooksRunAroundTheExecutor(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, hookSource)
	var rec chattest.Recorder
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("write code")}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	req := e.ex.reqs[0]
	if req.Arguments.MaxTurns != 9 || req.Arguments.PermissionMode != "acceptEdits" {
		t.Errorf("arguments after Create = %+v", req.Arguments)
	}
	if n := len(req.Input); n != 2 || req.Input[1].Content != "and add tests" {
		t.Errorf("input after Create = %v", req.Input)
	}
	want := "replaced: done in sandbox / seen 1 / from Create"
	if resp.Content != want || resp.Data != want || rec.Last().Final.Data != want {
		t.Errorf("content = %q, data = %v", resp.Content, resp.Data)
	}
	if got := rec.Types(chat.Start); got[1] != chat.TypeNotice {
		t.Errorf("messages = %v, want the hook's notice after loading", got)
	}
	chattest.Check(t, rec.Events())
}

func TestCreateHookMayNotChangeOtherSandboxSettings(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, `function Create() { return {options: {sandbox: {image: "evil"}}} }`)
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
	if err == nil || !strings.Contains(err.Error(), "only sandbox.arguments") {
		t.Fatalf("err = %v", err)
	}
	e2 := newEnv(t, &scripted.Script{}, `function Create() { return {options: {sandbox: {arguments: {max_turns: "x"}}}} }`)
	_, err = e2.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
	if err == nil || !strings.Contains(err.Error(), "max_turns") {
		t.Fatalf("err = %v", err)
	}
}

func TestNextHookErrorIsANotice(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, `function Next() { throw new Error("oops") }`)
	var rec chattest.Recorder
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, rec.Emit)
	if err != nil || resp.Content != "done in sandbox" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	found := false
	for _, ev := range rec.Events() {
		if ev.Type == chat.TypeNotice && strings.Contains(ev.Text, "oops") {
			found = true
		}
	}
	if !found {
		t.Fatal("no notice for the failed Next hook")
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	started := make(chan struct{})
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
		errc <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := e.p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the drain deadline", err)
	}
	if err := <-errc; err == nil {
		t.Fatal("running turn was not cancelled")
	}
	if e.rt.Live() != 0 {
		t.Fatal("sandbox left behind")
	}
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("hi")}, nil); err == nil {
		t.Fatal("closed pipeline accepted a turn")
	}
}

func TestWorkspaceForFilesIsNotCreated(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	_, _, err := e.p.Workspace(context.Background(), "u1", "never-used")
	var pe *chat.Error
	if !errors.As(err, &pe) || pe.Code != chat.ErrInvalidRequest || !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("err = %v, want an invalid request wrapping sandbox.ErrNotFound (a 404)", err)
	}
	if dir, _ := e.p.cfg.Workspaces.Path("u1", "never-used"); dirExists(dir) {
		t.Fatal("looking created the workspace")
	}
	if _, _, err := e.p.Workspace(context.Background(), "u1", "../etc"); !errors.As(err, &pe) || pe.Code != chat.ErrInvalidRequest || errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("bad chat id: err = %v, want an invalid request (a 400)", err)
	}
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "used", AssistantID: "coder", Messages: user("go")}, nil); err != nil {
		t.Fatal(err)
	}
	ws, release, err := e.p.Workspace(context.Background(), "u1", "used")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if ws == nil {
		t.Fatal("no workspace")
	}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func TestOpenHookMessagesEndBeforeDone(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, `function Create(ctx) { ctx.SendStream({type: "loading", props: {message: "working"}}); return null }`)
	var rec chattest.Recorder
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, rec.Emit); err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, ev := range rec.Events() {
		switch ev.Event {
		case chat.Start:
			open[ev.ID] = true
		case chat.End:
			delete(open, ev.ID)
		case chat.Done:
			if len(open) > 0 {
				t.Fatalf("done with messages still open: %v", open)
			}
		}
	}
}

func TestCancelledHookIsCancelled(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, `function Create(ctx) { while (true) {} }`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
	var pe *chat.Error
	if !errors.As(err, &pe) || pe.Code != chat.ErrCanceled {
		t.Fatalf("err = %v, want canceled (a 499)", err)
	}
	if e.rt.Live() != 0 {
		t.Fatal("sandbox left behind")
	}
}

// TestDoneCarriesNotices: what an executor noticed about a turn that
// succeeded (background work stopped, a CLI that hung after its answer)
// is in the done event, for clients that read only that.
func TestDoneCarriesNotices(t *testing.T) {
	e := newEnv(t, nil, "")
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		return &executor.Result{Content: "answer", Notices: []string{"background_stopped"}}, nil
	}
	var rec chattest.Recorder
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: user("go")}, rec.Emit); err != nil {
		t.Fatal(err)
	}
	if done := rec.Last(); done.Final == nil || !slices.Equal(done.Final.Notices, []string{"background_stopped"}) {
		t.Errorf("done %+v", done.Final)
	}
}
