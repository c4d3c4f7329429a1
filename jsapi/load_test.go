package jsapi

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

func TestLoadNoHooks(t *testing.T) {
	t.Parallel()
	h, err := Load(&assistant.Assistant{ID: "plain", Dir: t.TempDir()})
	if h != nil || err != nil {
		t.Fatalf("Load = %v, %v; want nil, nil", h, err)
	}
	if err := Compile(&assistant.Assistant{ID: "plain"}); err != nil {
		t.Fatal(err)
	}
	// A nil *Hooks is a no-op for the pipeline.
	if res, err := h.Create(context.Background(), nil, nil, chat.Options{}); res != nil || err != nil {
		t.Fatalf("nil Hooks Create = %v, %v", res, err)
	}
	if h.Has("Create") || h.Exports() != nil {
		t.Fatal("nil Hooks has functions")
	}
}

func TestLoadStyles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"top-level functions", map[string]string{"src/index.ts": `
function Create(ctx: any, messages: any[], options: any) { return null; }
function Next(ctx, payload, options) { return null; }
function helper() {}
const notAFunction = 42;
let Other = (ctx: any) => 1;
class Klass {}
// function InComment() {}
`}, []string{"Create", "Next", "Other", "helper"}},
		{"exported functions", map[string]string{"src/index.ts": `
export function Create(ctx, messages, options) { return null; }
export const Next = (ctx, payload) => null;
export const version = "1";
export function search_docs(ctx, args) { return []; }
`}, []string{"Create", "Next", "search_docs"}},
		{"javascript", map[string]string{"src/index.js": `function Create(ctx, m, o) { return { messages: m }; }`}, []string{"Create"}},
		{"imports under src", map[string]string{
			"src/index.ts":     `import { greet } from "./lib/greet"; import data from "./data.json"; export function Create(ctx) { ctx.Send(greet(ctx.user_id) + data.n); return null; }`,
			"src/lib/greet.ts": `export function greet(who: string): string { return "hi " + who; } export function Create() { throw new Error("shadowed") }`,
			"src/data.json":    `{"n": 1}`,
		}, []string{"Create"}},
		{"commonjs", map[string]string{"src/index.js": `module.exports = { Create(ctx) { return null }, Next: function () { return null } };`}, []string{"Create", "Next"}},
		{"async and generator", map[string]string{"src/index.ts": `async function Create() { return null } function* gen() {}`}, []string{"Create", "gen"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := Load(writeAssistant(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Exports(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Exports = %v, want %v", got, tc.want)
			}
			for _, fn := range tc.want {
				if !h.Has(fn) {
					t.Errorf("Has(%q) = false", fn)
				}
			}
			if h.Has("nope") {
				t.Error(`Has("nope") = true`)
			}
		})
	}
}

