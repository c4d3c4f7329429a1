package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// run calls fn(ctx, args) from src and returns its JSON-decoded result.
func run(t *testing.T, src string, hc *Context, args any) any {
	t.Helper()
	h := load(t, src)
	got, err := h.Call(context.Background(), hc, "test", args)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	return got
}

// catchJS wraps a statement so the test function returns the error it
// throws as {name, code, message, ...} (or "ok").
func catchJS(stmt string) string {
	return `export function test(ctx: any, args: any) {
  try { ` + stmt + `; return "ok"; }
  catch (e) { return {instance: e instanceof Error, name: e.name, code: e.code, message: e.message, exit_code: e.exit_code, stdout: e.stdout, stderr: e.stderr}; }
}`
}

func TestCtxFields(t *testing.T) {
	t.Parallel()
	meta := map[string]any{"plan": "pro", "tags": []any{"a"}}
	hc := &Context{ChatID: "c1", AssistantID: "coder", UserID: "u1", Locale: "de-DE", Metadata: meta}
	got := run(t, `export function test(ctx, args) {
  ctx.metadata.tags.push("changed"); ctx.metadata.plan = "free";
  return {chat: ctx.chat_id, assistant: ctx.assistant_id, user: ctx.user_id, locale: ctx.locale,
    sandbox: typeof ctx.sandbox, hasSandbox: "sandbox" in ctx, meta: ctx.metadata};
}`, hc, nil)
	want := map[string]any{"chat": "c1", "assistant": "coder", "user": "u1", "locale": "de-DE", "sandbox": "undefined",
		"hasSandbox": true, "meta": map[string]any{"plan": "free", "tags": []any{"a", "changed"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if meta["plan"] != "pro" || len(meta["tags"].([]any)) != 1 {
		t.Fatalf("the hook changed the caller's metadata: %v", meta)
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	var rec chattest.Recorder
	hc := &Context{Emit: rec.Emit}
	got := run(t, `export function test(ctx: any) {
  const a = ctx.Send({type: "notice", props: {message: "heads up", code: "x"}});
  const b = ctx.Send("plain text");
  const s = ctx.SendStream({type: "text", props: {content: "Hel"}});
  ctx.Append(s, "lo");
  ctx.Replace(s, {type: "markdown", props: {content: "# Hello"}});
  ctx.Append(s, "!");
  ctx.End(s);
  ctx.End(s);
  const c = ctx.SendStream({type: "progress", id: "mine"});
  return [a, b, s, c];
}`, hc, nil)
	if !reflect.DeepEqual(got, []any{"hook_1", "hook_2", "hook_3", "mine"}) {
		t.Fatalf("ids = %v", got)
	}
	want := []chat.Event{
		{Event: chat.Start, ID: "hook_1", Type: "notice", Text: "heads up", Props: map[string]any{"message": "heads up", "code": "x"}},
		{Event: chat.End, ID: "hook_1", Type: "notice"},
		{Event: chat.Start, ID: "hook_2", Type: "text", Text: "plain text", Props: map[string]any{"content": "plain text"}},
		{Event: chat.End, ID: "hook_2", Type: "text"},
		{Event: chat.Start, ID: "hook_3", Type: "text", Text: "Hel", Props: map[string]any{"content": "Hel"}},
		{Event: chat.Delta, ID: "hook_3", Type: "text", Text: "lo"},
		{Event: chat.Replace, ID: "hook_3", Type: "markdown", Text: "# Hello", Props: map[string]any{"content": "# Hello"}},
		{Event: chat.Delta, ID: "hook_3", Type: "markdown", Text: "!"},
		{Event: chat.End, ID: "hook_3", Type: "markdown"},
		{Event: chat.Start, ID: "mine", Type: "progress"},
	}
	if ev := rec.Events(); !reflect.DeepEqual(ev, want) {
		t.Fatalf("events:\n got %+v\nwant %+v", ev, want)
	}
	// A stream left open is ended when the request's hooks are done.
	hc.EndOpen()
	hc.EndOpen()
	ev := rec.Events()
	if len(ev) != len(want)+1 || !reflect.DeepEqual(ev[len(ev)-1], chat.Event{Event: chat.End, ID: "mine", Type: "progress"}) {
		t.Fatalf("after EndOpen: %+v", ev[len(want):])
	}
}

// TestOutputControl: Yao's ctx.Send with message and block ids, Append
// with a path, Merge, Set, End with final text, EndBlock and the id
// makers, as chat events.
func TestOutputControl(t *testing.T) {
	t.Parallel()
	var rec chattest.Recorder
	got := run(t, `export function test(ctx: any) {
  const block = ctx.BlockID();
  const id = ctx.MessageID();
  ctx.Send({type: "progress", message_id: id, props: {step: 1, items: []}}, block);
  ctx.Merge(id, {step: 2, status: "running"});
  ctx.Set(id, "done", "props.status");
  ctx.Append(id, {props: {name: "a"}}, "props.items");
  ctx.Append(id, " more");
  const s = ctx.SendStream({type: "text", props: {content: "Hi"}, block_id: block});
  ctx.End(s, " there");
  ctx.EndBlock(block);
  return [block, id, s, ctx.ThreadID()];
}`, &Context{Emit: rec.Emit}, nil)
	if !reflect.DeepEqual(got, []any{"block_1", "hook_2", "hook_3", "thread_4"}) {
		t.Fatalf("ids = %v", got)
	}
	want := []chat.Event{
		{Event: chat.Start, ID: "hook_2", Type: "progress", Props: map[string]any{"step": 1.0, "items": []any{}}, Block: "block_1"},
		{Event: chat.End, ID: "hook_2", Type: "progress"},
		{Event: chat.Merge, ID: "hook_2", Type: "progress", Path: "props", Value: map[string]any{"step": 2.0, "status": "running"}},
		{Event: chat.Set, ID: "hook_2", Type: "progress", Path: "props.status", Value: "done"},
		{Event: chat.Append, ID: "hook_2", Type: "progress", Path: "props.items", Value: map[string]any{"name": "a"}},
		{Event: chat.Append, ID: "hook_2", Type: "progress", Path: "props.content", Value: " more"},
		{Event: chat.Start, ID: "hook_3", Type: "text", Text: "Hi", Props: map[string]any{"content": "Hi"}, Block: "block_1"},
		{Event: chat.Delta, ID: "hook_3", Type: "text", Text: " there"},
		{Event: chat.End, ID: "hook_3", Type: "text"},
		{Event: chat.BlockEnd, ID: "block_1", Type: chat.TypeBlock},
	}
	if ev := rec.Events(); !reflect.DeepEqual(ev, want) {
		t.Fatalf("events:\n got %+v\nwant %+v", ev, want)
	}
	chattest.Check(t, append(rec.Events(), chat.Event{Event: chat.Done, Final: &chat.Final{}}))
}

func TestMessagesAcrossHooks(t *testing.T) {
	t.Parallel()
	h := load(t, `
export function Create(ctx: any) { ctx.memory.context.Set("loading", ctx.SendStream({type: "loading", props: {message: "working"}})); return null; }
export function Next(ctx: any) { ctx.Append(ctx.memory.context.Get("loading"), "."); return null; }
`)
	var rec chattest.Recorder
	hc := &Context{Emit: rec.Emit}
	if _, err := h.Create(context.Background(), hc, nil, chat.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Next(context.Background(), hc, NextPayload{}, chat.Options{}); err != nil {
		t.Fatal(err)
	}
	want := []chat.Event{
		{Event: chat.Start, ID: "hook_1", Type: "loading", Text: "working", Props: map[string]any{"message": "working"}},
		{Event: chat.Delta, ID: "hook_1", Type: "loading", Text: "."},
		{Event: chat.End, ID: "hook_1", Type: "loading"}, // ended after Next
	}
	if ev := rec.Events(); !reflect.DeepEqual(ev, want) {
		t.Fatalf("events:\n got %+v\nwant %+v", ev, want)
	}
}

func TestMessageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ stmt, msg string }{
		{`ctx.Send(42)`, "Send: want a message {type, props} or a string, got a number"},
		{`ctx.Send({type: 1})`, "Send: message type: want a non-empty string, got a number"},
		{`ctx.Send({type: "text", props: "x"})`, "Send: message props: want an object, got a string"},
		{`ctx.Send({type: "text", body: "x"})`, `Send: unknown message field "body"`},
		{`ctx.Send({id: "a"}); ctx.Send({id: "a"})`, `Send: message id "a" is already used`},
		{`ctx.Append("nope", "x")`, `Append: no message "nope" was sent by this request's hooks`},
		{`ctx.Append(ctx.SendStream("x"), 5)`, "Append: want text, or a message {type, props}, got a number"},
		{`ctx.Set(ctx.Send("x"), 1)`, `Set: want a path as the third argument`},
		{`ctx.Merge(ctx.Send("x"), 5)`, "Merge: want an object to merge, got a number"},
		{`ctx.Merge("nope", {a: 1})`, `Merge: no message "nope" was sent`},
		{`ctx.EndBlock(3)`, "EndBlock: want a block id"},
		{`ctx.Send("x", 5)`, "Send: the block id (second argument) must be a string"},
		{`ctx.End()`, "End: want a message id (what Send or SendStream returned), got undefined"},
		{`ctx.Replace(ctx.Send("x"), {id: "y"})`, "Replace: the message id is the first argument, not a field"},
	}
	for _, tc := range cases {
		t.Run(tc.stmt, func(t *testing.T) {
			t.Parallel()
			got := run(t, catchJS(tc.stmt), &Context{}, nil).(map[string]any)
			if got["code"] != CodeInvalidArgument || got["name"] != "TypeError" || got["instance"] != true || !strings.Contains(got["message"].(string), tc.msg) {
				t.Fatalf("got %v, want INVALID_ARGUMENT %q", got, tc.msg)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	t.Parallel()
	h := load(t, `export function test(ctx: any, args: any) {
  const m = ctx.memory[args.ns];
  if (args.set) m.Set(args.key, args.value);
  if (args.del) m.Del(args.key);
  return {value: m.Get(args.key) ?? "missing", has: m.Has(args.key), keys: m.Keys()};
}`)
	store := NewMemStore()
	call := func(hc *Context, args map[string]any) any {
		t.Helper()
		got, err := h.Call(context.Background(), hc, "test", args)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	ann1 := &Context{UserID: "ann", ChatID: "c1", Memory: store}
	ann2 := &Context{UserID: "ann", ChatID: "c2", Memory: store}
	bob := &Context{UserID: "bob", ChatID: "c1", Memory: store}
	set := func(ns, key string, v any) map[string]any {
		return map[string]any{"ns": ns, "key": key, "value": v, "set": true}
	}
	get := func(ns, key string) map[string]any { return map[string]any{"ns": ns, "key": key} }
	steps := []struct {
		hc   *Context
		args map[string]any
		want map[string]any
	}{
		{ann1, set("user", "profile", map[string]any{"lang": "go", "n": 1}), map[string]any{"value": map[string]any{"lang": "go", "n": 1.0}, "has": true, "keys": []any{"profile"}}},
		{ann2, get("user", "profile"), map[string]any{"value": map[string]any{"lang": "go", "n": 1.0}, "has": true, "keys": []any{"profile"}}},
		{bob, get("user", "profile"), map[string]any{"value": "missing", "has": false, "keys": []any{}}},
		{ann1, set("chat", "topic", "sandboxes"), map[string]any{"value": "sandboxes", "has": true, "keys": []any{"topic"}}},
		{ann2, get("chat", "topic"), map[string]any{"value": "missing", "has": false, "keys": []any{}}},
		{bob, get("chat", "topic"), map[string]any{"value": "missing", "has": false, "keys": []any{}}},
		{ann1, set("context", "tmp", []any{1.0, nil, "x"}), map[string]any{"value": []any{1.0, nil, "x"}, "has": true, "keys": []any{"tmp"}}},
		{ann1, get("context", "tmp"), map[string]any{"value": []any{1.0, nil, "x"}, "has": true, "keys": []any{"tmp"}}},
		{ann2, get("context", "tmp"), map[string]any{"value": "missing", "has": false, "keys": []any{}}},
		{ann1, set("user", "null", nil), map[string]any{"value": "missing", "has": true, "keys": []any{"null", "profile"}}},
		{ann1, map[string]any{"ns": "user", "key": "profile", "del": true}, map[string]any{"value": "missing", "has": false, "keys": []any{"null"}}},
		{ann1, map[string]any{"ns": "chat", "key": "nope", "del": true}, map[string]any{"value": "missing", "has": false, "keys": []any{"topic"}}},
	}
	for i, s := range steps {
		if got := call(s.hc, s.args); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d %v: got %v, want %v", i, s.args, got, s.want)
		}
	}
	raw, ok, err := store.Get(context.Background(), NamespaceChat, ChatOwner("ann", "c1"), "topic")
	if err != nil || !ok || string(raw) != `"sandboxes"` {
		t.Fatalf("store chat value = %s, %v, %v", raw, ok, err)
	}
	if got := ann1.Scratch(); string(got["tmp"]) != `[1,null,"x"]` {
		t.Fatalf("Scratch = %v", got)
	}
}

func TestMemoryErrors(t *testing.T) {
	t.Parallel()
	store := NewMemStore()
	cases := []struct {
		name, stmt string
		hc         *Context
		code, msg  string
	}{
		{"undefined", `ctx.memory.user.Set("k", undefined)`, &Context{UserID: "u", Memory: store}, CodeInvalidArgument, "undefined cannot be stored"},
		{"function", `ctx.memory.chat.Set("k", () => 1)`, &Context{UserID: "u", ChatID: "c", Memory: store}, CodeInvalidArgument, "a function cannot be stored"},
		{"cycle", `const o: any = {}; o.o = o; ctx.memory.context.Set("k", o)`, &Context{}, CodeInvalidArgument, "not JSON-serialisable"},
		{"bigint-like key", `ctx.memory.user.Get(1)`, &Context{UserID: "u", Memory: store}, CodeInvalidArgument, "want a string key, got a number"},
		{"long key", `ctx.memory.context.Set("k".repeat(300), 1)`, &Context{}, CodeInvalidArgument, "over the limit of 256"},
		{"too large", `ctx.memory.context.Set("k", "x".repeat(1 << 20))`, &Context{}, CodeMemory, "over the limit of 1048576"},
		{"no store", `ctx.memory.user.Get("k")`, &Context{UserID: "u"}, CodeMemory, "no memory store is configured"},
		{"no user", `ctx.memory.user.Keys()`, &Context{Memory: store}, CodeMemory, "the request has no user"},
		{"no chat", `ctx.memory.chat.Has("x")`, &Context{UserID: "u", Memory: store}, CodeMemory, "the request has no chat"},
		{"store fails", `ctx.memory.user.Set("k", 1)`, &Context{UserID: "u", Memory: failingStore{}}, CodeMemory, `memory.user.Set("k"): disk full`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := run(t, catchJS(tc.stmt), tc.hc, nil).(map[string]any)
			if got["code"] != tc.code || !strings.Contains(got["message"].(string), tc.msg) {
				t.Fatalf("got %v, want %s %q", got, tc.code, tc.msg)
			}
		})
	}
}

type failingStore struct{ MemoryStore }

func (failingStore) Set(context.Context, Namespace, string, string, json.RawMessage) error {
	return errors.New("disk full")
}

func TestSandboxFiles(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	hc := &Context{Sandbox: sb}
	got := run(t, `export function test(ctx: any) {
  ctx.sandbox.WriteFile("notes/a.txt", "alpha");
  ctx.sandbox.WriteFile("/workspace/notes/b.txt", "β");
  const list = ctx.sandbox.ListDir("notes").map((f: FileInfo) => [f.name, f.size, f.is_dir, typeof f.mod_time]);
  const root = ctx.sandbox.ListDir().map((f: FileInfo) => f.name + (f.is_dir ? "/" : ""));
  return {workdir: ctx.sandbox.workdir, a: ctx.sandbox.ReadFile("notes/a.txt"), b: ctx.sandbox.ReadFile("./notes/../notes/b.txt"), list, root};
}`, hc, nil)
	want := map[string]any{"workdir": "/workspace", "a": "alpha", "b": "β",
		"list": []any{[]any{"a.txt", 5.0, false, "string"}, []any{"b.txt", 2.0, false, "string"}},
		"root": []any{"notes/"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// mod_time is RFC 3339.
	mt := run(t, `export function test(ctx: any) { return ctx.sandbox.ListDir("notes")[0].mod_time }`, hc, nil).(string)
	if _, err := time.Parse(time.RFC3339, mt); err != nil {
		t.Fatalf("mod_time %q: %v", mt, err)
	}
}

// outsideLink makes a folder outside sb's workspace with a file "secret"
// and a symlink "link" to it in the workspace, and returns the folder.
func outsideLink(t *testing.T, sb *fakeSandbox) string {
	t.Helper()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sb.dir, "link")); err != nil {
		t.Fatal(err)
	}
	return outside
}

func TestSandboxErrors(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	outside := outsideLink(t, sb)
	if err := sb.ws.MkdirAll(context.Background(), "dir"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		stmt, code, name, msg string
	}{
		{`ctx.sandbox.ReadFile("../etc/passwd")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.sandbox.ReadFile("/etc/passwd")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.sandbox.ReadFile("link/secret")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.sandbox.WriteFile("link/x", "y")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.sandbox.ListDir("link")`, CodePathOutside, "SandboxError", "outside the workspace"},
		{`ctx.sandbox.ReadFile("missing.txt")`, CodeNotFound, "NotFoundError", `"missing.txt": not found`},
		{`ctx.sandbox.ListDir("nope/")`, CodeNotFound, "NotFoundError", "not found"},
		{`ctx.sandbox.ReadFile("dir")`, CodeIO, "SandboxError", "is a folder"},
		{`ctx.sandbox.ReadFile(5)`, CodeInvalidArgument, "TypeError", "want a path string, got a number"},
		{`ctx.sandbox.WriteFile("a", {x: 1})`, CodeInvalidArgument, "TypeError", "want content as a string, got an object"},
		{`ctx.sandbox.WriteFile(".", "x")`, CodeIO, "SandboxError", "is the workspace root"},
	}
	for _, tc := range cases {
		t.Run(tc.stmt, func(t *testing.T) {
			t.Parallel()
			got := run(t, catchJS(tc.stmt), &Context{Sandbox: sb}, nil).(map[string]any)
			if got["code"] != tc.code || got["name"] != tc.name || got["instance"] != true || !strings.Contains(got["message"].(string), tc.msg) {
				t.Fatalf("got %v, want %s %s %q", got, tc.code, tc.name, tc.msg)
			}
			if strings.Contains(got["message"].(string), sb.dir) {
				t.Fatalf("message %q reveals the host path", got["message"])
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
		t.Fatal("WriteFile escaped through the symlink")
	}
}

func TestSandboxExec(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	if err := sb.ws.MkdirAll(context.Background(), "sub"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, stmt string
		want       any
	}{
		{"stdout", `return ctx.sandbox.Exec(["echo", "hi there"])`, "hi there\n"},
		{"cwd", `return ctx.sandbox.Exec(["pwd"], {cwd: "sub"}).trim().split("/").pop()`, "sub"},
		{"env", `return ctx.sandbox.Exec(["sh", "-c", "echo $GREETING"], {env: {GREETING: "hallo"}})`, "hallo\n"},
		{"stdin", `return ctx.sandbox.Exec(["cat"], {stdin: "piped"})`, "piped"},
		{"shell", `return ctx.sandbox.Exec("echo a | tr a b", {shell: true})`, "b\n"},
		{"failure", `try { ctx.sandbox.Exec(["sh", "-c", "echo out; echo oops >&2; exit 3"]) } catch (e) { return [e.name, e.code, e.exit_code, e.stdout, e.stderr, e.message, e instanceof Error] }`,
			[]any{"ExecError", CodeExecFailed, 3.0, "out\n", "oops\n", "command sh -c \"echo out; echo oops >&2; exit 3\" exited with code 3: oops", true}},
		{"timeout", `try { ctx.sandbox.Exec(["sleep", "5"], {timeout: 50}) } catch (e) { return [e.name, e.code] }`, []any{"TimeoutError", CodeExecTimeout}},
		{"empty argv", catchBody(`ctx.sandbox.Exec([])`), []any{CodeInvalidArgument, "sandbox.Exec: argv is empty: name a program"}},
		{"string argv", catchBody(`ctx.sandbox.Exec("ls")`), []any{CodeInvalidArgument, "sandbox.Exec: want argv as an array of strings (a string is a shell script only with {shell: true})"}},
		{"non-string arg", catchBody(`ctx.sandbox.Exec(["ls", 1])`), []any{CodeInvalidArgument, "sandbox.Exec: argv[1]: want a string, got a number"}},
		{"shell two args", catchBody(`ctx.sandbox.Exec(["a", "b"], {shell: true})`), []any{CodeInvalidArgument, "sandbox.Exec: with {shell: true} give one script, got 2 arguments"}},
		{"unknown option", catchBody(`ctx.sandbox.Exec(["ls"], {timeout_ms: 5})`), []any{CodeInvalidArgument, `sandbox.Exec: unknown option "timeout_ms" (want cwd, env, timeout, stdin, shell)`}},
		{"bad timeout", catchBody(`ctx.sandbox.Exec(["ls"], {timeout: -1})`), []any{CodeInvalidArgument, "sandbox.Exec: timeout: want a positive number of milliseconds, got -1"}},
		{"bad env", catchBody(`ctx.sandbox.Exec(["ls"], {env: {A: 1}})`), []any{CodeInvalidArgument, "sandbox.Exec: env.A: want a string, got a number"}},
		{"cwd outside", catchBody(`ctx.sandbox.Exec(["ls"], {cwd: "../.."})`), []any{CodePathOutside, `sandbox.Exec: cwd: "../..": path is outside the workspace`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := run(t, "export function test(ctx: any) {\n"+tc.stmt+"\n}", &Context{Sandbox: sb}, nil)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func catchBody(stmt string) string {
	return `try { ` + stmt + `; return "ok" } catch (e) { return [e.code, e.message] }`
}

func TestLog(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	hc := &Context{Logger: logs.logger().With("chat", "c1")}
	run(t, `export function test(ctx: any) {
  log.Debug("d", 1); log.Info("i", {a: [1]}); log.Warn("w"); log.Error("e", new Error("boom"));
  console.log("cl", null, undefined, true); console.info("ci"); console.warn("cw"); console.error("ce"); console.debug("cd");
  return null;
}`, hc, nil)
	out := logs.String()
	for _, w := range []string{
		`level=DEBUG msg="d 1" chat=c1 hook=test source=js`,
		`level=INFO msg="i {\"a\":[1]}"`,
		`level=WARN msg=w`,
		`level=ERROR msg="e Error: boom`,
		`level=INFO msg="cl null undefined true"`,
		`level=INFO msg=ci`, `level=WARN msg=cw`, `level=ERROR msg=ce`, `level=DEBUG msg=cd`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
}

// TestCtxIsAnOrdinaryObject checks that the lazily built ctx behaves like a
// plain object to scripts.
func TestCtxIsAnOrdinaryObject(t *testing.T) {
	t.Parallel()
	got := run(t, `export function test(ctx: any) {
  const before = Object.keys(ctx);
  ctx.extra = 1;
  ctx.user_id = "changed";
  delete ctx.Send;
  const {user_id, extra, ...rest} = ctx;
  return {
    before,
    after: Object.keys(ctx),
    user_id, extra,
    send: typeof ctx.Send, hasSend: "Send" in ctx, hasEnd: "End" in ctx,
    same: ctx.memory === ctx.memory && ctx.memory.user === ctx.memory.user && ctx.End === ctx.End,
    json: JSON.parse(JSON.stringify({u: ctx.user_id, m: ctx.memory.context})),
    rest: Object.keys(rest).length,
    str: String(ctx.memory.user.Get),
  };
}`, &Context{UserID: "u1"}, nil).(map[string]any)
	var before, after []any
	for _, k := range ctxKeys {
		before = append(before, k)
		if k != "Send" {
			after = append(after, k)
		}
	}
	after = append(after, "extra")
	if !reflect.DeepEqual(got["before"], before) {
		t.Errorf("keys = %v", got["before"])
	}
	if !reflect.DeepEqual(got["after"], after) {
		t.Errorf("keys after changes = %v", got["after"])
	}
	if got["user_id"] != "changed" || got["extra"] != 1.0 || got["send"] != "undefined" || got["hasSend"] != false || got["hasEnd"] != true || got["same"] != true || got["rest"] != float64(len(ctxKeys)-2) {
		t.Errorf("got %v", got)
	}
	if !reflect.DeepEqual(got["json"], map[string]any{"u": "changed", "m": map[string]any{}}) {
		t.Errorf("json = %v", got["json"])
	}
}

func TestSandboxFailureCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err        error
		code, name string
	}{
		{fmt.Errorf("exec: %w", sandbox.ErrRemoved), CodeSandboxRemoved, "SandboxError"},
		{fmt.Errorf("exec: %w", sandbox.ErrEngineUnavailable), CodeSandboxUnavailable, "SandboxError"},
		{sandbox.ErrExecTimeout, CodeExecTimeout, "TimeoutError"},
		{errors.New("container exec create: boom"), CodeIO, "SandboxError"},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			got := run(t, catchJS(`ctx.sandbox.Exec(["true"])`), &Context{Sandbox: newScriptedSandbox(t, sandboxtest.Config{StartErr: tc.err})}, nil).(map[string]any)
			if got["code"] != tc.code || got["name"] != tc.name || !strings.Contains(got["message"].(string), "exec true: ") {
				t.Fatalf("got %v, want %s %s", got, tc.code, tc.name)
			}
		})
	}
}

// TestJSONProtoKey checks that a stored "__proto__" key comes back as data,
// the way JSON.parse treats it, and never as a prototype.
func TestJSONProtoKey(t *testing.T) {
	t.Parallel()
	store := NewMemStore()
	if err := store.Set(context.Background(), NamespaceUser, "u", "k", json.RawMessage(`{"__proto__": {"polluted": true}, "a": [1, "x", null, false, 2.5]}`)); err != nil {
		t.Fatal(err)
	}
	got := run(t, `export function test(ctx: any) {
  const v = ctx.memory.user.Get("k");
  return {own: Object.keys(v), polluted: v.polluted === undefined && ({} as any).polluted === undefined,
    proto: Object.getPrototypeOf(v) === Object.prototype, a: v.a, meta: ctx.metadata.__proto__};
}`, &Context{UserID: "u", Memory: store, Metadata: map[string]any{"__proto__": "meta"}}, nil)
	want := map[string]any{"own": []any{"__proto__", "a"}, "polluted": true, "proto": true, "a": []any{1.0, "x", nil, false, 2.5}, "meta": "meta"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestExecTruncatedIsLogged(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	got := run(t, `export function test(ctx: any) { return ctx.sandbox.Exec(["cat", "big.log"]) }`,
		&Context{Sandbox: newScriptedSandbox(t, sandboxtest.Config{Handler: sandboxtest.Reply{Stdout: "partial output"}, MaxOutput: len("partial")}), Logger: logs.logger()}, nil)
	if got != "partial" || !strings.Contains(logs.String(), `level=WARN msg="sandbox.Exec output was truncated" hook=test command=cat`) {
		t.Fatalf("got %v; log:\n%s", got, logs.String())
	}
}

// TestMemoryScopes: Yao's team scope and Len/Clear/Incr/Decr/GetDel on
// every scope, isolated per user, team and chat.
func TestMemoryScopes(t *testing.T) {
	t.Parallel()
	h := load(t, `export function test(ctx: any, args: any) {
  const out: any = {};
  for (const ns of ["user", "team", "chat", "context"]) {
    const m = ctx.memory[ns];
    if (args.clear) m.Clear();
    const r: any[] = [m.Incr("n"), m.Incr("n", 5), m.Decr("n"), m.Decr("n", 2)];
    m.Set("once", {v: ns});
    r.push(m.Len(), m.GetDel("once"), m.GetDel("once"), m.Len());
    try { m.Set("s", "x"); m.Incr("s") } catch (e) { r.push(e.code) }
    try { m.Incr("n", 1.5) } catch (e) { r.push(e.code) }
    out[ns] = r;
  }
  return out;
}`)
	store := NewMemStore()
	ann := &Context{UserID: "ann", TeamID: "red", ChatID: "c1", Memory: store}
	got, err := h.Call(context.Background(), ann, "test", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	row := []any{1.0, 6.0, 5.0, 3.0, 2.0, map[string]any{"v": "NS"}, nil, 1.0, CodeMemory, CodeInvalidArgument}
	for _, ns := range []string{"user", "team", "chat", "context"} {
		want := append([]any(nil), row...)
		want[5] = map[string]any{"v": ns}
		if g := got.(map[string]any)[ns]; !reflect.DeepEqual(g, want) {
			t.Errorf("%s: got %v, want %v", ns, g, want)
		}
	}
	// Bob of the same team shares team memory, not user or chat memory.
	bob := &Context{UserID: "bob", TeamID: "red", ChatID: "c1", Memory: store}
	h2 := load(t, `export function test(ctx: any) { return [ctx.memory.user.Len(), ctx.memory.team.Incr("n"), ctx.memory.chat.Len()]; }`)
	got, err = h2.Call(context.Background(), bob, "test", nil)
	if want := []any{0.0, 4.0, 0.0}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("bob: %v, %v; want %v", got, err, want)
	}
	// Clear empties only its scope's owner.
	if _, err := h.Call(context.Background(), &Context{UserID: "ann", TeamID: "blue", ChatID: "c1", Memory: store}, "test", map[string]any{"clear": true}); err != nil {
		t.Fatal(err)
	}
	if n, _ := store.Len(context.Background(), NamespaceTeam, "red"); n != 2 {
		t.Fatalf("team red has %d keys after blue's Clear, want 2", n)
	}
	// Without a team, team memory says so.
	got = run(t, catchJS(`ctx.memory.team.Get("x")`), &Context{UserID: "ann", Memory: store}, nil)
	if m := got.(map[string]any); m["code"] != CodeMemory || !strings.Contains(m["message"].(string), "the request has no team") {
		t.Fatalf("no team: %v", got)
	}
}
