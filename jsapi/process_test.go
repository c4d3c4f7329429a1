package jsapi

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
)

// writeApp lays out an app folder with files and returns the App that
// jsapi needs of it: the root and the assistants (by id, with their folder
// and hook file) that the files hold a src/ of.
func writeApp(t testing.TB, files map[string]string) *assistant.App {
	t.Helper()
	root := t.TempDir()
	app := &assistant.App{Root: root, Assistants: map[string]*assistant.Assistant{}}
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		rest, ok := strings.CutPrefix(p, "assistants/")
		if !ok {
			continue
		}
		folder, file, ok := strings.Cut(rest, "/src/")
		if !ok {
			continue
		}
		id := strings.ReplaceAll(folder, "/", ".")
		a := app.Assistants[id]
		if a == nil {
			a = &assistant.Assistant{ID: id, Dir: filepath.Join(root, "assistants", filepath.FromSlash(folder))}
			app.Assistants[id] = a
		}
		if file == "index.ts" || file == "index.js" {
			a.Hooks = "src/" + file
		}
	}
	return app
}

// yaoLikeApp is an app in Yao's layout: scripts (one in a folder with a
// dot in its name), services, an assistant with hooks and scripts of its
// own, and a tsconfig.json whose paths alias the scripts.
func yaoLikeApp(t testing.TB) *assistant.App {
	return writeApp(t, map[string]string{
		"tsconfig.json": `{"compilerOptions": {"paths": {"@yao/*": ["./.vscode/types/*"], "@scripts/*": ["./scripts/*"], "@lib/*": ["scripts/lib/*"]}}}`,
		"scripts/tests/mcp.ts": `import { log } from "@yao/runtime";
function Echo(args: any, ctx?: any): any {
  if (!args?.message) { throw new Error("message is required"); }
  log.Trace("echo", args.message);
  return { echo: args.message, chat_id: ctx?.chat_id ?? null, user: ctx ? Authorized()?.user_id : null };
}
function Sum(a: number, b: number) { return a + b }
function Nothing() {}
function Slow() { time.Sleep(60000); return "late" }
function Deep(n: number): number { return Process("scripts.tests.mcp.Deep", n + 1) }
`,
		"scripts/lib/utils.ts": `export function UniqueID(prefix: string) { return prefix + "-" + 7 }
export function Double(n: number) { return n * 2 }
`,
		"scripts/data.tools/agg.ts": `export function Count(xs: any[]) { return xs.length }
`,
		"services/hello.js": `function World(who) { return "hello " + who }
`,
		"assistants/tests/mcpload/src/index.ts": `import { UniqueID } from "@scripts/lib/utils";
import { Double } from "@lib/utils";
function Create(ctx: any, messages: any[]) {
  const hello = Process("agents.tests.mcpload.tools.Hello", { name: "yao" });
  const sum = Process("scripts.tests.mcp.Sum", 2, 3);
  const svc = Process("services.hello.World", "you");
  const n = Process("scripts.data_tools.agg.Count", [1, 2, 3]);
  return { metadata: { hello, sum, svc, n, id: UniqueID("m"), d: Double(sum), none: Process("scripts.tests.mcp.Nothing") } };
}
function Next(ctx: any, payload: any) {
  return { data: Process(payload.completion.content) };
}
`,
		"assistants/tests/mcpload/src/tools.ts": `export function Hello(args: { name: string }) { return "Hello, " + args.name }
`,
		"assistants/tests/mcpload/src/tools_test.ts": `export function Hello() { return "test" }
`,
	})
}

