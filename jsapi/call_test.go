package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
)

func TestCreateResult(t *testing.T) {
	t.Parallel()
	in := []chat.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "hi"}}
	cases := []struct {
		name    string
		body    string
		want    *CreateResult
		wantErr string
	}{
		{"null", `return null`, nil, ""},
		{"undefined", `return`, nil, ""},
		{"messages", `return {messages: [...messages, {role: "assistant", content: "ok", name: "bot"}]}`,
			&CreateResult{Messages: append(append([]chat.Message(nil), in...), chat.Message{Role: "assistant", Content: "ok", Name: "bot"})}, ""},
		{"options", `return {options: {temperature: 0.5, connector: "deepseek.v3", sandbox: {arguments: {max_turns: 3}}}}`,
			&CreateResult{Options: &chat.Options{ModelOptions: chat.ModelOptions{Temperature: ptr(0.5)}, Connector: "deepseek.v3",
				Sandbox: &chat.SandboxOptions{Arguments: &chat.Arguments{MaxTurns: 3}}}}, ""},
		{"null fields", `return {messages: null, options: undefined}`, &CreateResult{}, ""},
		{"tool calls", `return {messages: [...messages, {role: "assistant", content: "", tool_calls: [{id: "c1", type: "function", function: {name: "f", arguments: '{"a":1}'}}]}, {role: "tool", content: "r", tool_call_id: "c1"}]}`,
			&CreateResult{Messages: append(append([]chat.Message(nil), in...),
				chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Input: chat.RawJSON(`{"a":1}`)}}},
				chat.Message{Role: "tool", Content: "r", ToolCallID: "c1"})}, ""},
		{"tool calls not array", `return {messages: [{role: "assistant", content: "", tool_calls: {}}]}`, nil, "messages[0].tool_calls: want an array, got an object"},
		{"tool call without id", `return {messages: [{role: "assistant", content: "", tool_calls: [{function: {name: "f"}}]}]}`, nil, "messages[0].tool_calls[0]: id and function.name are required"},
		{"sees options", `return {options: {top_p: options.temperature}}`, &CreateResult{Options: &chat.Options{ModelOptions: chat.ModelOptions{TopP: ptr(0.2)}}}, ""},
		{"async", `return (async () => ({messages: [{role: "user", content: "x"}]}))()`,
			&CreateResult{Messages: []chat.Message{{Role: "user", Content: "x"}}}, ""},
		{"number", `return 42`, nil, "Create must return null or {messages, options}, got a number"},
		{"string", `return "messages"`, nil, "Create must return null or {messages, options}, got a string"},
		{"array", `return messages`, nil, "Create must return null or {messages, options}, got an array"},
		// Unknown fields are ignored, as Yao ignores them (Unknown says which).
		{"unknown field", `return {message: messages}`, &CreateResult{Unknown: []string{`"message" (did you mean "messages"?)`}}, ""},
		{"yao fields", `return {temperature: 0.7, max_tokens: 50, connector: "c2", prompt_preset: "chat.friendly", disable_global_prompts: true, locale: "zh-cn", metadata: {k: "v"}, mcp_servers: [{server_id: "echo", tools: ["ping"]}], uses: {search: "disabled"}, options: {temperature: 0.1}}`,
			&CreateResult{Options: &chat.Options{ModelOptions: chat.ModelOptions{Temperature: ptr(0.1), MaxTokens: ptr(50)}, Connector: "c2",
				PromptPreset: "chat.friendly", DisableGlobalPrompts: ptr(true), Locale: "zh-cn", Metadata: map[string]any{"k": "v"},
				MCPServers: []chat.MCPServerOption{{ServerID: "echo", Tools: []string{"ping"}}}}, Ignored: []string{"uses"}}, ""},
		{"yao field of the wrong type", `return {max_tokens: "lots"}`, nil, "Create returned max_tokens: want an integer, got a string"},
		{"delegate", `return {delegate: {agent_id: "other", messages: [{role: "user", content: "hi"}], options: {connector: "c2", metadata: {k: 1}}}}`,
			&CreateResult{Delegate: &Delegate{AssistantID: "other", Messages: []chat.Message{{Role: "user", Content: "hi"}}, Connector: "c2", Metadata: map[string]any{"k": 1.0}}}, ""},
		{"delegate without messages", `return {delegate: {agent_id: "other"}}`, &CreateResult{Delegate: &Delegate{AssistantID: "other"}}, ""},
		{"delegate without agent", `return {delegate: {messages: []}}`, nil, "Create returned delegate without agent_id"},
		{"delegate unknown field", `return {delegate: {agent: "x"}}`, nil, `Create returned delegate: unknown field "agent" (want agent_id, messages, options)`},
		{"delegate unknown option", `return {delegate: {agent_id: "x", options: {temperature: 1}}}`, nil, `unknown option "temperature"`},
		{"content parts", `return {messages: [{role: "user", content: [{type: "text", text: "a"}, {type: "text", text: "b"}]}]}`,
			&CreateResult{Messages: []chat.Message{{Role: "user", Content: "a\nb"}}}, ""},
		{"image parts", `return {messages: [{role: "user", content: [{type: "text", text: "look"}, {type: "image_url", image_url: {url: "data:image/png;base64,AA==", detail: "low"}}, {type: "image_url", image_url: "https://x.example/a.png"}]}]}`,
			&CreateResult{Messages: []chat.Message{{Role: "user", Content: "look", Parts: []chat.Part{{Type: "text", Text: "look"},
				{Type: "image_url", ImageURL: &chat.ImageURL{URL: "data:image/png;base64,AA==", Detail: "low"}}, {Type: "image_url", ImageURL: &chat.ImageURL{URL: "https://x.example/a.png"}}}}}}, ""},
		{"messages not array", `return {messages: "hi"}`, nil, "Create returned messages: want an array, got a string"},
		{"bad role", `return {messages: [{role: "robot", content: "x"}]}`, nil, `messages[0].role: "robot" is not one of system, developer, user, assistant, tool`},
		{"no role", `return {messages: [{content: "x"}]}`, nil, `messages[0]: role is missing`},
		{"image without url", `return {messages: [{role: "user", content: [{type: "image_url"}]}]}`, nil, `messages[0].content: part 0: image_url: want {url: "data:image/png;base64,..."}, got undefined`},
		{"content not text", `return {messages: [{role: "user", content: [{type: "input_audio"}]}]}`, nil, `messages[0].content: part 0: type "input_audio": only text and image_url parts are supported`},
		{"content not string", `return {messages: [{role: "user", content: 3}]}`, nil, "messages[0].content: want a string or a list of content parts, got a number"},
		{"options not object", `return {options: [1]}`, nil, "Create returned options: want an object, got an array"},
		{"unknown option", `return {options: {temprature: 1}}`, nil, "Create returned options.temprature: unknown field"},
		{"option of the wrong type", `return {options: {max_tokens: "lots"}}`, nil, "Create returned options.max_tokens: want an integer, got a string"},
		{"options not json", `const o: any = {}; o.self = o; return {options: o}`, nil, "Create returned options that are not JSON"},
		{"rejected", `return Promise.reject(new TypeError("nope"))`, nil, "Create hook: TypeError: nope"},
		{"pending", `return new Promise(() => {})`, nil, "returned a Promise that did not settle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := load(t, "export function Create(ctx: any, messages: any[], options: any) {\n"+tc.body+"\n}\n")
			got, err := h.Create(context.Background(), &Context{}, in, chat.Options{ModelOptions: chat.ModelOptions{Temperature: ptr(0.2)}})
			if tc.wantErr != "" {
				var je *Error
				if !errors.As(err, &je) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCreateSeesImages: a message with images reaches Create as Yao gives
// it, its content the parts ([{type: "text"}, {type: "image_url",
// image_url: {url, detail}}]); returned unchanged, it comes back the same.
func TestCreateSeesImages(t *testing.T) {
	t.Parallel()
	in := []chat.Message{{Role: "user", Content: "what is it?", Parts: []chat.Part{{Type: "text", Text: "what is it?"},
		{Type: "image_url", ImageURL: &chat.ImageURL{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "high"}}}}}
	h := load(t, `export function Create(ctx: any, messages: any[]) {
		const c = messages[0].content;
		if (!Array.isArray(c) || c[0].type !== "text" || c[0].text !== "what is it?" || c[1].type !== "image_url" ||
			c[1].image_url.url !== "data:image/png;base64,iVBORw0KGgo=" || c[1].image_url.detail !== "high") {
			throw new Error("content: " + JSON.stringify(c));
		}
		return {messages};
	}
`)
	got, err := h.Create(context.Background(), &Context{}, in, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Messages, in) {
		t.Fatalf("messages = %+v, want %+v", got.Messages, in)
	}
}

func TestNextResult(t *testing.T) {
	t.Parallel()
	payload := NextPayload{
		Messages:   []chat.Message{{Role: "user", Content: "q"}},
		Completion: Completion{Content: "answer"},
		Tools:      []executor.ToolCall{{ID: "t1", Name: "Bash", Input: chat.RawJSON(`{"command":"ls"}`), Result: "a.txt", IsError: false}},
	}
	cases := []struct {
		name    string
		body    string
		p       NextPayload
		want    *NextResult
		wantErr string
	}{
		{"null", `return null`, payload, nil, ""},
		{"data", `return {data: {text: payload.completion.toUpperCase(), n: payload.messages.length}}`, payload,
			&NextResult{Data: map[string]any{"text": "ANSWER", "n": 1.0}, HasData: true}, ""},
		{"data null", `return {data: null}`, payload, &NextResult{HasData: true}, ""},
		{"tools", `return {data: payload.tools.map(t => [t.id, t.name, t.input.command, t.result, t.is_error])}`, payload,
			&NextResult{Data: []any{[]any{"t1", "Bash", "ls", "a.txt", false}}, HasData: true}, ""},
		{"yao tools", `return {data: payload.tools.map(t => [t.toolcall_id, t.server, t.tool, t.arguments.command, t.error])}`, payload,
			&NextResult{Data: []any{[]any{"t1", "", "Bash", "ls", ""}}, HasData: true}, ""},
		{"completion is the text", "return {data: [`${payload.completion}`, payload.completion.length, payload.completion == \"answer\", JSON.stringify(payload.completion)]}", payload,
			&NextResult{Data: []any{"answer", 6.0, true, `"answer"`}, HasData: true}, ""},
		{"completion is yao's", `const c = payload.completion; return {data: [c.content, c.role, c.object, c.finish_reason, c.tool_calls[0].function.name, JSON.parse(c.tool_calls[0].function.arguments).q, c.usage.total_tokens]}`,
			NextPayload{Completion: Completion{Content: "x", FinishReason: "tool_calls", ToolCalls: []CompletionToolCall{{ID: "c1", Name: "search", Arguments: `{"q":"go"}`}},
				Usage: chat.Usage{InputTokens: 10, OutputTokens: 5}}},
			&NextResult{Data: []any{"x", "assistant", "chat.completion", "tool_calls", "search", "go", 15.0}, HasData: true}, ""},
		{"metadata", `return {metadata: {seen: true}}`, payload, &NextResult{Metadata: map[string]any{"seen": true}}, ""},
		{"delegate", `return {delegate: {agent_id: "x", messages: payload.messages}}`, payload, &NextResult{Delegate: &Delegate{AssistantID: "x", Messages: payload.Messages}}, ""},
		{"delegate not object", `return {delegate: "x"}`, payload, nil, "Next returned delegate: want {agent_id, messages, options?}, got a string"},
		{"no error", `return {data: payload.error}`, payload, &NextResult{HasData: true}, ""},
		{"error", `return {data: payload.error}`, NextPayload{Error: "boom"}, &NextResult{Data: "boom", HasData: true}, ""},
		{"no data", `return {}`, payload, nil, "Next must return null, {data} or {metadata}, got an object with neither"},
		{"extra field", `return {data: 1, content: "x"}`, payload, nil, `Next returned an unknown field "content"`},
		{"number", `return 1`, payload, nil, "Next must return null or {data}, got a number"},
		{"function data", `return {data: () => 1}`, payload, nil, "Next returned data that is not JSON: a function cannot be represented in JSON"},
		{"throws", `throw new Error("bad")`, payload, nil, "Next hook: bad"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := load(t, "export function Next(ctx, payload, options) {\n"+tc.body+"\n}\n")
			got, err := h.Next(context.Background(), &Context{}, tc.p, chat.Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestMissingHooksAreNoOps(t *testing.T) {
	t.Parallel()
	h := load(t, `export function tool(ctx, args) { return {sum: args.a + args.b} }`)
	if res, err := h.Create(context.Background(), &Context{}, nil, chat.Options{}); res != nil || err != nil {
		t.Fatalf("Create = %v, %v", res, err)
	}
	if res, err := h.Next(context.Background(), &Context{}, NextPayload{}, chat.Options{}); res != nil || err != nil {
		t.Fatalf("Next = %v, %v", res, err)
	}
	got, err := h.Call(context.Background(), &Context{}, "tool", map[string]any{"a": 1, "b": 2})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"sum": 3.0}) {
		t.Fatalf("Call = %v, %v", got, err)
	}
	_, err = h.Call(context.Background(), &Context{}, "nope", nil)
	var je *Error
	if !errors.Is(err, ErrNoFunction) || !errors.As(err, &je) || je.Code != CodeNoFunction {
		t.Fatalf("Call(nope) = %v", err)
	}
}

func TestThrownErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body               string
		wantName, wantMsg, wantC string
	}{
		{"Error", `throw new Error("no")`, "Error", "no", CodeHookError},
		{"custom code", `const e: any = new Error("quota"); e.code = "QUOTA"; throw e`, "Error", "quota", "QUOTA"},
		{"subclass", `class MyErr extends Error { constructor(m) { super(m); this.name = "MyErr" } } throw new MyErr("mine")`, "MyErr", "mine", CodeHookError},
		{"string", `throw "plain"`, "Error", "plain", CodeHookError},
		{"host error let through", `ctx.memory.context.Set("", 1)`, "TypeError", "memory.context.Set: the key is empty", CodeInvalidArgument},
		{"reference", `return undefinedThing.x`, "ReferenceError", "undefinedThing is not defined", CodeHookError},
		{"recursion", `const f = (n) => f(n + 1) + 1; return f(0)`, "RangeError", "Maximum call stack size exceeded", CodeHookError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := load(t, "export function Create(ctx: any) {\n"+tc.body+"\n}\n")
			_, err := h.Create(context.Background(), &Context{}, nil, chat.Options{})
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("err = %v", err)
			}
			if je.Hook != "Create" || je.Name != tc.wantName || je.Message != tc.wantMsg || je.Code != tc.wantC {
				t.Fatalf("error = %+v", je)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	a := writeAssistant(t, map[string]string{"src/index.ts": `
let calls = 0;
export function Create(ctx: any, messages: any[], options: any) {
  if (options.user === "spin") { while (true) {} }
  return {options: {user: "ok"}};
}
export function Next(ctx: any) {
  ctx.sandbox.Exec(["sleep", "10"]);
  return null;
}
`})
	a.HookTimeout = 100 * time.Millisecond
	h, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if h.Timeout() != 100*time.Millisecond {
		t.Fatalf("Timeout = %v", h.Timeout())
	}

	t.Run("busy loop", func(t *testing.T) {
		var rec chattest.Recorder
		start := time.Now()
		_, err := h.Create(context.Background(), &Context{Emit: rec.Emit}, nil, chat.Options{ModelOptions: chat.ModelOptions{User: "spin"}})
		took := time.Since(start)
		var je *Error
		if !errors.As(err, &je) || je.Code != CodeHookTimeout || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if want := "Create hook: TimeoutError: Create ran past its timeout of 100ms and was stopped"; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("message %q, want %q", err, want)
		}
		if je.File != "src/index.ts" || je.Line != 4 {
			t.Errorf("position = %s:%d", je.File, je.Line)
		}
		if took > 2*time.Second {
			t.Errorf("took %v to stop", took)
		}
		// The next call runs normally.
		res, err := h.Create(context.Background(), &Context{}, nil, chat.Options{})
		if err != nil || res == nil || res.Options == nil || res.Options.User != "ok" {
			t.Fatalf("after a timeout: %+v, %v", res, err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		a2 := *a
		a2.HookTimeout = time.Minute
		h2, err := Load(&a2)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = h2.Create(ctx, &Context{}, nil, chat.Options{ModelOptions: chat.ModelOptions{User: "spin"}})
		var je *Error
		if !errors.As(err, &je) || je.Code != CodeCanceled || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("cancel took %v", time.Since(start))
		}
	})

	t.Run("sandbox call shares the deadline", func(t *testing.T) {
		start := time.Now()
		_, err := h.Next(context.Background(), &Context{Sandbox: newFakeSandbox(t)}, NextPayload{}, chat.Options{})
		var je *Error
		if !errors.As(err, &je) || je.Code != CodeHookTimeout {
			t.Fatalf("err = %v", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Exec outlived the hook deadline: %v", took)
		}
	})
}

// TestIsolation checks that nothing one call leaves behind is seen by the
// next, whoever makes it.
func TestIsolation(t *testing.T) {
	t.Parallel()
	h := load(t, `
let counter = 0;
export function Create(ctx: any) {
  counter++;
  const seen = {
    counter,
    global: (globalThis as any).leaked,
    sloppy: typeof (globalThis as any).implicitGlobal,
    proto: typeof ([] as any).evil,
    json: JSON.stringify({a: 1}),
    user: (globalThis as any).lastUser,
  };
  const out = JSON.stringify(seen);
  (globalThis as any).leaked = ctx.user_id;
  (globalThis as any).lastUser = ctx.user_id;
  (Array.prototype as any).evil = () => "pwned";
  (JSON as any).stringify = () => "patched";
  Object.defineProperty(globalThis, "sticky", {value: 1, configurable: false});
  return {messages: [{role: "user", content: out}]};
}
`)
	want := map[string]any{"counter": 1.0, "sloppy": "undefined", "proto": "undefined", "json": `{"a":1}`}
	for i := range 3 {
		res, err := h.Create(context.Background(), &Context{UserID: fmt.Sprintf("user%d", i)}, nil, chat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var seen map[string]any
		if err := json.Unmarshal([]byte(res.Messages[0].Content), &seen); err != nil || !reflect.DeepEqual(seen, want) {
			t.Fatalf("call %d saw %v, want %v", i, res.Messages[0].Content, want)
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	h := load(t, `
export function Create(ctx: any, messages: any[]) {
  ctx.memory.user.Set("name", ctx.user_id);
  let x = 0;
  for (let i = 0; i < 1000; i++) x += i;
  return {messages: [{role: "user", content: ctx.user_id + ":" + ctx.memory.user.Get("name") + ":" + x}]};
}
`)
	store := NewMemStore()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", i)
			res, err := h.Create(context.Background(), &Context{UserID: user, Memory: store}, nil, chat.Options{})
			if err != nil {
				errs <- err
				return
			}
			if want := user + ":" + user + ":499500"; res.Messages[0].Content != want {
				errs <- fmt.Errorf("got %q, want %q", res.Messages[0].Content, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestChatError(t *testing.T) {
	t.Parallel()
	h := load(t, "export function Create() { throw new TypeError(\"not today\") }\n")
	_, err := h.Create(context.Background(), &Context{}, nil, chat.Options{})
	ce := ChatError(err)
	var je *Error
	if ce.Code != chat.ErrHook || ce.Message != "Create hook: TypeError: not today (at src/index.ts:1:34)" || !errors.As(ce, &je) || je.Name != "TypeError" {
		t.Errorf("ChatError = %#v", ce)
	}
	if ce := ChatError(fmt.Errorf("x: %w", context.Canceled)); ce.Code != chat.ErrCanceled {
		t.Errorf("canceled = %#v", ce)
	}
	if ce := ChatError(errors.New("odd")); ce.Code != chat.ErrHook || ce.Message != "hook: odd" {
		t.Errorf("plain = %#v", ce)
	}
}

func ptr[T any](v T) *T { return &v }

// TestRequestFields: ctx has Yao's request fields, with Yao's defaults
// when the request names none.
func TestRequestFields(t *testing.T) {
	t.Parallel()
	h := load(t, `
export function Create(ctx: any) {
  const seen = {theme: ctx.theme, referer: ctx.referer, accept: ctx.accept, route: ctx.route, client: ctx.client, authorized: ctx.authorized};
  return {messages: [{role: "user", content: JSON.stringify(seen)}]};
}
`)
	for _, tc := range []struct {
		hc   *Context
		want string
	}{
		{&Context{UserID: "alice"}, `{"theme":"","referer":"api","accept":"standard","route":"","client":{"ip":"","type":"web","user_agent":""},"authorized":{"user_id":"alice"}}`},
		{&Context{UserID: "bob", TeamID: "t1", Client: Client{Type: "macos", UserAgent: "ua", IP: "127.0.0.1", Referer: RefererAgentFork, Accept: "cui-web", Theme: "dark", Route: "/chat"}},
			`{"theme":"dark","referer":"agent_fork","accept":"cui-web","route":"/chat","client":{"ip":"127.0.0.1","type":"macos","user_agent":"ua"},"authorized":{"team_id":"t1","user_id":"bob"}}`},
	} {
		res, err := h.Create(context.Background(), tc.hc, nil, chat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal([]byte(res.Messages[0].Content), &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ctx fields\n got %s\nwant %s", res.Messages[0].Content, tc.want)
		}
	}
}
