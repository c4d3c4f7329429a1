package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/jsapi"
)

// update rewrites golden files: go test ./cmd/agentbox -run TestCheck -update
var update = flag.Bool("update", false, "rewrite golden files in testdata")

// appsDir holds the example and broken apps, at the module root.
const appsDir = "../../testdata/apps"

// TestCheckGolden runs check over every app in testdata/apps and the
// example app and compares stdout and the exit status with
// testdata/check/NAME.golden.
func TestCheckGolden(t *testing.T) {
	// Not parallel: it swaps findTSC (the golden files hold what check
	// says without a TypeScript compiler; TestCheckTypeScript runs one).
	defer func(f func(string) string) { findTSC = f }(findTSC)
	findTSC = func(string) string { return "" }
	entries, err := os.ReadDir(appsDir)
	if err != nil {
		t.Fatal(err)
	}
	apps := map[string]string{"example": "../../examples/app"}
	for _, e := range entries {
		if e.IsDir() {
			apps[e.Name()] = filepath.Join(appsDir, e.Name())
		}
	}
	if len(apps) < 10 {
		t.Fatalf("only %d apps found", len(apps))
	}
	for name, dir := range apps {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck(context.Background(), []string{"--app", dir}, &stdout, &stderr)
			got := stdout.String() + stderr.String() + "exit " + string(rune('0'+code)) + "\n"
			golden := filepath.Join("testdata", "check", name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("check %s:\n--- got\n%s--- want\n%s", dir, got, want)
			}
			if strings.HasPrefix(name, "bad-") || name == "empty" {
				if code != 1 {
					t.Errorf("exit %d for a broken app", code)
				}
				assertPositioned(t, stdout.String())
			} else if code != 0 {
				t.Errorf("exit %d for a valid app", code)
			}
		})
	}
}

// assertPositioned checks that every problem line names a file that exists
// and, unless it is about a whole file or folder, a line and column.
func assertPositioned(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines[:len(lines)-1] { // the last line is the summary
		if strings.HasPrefix(l, "    ") {
			continue // context of the problem above: the source line, a note
		}
		file, rest, ok := strings.Cut(l, ":")
		if !ok || file == "" || rest == "" {
			t.Errorf("problem without a file: %q", l)
		}
	}
}

// TestCheckNeverPrintsKeys: a literal key in a broken connector must not
// appear in check's output, whatever else is wrong with the file.
func TestCheckNeverPrintsKeys(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := runCheck(context.Background(), []string{filepath.Join(appsDir, "bad-connectors")}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	out := stdout.String() + stderr.String()
	if strings.Contains(out, "DO-NOT-PRINT") || strings.Contains(out, "sk-live") {
		t.Fatalf("check printed a key:\n%s", out)
	}
	if !strings.Contains(out, "leaky.conn.yao") {
		t.Fatalf("the leaky connector's problems are missing:\n%s", out)
	}
}

func TestCheckArgs(t *testing.T) {
	t.Parallel()
	example := "../../examples/app"
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{example}, 0, "\n5 of 5 assistants loaded, 7 connectors, 0 warnings, 0 errors\n"},
		{[]string{"--app", example}, 0, "\n5 of 5 assistants loaded, 7 connectors, 0 warnings, 0 errors\n"},
		{[]string{"--app", example, example}, 2, "not both"},
		{[]string{"a", "b"}, 2, "usage"},
		{[]string{"--nope"}, 2, "unknown flag --nope"},
		{[]string{"testdata/does-not-exist"}, 1, "agentbox check: app folder"},
		{[]string{"check_test.go"}, 1, "not a folder"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := runCheck(context.Background(), tt.args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("check %v: exit %d, output %q; want exit %d and %q", tt.args, code, out, tt.code, tt.want)
		}
	}
}