// TestProcessFromHooks: Process runs the app's scripts (scripts/,
// services/, an assistant's src/) by Yao's names, arguments passed as they
// are and results returned, and tsconfig paths resolve imports.
func TestProcessFromHooks(t *testing.T) {
	t.Parallel()
	app := yaoLikeApp(t)
	s := NewScripts(app)
	h, err := s.Hooks(app.Assistants["tests.mcpload"])
	if err != nil {
		t.Fatal(err)
	}
	if w := h.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	res, err := h.Create(context.Background(), &Context{ChatID: "c1"}, []chat.Message{{Role: "user", Content: "hi"}}, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"hello": "Hello, yao", "sum": 5.0, "svc": "hello you", "n": 3.0, "id": "m-7", "d": 10.0, "none": nil}
	if !reflect.DeepEqual(res.Options.Metadata, want) {
		t.Errorf("metadata = %v, want %v", res.Options.Metadata, want)
	}
	// The hooks' file and the tests are not processes.
	for _, name := range []string{"agents.tests.mcpload.index.Create", "agents.tests.mcpload.tools_test.Hello"} {
		if err := s.Check(name); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := s.Check("scripts.tests.mcp.Echo"); err != nil {
		t.Errorf("Check: %v", err)
	}
	if !slices.Contains(s.Files(), "scripts/data.tools/agg.ts") {
		t.Errorf("files: %v", s.Files())
	}
}

// TestProcessErrors: what cannot run says why, with the code hooks can
// branch on and the hook's position; a process's own throw keeps its
// message and where it was thrown.
func TestProcessErrors(t *testing.T) {
	t.Parallel()
	app := yaoLikeApp(t)
	s := NewScripts(app)
	h, err := s.Hooks(app.Assistants["tests.mcpload"])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, code, msg string
	}{
		{"models.user.Find", CodeYaoOnly, "models.user.Find is a Yao process (models.*)"},
		{"utils.str.UUID", CodeYaoOnly, "is a Yao process"},
		{"scripts.tests.nope.Echo", CodeNotFound, "no file scripts/tests/nope.ts (or .js) in the app"},
		{"scripts.tests.mcp.Nope", CodeNotFound, "scripts/tests/mcp.ts defines no function Nope (have: Deep, Echo, Nothing, Slow, Sum)"},
		{"assistants.tests.mcpload.tools.Hello", CodeNotFound, "agents.<assistant id>"},
		{"scripts.mcp", CodeNotFound, "want scripts.<name>.<Function>"},
		{"scripts.tests.mcp.Echo", CodeHookError, "message is required (at scripts/tests/mcp.ts:3:"},
		{"scripts.tests.mcp.Deep", CodeHookError, "processes call each other 32 deep"},
	} {
		_, err := h.Next(context.Background(), &Context{}, NextPayload{Completion: Completion{Content: tc.name}}, chat.Options{})
		var je *Error
		if !errors.As(err, &je) || je.Code != tc.code || !strings.Contains(je.Message, tc.msg) || je.File != "src/index.ts" || je.Line != 11 {
			t.Errorf("%s: %v (%+v), want code %s and %q at src/index.ts:11", tc.name, err, je, tc.code, tc.msg)
		}
	}
}

