package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// update (-update) is declared in check_test.go.

// readEvents reads a JSON-lines event file.
func readEvents(t *testing.T, path string) []chat.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []chat.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e chat.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	return out
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/agentbox -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestRenderGolden renders recorded event streams (run_coder and run_qa
// recorded from `agentbox run --json` on examples/app; run_events covers
// errors, notices and hook types) plain and in color.
func TestRenderGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/run_*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".jsonl")
		events := readEvents(t, in)
		for _, color := range []bool{false, true} {
			var buf bytes.Buffer
			r := newRenderer(&buf, renderOptions{Color: color, Width: 80})
			for _, e := range events {
				r.Event(e)
			}
			r.Finish()
			out := filepath.Join("testdata", name+".golden.txt")
			if color {
				out = filepath.Join("testdata", name+".color.golden.txt")
			}
			checkGolden(t, out, buf.String())
		}
	}
}

// TestRenderJSON: --json writes every event as one JSON line, unchanged.
func TestRenderJSON(t *testing.T) {
	in, err := os.ReadFile("testdata/run_events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	r := newRenderer(&buf, renderOptions{JSON: true})
	for _, e := range readEvents(t, "testdata/run_events.jsonl") {
		r.Event(e)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := strings.Split(strings.TrimSpace(string(in)), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range got {
		var a, b any
		_ = json.Unmarshal([]byte(got[i]), &a)
		_ = json.Unmarshal([]byte(want[i]), &b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("line %d = %s, want %s", i+1, got[i], want[i])
		}
	}
}

func TestRenderHelpers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want string
	}{
		{nil, ""},
		{map[string]any{"command": "go test\n./..."}, "go test ./..."},
		{map[string]any{"pattern": "*.go", "path": "src"}, "src"},
		{json.RawMessage(`{"file_path":"/workspace/a.txt","content":"x"}`), "/workspace/a.txt"},
		{`{"query":"weather"}`, "weather"},
		{"not json", "not json"},
		{map[string]any{"b": 1, "a": "x"}, `a="x" b=1`},
		{map[string]any{"command": strings.Repeat("x", 50)}, strings.Repeat("x", 19) + "…"},
	}
	for _, tt := range tests {
		if got := shortInput(tt.in, 20); got != tt.want {
			t.Errorf("shortInput(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := humanSize(2048); got != "2.0 KB" {
		t.Errorf("humanSize = %q", got)
	}
	if got := trimEllipsis("Starting sandbox…"); got != "Starting sandbox" {
		t.Errorf("trimEllipsis = %q", got)
	}
}

func TestSpinner(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	s := newSpinner(&buf)
	s.Start("starting sandbox…")
	s.Start("still starting")
	s.Stop()
	s.Stop()
	var nilSpinner *spinner
	nilSpinner.Start("x")
	nilSpinner.Stop()
	out := buf.String()
	if !strings.Contains(out, "starting sandbox…") && !strings.Contains(out, "still starting") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("spinner output %q", out)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "want ASSISTANT and PROMPT"},
		{[]string{"qa"}, 2, "want ASSISTANT and PROMPT"},
		{[]string{"--user", "../x", "qa", "hi"}, 2, "--user: user id"},
		{[]string{"--chat", ".x", "qa", "hi"}, 2, "--chat: chat id"},
		{[]string{"qa", "  "}, 2, "the prompt is empty"},
		{[]string{"--app", "/nonexistent/app", "qa", "hi"}, 1, "load app"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := runRun(context.Background(), tt.args, &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("run %v = %d %q, want %d %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}

// exampleApp copies examples/app (without its data) into a temp folder.
func exampleApp(t *testing.T) string {
	t.Helper()
	src := filepath.Join(testenv.RepoRoot(), "examples", "app")
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("example app: %v", err)
	}
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(filepath.Join(dst, "data"))
	return dst
}

// TestRunDirect runs the example app's Q&A assistant (a scripted model,
// no sandbox) through the real pipeline.
func TestRunDirect(t *testing.T) {
	app := exampleApp(t)
	var out, errb bytes.Buffer
	if code := runRun(context.Background(), []string{"--app", app, "--chat", "c1", "qa", "What", "is", "agentbox?"}, &out, &errb); code != 0 {
		t.Fatalf("run = %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "agentbox") || !strings.Contains(out.String(), "tokens") {
		t.Errorf("output:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := runRun(context.Background(), []string{"--app", app, "--json", "qa", "hi"}, &out, &errb); code != 0 {
		t.Fatalf("run --json = %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var last chat.Event
	for i, l := range lines {
		var e chat.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %d is not JSON: %q", i+1, l)
		}
		last = e
	}
	if last.Event != chat.Done || last.Final == nil {
		t.Errorf("last event = %+v", last)
	}
	errb.Reset()
	if code := runRun(context.Background(), []string{"--app", app, "nope", "hi"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `unknown assistant "nope"`) {
		t.Errorf("unknown assistant = %d %q", code, errb.String())
	}
}

// brokenPipe fails every write after the first n bytes, like a pipe whose
// reader went away (`agentbox run ... | head`).
type brokenPipe struct{ n int }

func (b *brokenPipe) Write(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errors.New("write /dev/stdout: broken pipe")
	}
	b.n -= len(p)
	return len(p), nil
}

func TestRunStopsWhenOutputCloses(t *testing.T) {
	app := exampleApp(t)
	var errb bytes.Buffer
	code := runRun(context.Background(), []string{"--app", app, "--json", "qa", "What is agentbox?"}, &brokenPipe{n: 10}, &errb)
	if code != 1 || !strings.Contains(errb.String(), "output closed, turn stopped") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
