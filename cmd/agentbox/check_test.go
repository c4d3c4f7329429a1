package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/assistant"
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
	// Not parallel: it swaps compileHooks.
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
