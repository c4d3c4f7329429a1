package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/units"
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
	if got := units.FormatBytes(2048); got != "2.0 KB" {
		t.Errorf("FormatBytes = %q", got)
	}
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"File created successfully at: /workspace/hello.sh (file state is current in your context)", 60, "File created successfully at: /workspace/hello.sh (file…"},
		{"hello, world and more", 15, "hello, world…"},
		{"short", 10, "short"},
		{"/a/very/long/path/without/any/space/in/it", 12, "/a/very/lon…"},
		{"a " + strings.Repeat("x", 30), 12, "a xxxxxxxxx…"}, // no word ends in the last third
	} {
		if got := truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
	if got := trimEllipsis("Starting sandbox…"); got != "Starting sandbox" {
		t.Errorf("trimEllipsis = %q", got)
	}
}