func TestLoadImportedModuleRuns(t *testing.T) {
	t.Parallel()
	h, err := Load(writeAssistant(t, map[string]string{
		"src/index.ts":     `import { greet } from "./lib/greet"; import data from "./data.json"; function Create(ctx) { ctx.Send(greet(ctx.user_id) + data.n); return null; }`,
		"src/lib/greet.ts": `export function greet(who: string): string { return "hi " + who; }`,
		"src/data.json":    `{"n": 1}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	var rec chattest.Recorder
	if _, err := h.Create(context.Background(), &Context{UserID: "ann", Emit: rec.Emit}, nil, chat.Options{}); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Events(); len(ev) != 2 || ev[0].Text != "hi ann1" {
		t.Fatalf("events = %+v", ev)
	}
}

// An npm package from node_modules is bundled, its licence comment
// included; a missing one is an error that says to install it.
func TestLoadNodeModules(t *testing.T) {
	t.Parallel()
	dir := writeAssistant(t, map[string]string{
		"src/index.ts":                     `import { shout } from "shouty"; function Create(ctx) { ctx.Send(shout("hi")); return null; }`,
		"node_modules/shouty/package.json": `{"name": "shouty", "main": "index.js"}`,
		"node_modules/shouty/index.js":     "/*! shouty v1 | MIT license */\nexport function shout(s) { return s.toUpperCase(); }\n",
	})
	h, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rec chattest.Recorder
	if _, err := h.Create(context.Background(), &Context{UserID: "ann", Emit: rec.Emit}, nil, chat.Options{}); err != nil {
		t.Fatal(err)
	}
	if ev := rec.Events(); len(ev) != 2 || ev[0].Text != "HI" {
		t.Fatalf("events = %+v", ev)
	}
	_, err = Load(writeAssistant(t, map[string]string{"src/index.ts": `import { parse } from "node-html-parser"; function Create(ctx) { return parse; }`}))
	if err == nil || !strings.Contains(err.Error(), `is "node-html-parser" installed (npm install in the app folder)?`) || strings.Contains(err.Error(), "external") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		files   map[string]string
		hooks   string
		timeout time.Duration
		want    []string
	}{
		{"syntax", map[string]string{"src/index.ts": "function Create(ctx) {\n  return {messages: [}\n}\n"}, "", 0,
			[]string{"src/index.ts:2:"}},
		{"type syntax", map[string]string{"src/index.ts": "function Create(ctx: ) {}\n"}, "", 0,
			[]string{"src/index.ts:1:22:"}},
		{"imported file", map[string]string{
			"src/index.ts": `import { x } from "./util";` + "\nfunction Create() { return x }\n",
			"src/util.ts":  "export const x = ;\n",
		}, "", 0, []string{"src/util.ts:1:18:"}},
		{"missing import", map[string]string{"src/index.ts": `import { x } from "./nope"; export const y = x;`}, "", 0,
			[]string{"src/index.ts:1:19:", `Could not resolve "./nope"`}},
		{"node builtin", map[string]string{"src/index.ts": `import * as fs from "fs";` + "\nexport function Create() { fs.readFileSync('x') }"}, "", 0,
			[]string{"src/index.ts:1:21:", `Could not resolve "fs"`}},
		{"missing entry", map[string]string{"README": "x"}, "src/index.ts", 0,
			[]string{"src/index.ts does not exist"}},
		{"wrong extension", map[string]string{"src/index.py": "x"}, "src/index.py", 0,
			[]string{"src/index.py: want a .ts or .js file"}},
		{"throws at load", map[string]string{"src/index.ts": "const cfg = JSON.parse('{');\nfunction Create() {}\n"}, "", 0,
			[]string{"src/index.ts:1:", "loading the module: SyntaxError"}},
		{"hangs at load", map[string]string{"src/index.ts": "while (true) {}\nfunction Create() {}\n"}, "", 50 * time.Millisecond,
			[]string{"src/index.ts: loading the module: TimeoutError: load ran past its timeout of 50ms"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := writeAssistant(t, tc.files)
			if tc.hooks != "" {
				a.Hooks = tc.hooks
			}
			a.HookTimeout = tc.timeout
			h, err := Load(a)
			if err == nil {
				t.Fatalf("Load succeeded (%v)", h.Exports())
			}
			if cerr := Compile(a); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("Compile = %v, want the Load error", cerr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var se *SourceError
			if positioned.MatchString(tc.want[0]) && (!errors.As(err, &se) || se.Problems[0].Line == 0) {
				t.Errorf("error %#v is not a positioned *SourceError", err)
			}
			if strings.Contains(err.Error(), a.Dir) {
				t.Errorf("error %q names the host path", err)
			}
		})
	}
}

var positioned = regexp.MustCompile(`\.ts:\d`)

// TestRuntimeErrorPosition checks that stack positions map to the TS source.
func TestRuntimeErrorPosition(t *testing.T) {
	t.Parallel()
	h, err := Load(writeAssistant(t, map[string]string{
		"src/index.ts":     "import { check } from \"./lib/check\";\ninterface Opts { n: number }\nexport function Create(ctx: any, m: any[], o: Opts) {\n  check(o.n);\n  return null;\n}\n",
		"src/lib/check.ts": "type N = number;\n\nexport function check(n: N): void {\n  if (n > 1) {\n    throw new RangeError(`too big: ${n}`);\n  }\n}\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Create(context.Background(), nil, nil, chat.Options{ModelOptions: chat.ModelOptions{N: ptr(2)}})
	var je *Error
	if !asError(err, &je) {
		t.Fatalf("err = %v", err)
	}
	if je.Name != "RangeError" || je.Message != "too big: 2" || je.File != "src/lib/check.ts" || je.Line != 5 || je.Column != 11 {
		t.Fatalf("error = %+v", je)
	}
	if !strings.HasPrefix(je.Stack, "RangeError: too big: 2\n    at check (src/lib/check.ts:5:11)\n    at Create (src/index.ts:4:") {
		t.Errorf("stack lacks the caller:\n%s", je.Stack)
	}
	if got := je.Error(); got != "Create hook: RangeError: too big: 2 (at src/lib/check.ts:5:11)" {
		t.Errorf("Error() = %q", got)
	}
}

// FuzzTopLevelCollector checks that the statement appended to the entry
// file never breaks source that compiles on its own.
func FuzzTopLevelCollector(f *testing.F) {
	for _, s := range []string{
		"function Create(ctx) { return null }",
		"const Next = () => null; let x = 1; var y",
		"// function interface() {}\nfunction yield_() {}",
		"`\nfunction Create(){}\n`",
		"class A { static function() {} }",
		"export function Create(ctx: Context): null { return null }",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		opts := api.TransformOptions{Loader: api.LoaderTS, Format: api.FormatESModule, LogLevel: api.LogLevelSilent}
		if r := api.Transform(src, opts); len(r.Errors) > 0 {
			t.Skip("fuzz input is not valid TypeScript (not a CI test)")
		}
		if r := api.Transform(src+topLevelCollector(src), opts); len(r.Errors) > 0 {
			t.Fatalf("collector broke the source: %v\nsource: %q", r.Errors[0].Text, src)
		}
	})
}

func TestExportForms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		want      []string
		call      string
	}{
		{"alias", "function create() { return {options: {user: \"alias\"}} }\nexport { create as Create };", []string{"Create", "create"}, "alias"},
		{"default is not a hook", "export default function () { return 1 }\nexport function Create() { return {options: {user: \"named\"}} }", []string{"Create"}, "named"},
		{"re-export", "export { Create } from \"./impl\";", []string{"Create"}, "impl"},
		{"star re-export", "export * from \"./impl\";", []string{"Create"}, "impl"},
		{"no exports", "const x = 1;", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := Load(writeAssistant(t, map[string]string{
				"src/index.ts": tc.src,
				"src/impl.ts":  `export function Create() { return {options: {user: "impl"}} }`,
			}))
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Exports(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Exports = %v, want %v", got, tc.want)
			}
			res, err := h.Create(context.Background(), nil, nil, chat.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.call == "" {
				if res != nil {
					t.Fatalf("Create = %+v", res)
				}
				return
			}
			if res == nil || res.Options == nil || res.Options.User != tc.call {
				t.Fatalf("Create = %+v, want via %s", res, tc.call)
			}
		})
	}
}

func TestRewriteExports(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want, err string }{
		{"var a = 1;\n", "var a = 1;\n", ""},
		{"function a() {}\nexport {\n  a,\n  a as b,\n  a as \"c d\"\n};\n", "function a() {}\nglobalThis[\"__agentbox_exports__\"] = {\"a\": a, \"b\": a, \"c d\": a, };\n", ""},
		{"var r = 1;\nexport default r;\n//# sourceMappingURL=data:x\n", "var r = 1;\nglobalThis[\"__agentbox_exports__\"] = r;\n//# sourceMappingURL=data:x\n", ""},
		{"export {};\n", "globalThis[\"__agentbox_exports__\"] = {};\n", ""},
		{"export { a-b };\n", "", "unsupported export"},
		{"export * from \"x\";\n", "", "unsupported export statement"},
	}
	for _, tc := range cases {
		got, err := rewriteExports(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("rewriteExports(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("rewriteExports(%q) =\n%q, %v\nwant\n%q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzRewriteExports checks that the export rewrite never panics and, when
// it accepts input, leaves everything before the export statement alone.
func FuzzRewriteExports(f *testing.F) {
	for _, s := range []string{"export {\n  a,\n  b as c\n};\n", "export default x;\n//# sourceMappingURL=y", "a\nexport ", "export {"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		out, err := rewriteExports(code)
		if err != nil {
			return
		}
		i := strings.LastIndex(code, "\nexport ")
		if i < 0 {
			return
		}
		if !strings.HasPrefix(out, code[:i+1]) {
			t.Fatalf("rewrite changed code before the export statement:\n%q\n->\n%q", code, out)
		}
	})
}

// TestShadowGlobals checks that hook code may declare names the engine
// also defines as globals (log, console).
func TestShadowGlobals(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"const log = {Info() { return 1 }}; export function Create() { return {options: {n: log.Info()}} }",
		"import { log } from './util'; export function Create() { return {options: {n: log()}} }",
		"function console() { return 1 }; export function Create() { return {options: {n: console()}} }",
	} {
		h, err := Load(writeAssistant(t, map[string]string{"src/index.ts": src, "src/util.ts": "export function log() { return 1 }"}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Create(context.Background(), nil, nil, chat.Options{})
		if err != nil || res == nil || res.Options == nil || res.Options.N == nil || *res.Options.N != 1 {
			t.Fatalf("%s: Create = %+v, %v", src, res, err)
		}
	}
}

// TestTopLevelNameCollision checks that the entry's plain Create is found
// when an imported module declares a Create of its own (the bundle renames
// one of them).
func TestTopLevelNameCollision(t *testing.T) {
	t.Parallel()
	h, err := Load(writeAssistant(t, map[string]string{
		"src/index.ts": "import { helper } from \"./util\";\nfunction Create() { return {options: {user: \"entry\", model: helper()}} }\n",
		"src/util.ts":  "function Create() { return {options: {user: \"util\"}} }\nexport function helper() { return Create().options.user }\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Create(context.Background(), nil, nil, chat.Options{})
	if err != nil || res == nil || res.Options == nil || res.Options.User != "entry" || res.Options.Model != "util" {
		t.Fatalf("Create = %+v, %v", res, err)
	}
	if got := h.Exports(); !reflect.DeepEqual(got, []string{"Create"}) {
		t.Fatalf("Exports = %v", got)
	}
}