// TestCheckCompileHooks: hook compile errors become problems, positioned
// when the hook engine returns a *assistant.LoadError.
func TestCheckCompileHooks(t *testing.T) {
	// Not parallel: it swaps compileHooks.
	old := compileHooks
	t.Cleanup(func() { compileHooks = old })
	var mu sync.Mutex
	var called []string
	compileHooks = func(_ *jsapi.Scripts, a *assistant.Assistant) error {
		mu.Lock()
		called = append(called, a.ID)
		mu.Unlock()
		if a.ID != "coder" {
			return nil
		}
		return &assistant.LoadError{Problems: []assistant.Problem{{File: "assistants/coder/src/index.ts", Line: 3, Col: 7, Msg: "Expected \";\""}}}
	}
	var stdout, stderr bytes.Buffer
	code := runCheck(context.Background(), []string{"../../examples/app"}, &stdout, &stderr)
	want := "assistants/coder/src/index.ts:3:7: Expected \";\"\n"
	if code != 1 || !strings.HasPrefix(stdout.String(), want) || !strings.HasSuffix(stdout.String(), "\n4 of 5 assistants loaded, 7 connectors, 0 warnings, 1 error\n") {
		t.Fatalf("exit %d, output:\n%s\nwant\n%s", code, stdout.String(), want)
	}
	if slices.Sort(called); strings.Join(called, ",") != "coder,codex,gemini,opencode" {
		t.Fatalf("compiled hooks of %v; want coder, codex, gemini and opencode (qa has none)", called)
	}
	compileHooks = func(_ *jsapi.Scripts, a *assistant.Assistant) error {
		if a.ID != "coder" {
			return nil
		}
		return errors.New("ReferenceError: x is not defined")
	}
	stdout.Reset()
	code = runCheck(context.Background(), []string{"../../examples/app"}, &stdout, &stderr)
	if code != 1 || !strings.HasPrefix(stdout.String(), "assistants/coder/src/index.ts: ReferenceError: x is not defined\n") {
		t.Fatalf("exit %d, output:\n%s", code, stdout.String())
	}
}

// TestCheckTypeScript: with the real TypeScript compiler, check reports a
// hook's type errors against agentbox.d.ts at the hook's file:line:col as
// warnings (errors with --strict), and none for a well-typed hook;
// without a compiler it says once that it did not type-check, and how to.
func TestCheckTypeScript(t *testing.T) {
	// Not parallel: TestCheckGolden swaps findTSC.
	tsc := os.Getenv("AGENTBOX_TSC")
	if tsc == "" {
		var err error
		if tsc, err = exec.LookPath("tsc"); err != nil {
			testenv.Missing(t, "a TypeScript compiler (make cli installs one; or set AGENTBOX_TSC)")
		}
	}
	dir := t.TempDir()
	files := map[string]string{
		"connectors/claude.conn.yao":       `{"type": "anthropic", "options": {"key": "sk-test", "model": "claude-sonnet-4-5"}}`,
		"assistants/good/package.yao":      `{"connector": "claude", "prompts": [{"role": "system", "content": "Be brief."}]}`,
		"assistants/bad/package.yao":       `{"connector": "claude", "prompts": [{"role": "system", "content": "Be brief."}]}`,
		"assistants/good/src/lib/notes.ts": "export function title(n: number): string {\n  return `Visit ${n}`;\n}\n",
		"assistants/good/src/index.ts": `import { Process } from "@yao/runtime";
import { title } from "./lib/notes";

function Create(ctx: Context, messages: Message[], options: CreateOptions): CreateResult | null {
  const n = (ctx.memory.chat.Get<number>("n") ?? 0) + 1;
  ctx.memory.chat.Set("n", n);
  if (ctx.sandbox) ctx.sandbox.WriteFile("notes.md", title(n));
  return { messages: [...messages, { role: "system", content: title(n) }] };
}
`,
		"assistants/bad/src/index.ts": `function Create(ctx: Context, messages: Message[]): CreateResult | null {
  ctx.sandbox?.writeFile("notes.md", "x");
  const n: number = ctx.memory.chat.Get<string>("n");
  return { messages: n };
}
`,
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer func(f func(string) string) { findTSC = f }(findTSC)
	run := func(args ...string) (string, int) {
		var stdout, stderr bytes.Buffer
		code := runCheck(context.Background(), append(args, dir), &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	findTSC = func(string) string { return tsc }
	out, code := run()
	var typeLines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "(TS") {
			typeLines = append(typeLines, l)
		}
	}
	want := []string{
		"assistants/bad/src/index.ts:2:16: warning: Property 'writeFile' does not exist on type 'Sandbox'. Did you mean 'WriteFile'? (TS2551)",
		"assistants/bad/src/index.ts:3:9: warning: Type 'string' is not assignable to type 'number'. (TS2322)",
		"assistants/bad/src/index.ts:4:12: warning: Type 'number' is not assignable to type 'Message[]'. (TS2322)",
	}
	if code != 0 || !slices.Equal(typeLines, want) {
		t.Errorf("check: exit %d, type errors:\n%s\nwant:\n%s\noutput:\n%s", code, strings.Join(typeLines, "\n"), strings.Join(want, "\n"), out)
	}
	if out, code := run("--strict"); code != 1 || !strings.Contains(out, "assistants/bad/src/index.ts:2:16: Property 'writeFile'") {
		t.Errorf("check --strict: exit %d\n%s", code, out)
	}

	findTSC = func(string) string { return "" }
	if out, code := run(); code != 0 || strings.Count(out, "not type-checked (2 hook files): no TypeScript compiler found") != 1 || strings.Contains(out, "(TS") {
		t.Errorf("check without a compiler: exit %d\n%s", code, out)
	}
}