// TestProcessRun: an MCP tool's process gets the arguments and the
// request's ctx; the caller's deadline stops it.
func TestProcessRun(t *testing.T) {
	t.Parallel()
	s := NewScripts(yaoLikeApp(t))
	out, err := s.Run(context.Background(), &Context{ChatID: "c9", UserID: "u1"}, "scripts.tests.mcp.Echo", []any{map[string]any{"message": "hi"}})
	if err != nil || !reflect.DeepEqual(out, map[string]any{"echo": "hi", "chat_id": "c9", "user": "u1"}) {
		t.Fatalf("Echo = %v, %v", out, err)
	}
	_, err = s.Run(context.Background(), &Context{}, "scripts.tests.mcp.Echo", []any{map[string]any{}})
	var je *Error
	if !errors.As(err, &je) || je.Message != "message is required" || je.File != "scripts/tests/mcp.ts" || je.Line != 3 {
		t.Fatalf("throw: %v (%+v)", err, je)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = s.Run(ctx, &Context{}, "scripts.tests.mcp.Slow", nil)
	if !errors.As(err, &je) || je.Code != CodeHookTimeout {
		t.Fatalf("Slow: %v", err)
	}
	var pe *ProcessError
	if _, err := s.Run(context.Background(), nil, "flows.x.Y", nil); !errors.As(err, &pe) || pe.Code != CodeYaoOnly {
		t.Fatalf("flows: %v", err)
	}
}

// TestProcessCheckWarnings: check reports literal Process calls that
// cannot run, and scripts that do not compile.
func TestProcessCheckWarnings(t *testing.T) {
	t.Parallel()
	app := writeApp(t, map[string]string{
		"scripts/bad.ts": "function F( { return 1 }\n",
		"scripts/ok.ts":  "function F() { return FS.ReadFile('x') }\n",
		"assistants/a/src/index.ts": `function Create() {
  Process("scripts.ok.F");
  Process("scripts.missing.F");
  Process("tables.pet.Get", 1);
  return null;
}
`,
	})
	s := NewScripts(app)
	h, err := s.Hooks(app.Assistants["a"])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range h.Warnings() {
		got = append(got, w.String())
	}
	want := []string{
		`src/index.ts:3:3: warning: Process("scripts.missing.F"): process scripts.missing.F not found: no file scripts/missing.ts (or .js) in the app; the call throws NOT_FOUND`,
		`src/index.ts:4:3: warning: Process("tables.pet.Get"): tables.pet.Get is a Yao process (tables.*): agentbox runs the app's own scripts only (scripts.*, services.*, agents.*); the call throws YAO_ONLY`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	all := s.Reachable(h.Processes())
	if len(all) != 1 || all[0].File != "scripts/ok.ts" || !strings.Contains(all[0].Msg, "FS is Yao-only") {
		t.Errorf("Reachable from the hooks: %v", all)
	}
	all = s.Reachable([]string{"scripts.bad.F"})
	if len(all) != 1 || all[0].File != "scripts/bad.ts" || all[0].Warning() {
		t.Errorf("Reachable of a broken script: %v", all)
	}
}

// TestYaoGlobals: the small globals of Yao's runtime work as Yao's do.
func TestYaoGlobals(t *testing.T) {
	t.Parallel()
	app := yaoLikeApp(t)
	app.Assistants["g"] = writeAssistant(t, map[string]string{"src/index.ts": `
export function T(ctx: any, args: any) {
  const start = Date.now();
  time.Sleep(20);
  const slept = Date.now() - start >= 15;
  log.Trace("trace"); log.Fatal("fatal");
  let panicked = "";
  try { log.Panic("boom", 1) } catch (e: any) { panicked = e.message }
  let after = "";
  try { time.After(10, "scripts.tests.mcp.Sum", 1, 2) } catch (e: any) { after = e.code }
  const all = All([{process: "scripts.tests.mcp.Sum", args: [1, 2]}, {process: "scripts.tests.mcp.Echo", args: [{}]}]);
  const any = Any([{process: "scripts.tests.mcp.Slow", timeout: 5}, {process: "scripts.tests.mcp.Sum", args: [2, 2]}]);
  const race = Race([{process: "scripts.tests.mcp.Slow"}, {process: "scripts.tests.mcp.Nothing"}]);
  return {
    slept, panicked, after,
    lang: [$L("::Hello"), $L(3)],
    who: Authorized(),
    evald: [Eval("function add(a, b) { return a + b }", 2, 3), Eval("(s) => s.toUpperCase()", "x")],
    used: Use(class { v = 1; __release() { (globalThis as any).released = true } }, (o: any) => o.v + 1),
    released: (globalThis as any).released === true,
    all: all.map((r: any) => [r.index, r.data, r.error ? r.error.split(" (at")[0] : null]),
    any: any.map((r: any) => r.data),
    race: race.map((r: any) => [r.data, r.error ?? null]),
  };
}`})
	s := NewScripts(app)
	h, err := s.Hooks(app.Assistants["g"])
	if err != nil {
		t.Fatal(err)
	}
	if w := h.Warnings(); len(w) != 1 || !strings.Contains(w[0].Msg, "time.After is Yao-only") {
		t.Errorf("warnings: %v", w)
	}
	var logs logBuffer
	h.timeout = time.Minute
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: LevelTrace}))
	out, err := h.Call(context.Background(), &Context{UserID: "u1", Logger: logger}, "T", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"slept": true, "panicked": "boom 1", "after": CodeYaoOnly,
		"lang": []any{"Hello", 3.0}, "who": map[string]any{"user_id": "u1"},
		"evald": []any{5.0, "X"}, "used": 2.0, "released": true,
		"all":  []any{[]any{0.0, 3.0, nil}, []any{1.0, nil, "scripts.tests.mcp.Echo: message is required"}},
		"any":  []any{nil, 4.0},
		"race": []any{[]any{nil, nil}, []any{nil, nil}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got  %v\nwant %v", out, want)
	}
	if l := logs.String(); !strings.Contains(l, "level=DEBUG-4 msg=trace") || !strings.Contains(l, "level=ERROR msg=fatal") || !strings.Contains(l, `msg="boom 1"`) {
		t.Errorf("log:\n%s", l)
	}
}

// TestTSConfigOnlyAppRoot: only the app root's tsconfig.json applies, as
// in Yao: one in an assistant's folder is not read.
func TestTSConfigOnlyAppRoot(t *testing.T) {
	t.Parallel()
	app := writeApp(t, map[string]string{
		"assistants/a/tsconfig.json": `{"compilerOptions": {"paths": {"@own/*": ["./lib/*"]}}}`,
		"assistants/a/lib/x.ts":      "export const x = 1\n",
		"assistants/a/src/index.ts":  "import { x } from \"@own/x\";\nexport function Create() { return { temperature: x } }\n",
	})
	_, err := NewScripts(app).Hooks(app.Assistants["a"])
	if err == nil || !strings.Contains(err.Error(), `Could not resolve "@own/x"`) {
		t.Fatalf("err = %v", err)
	}
}
