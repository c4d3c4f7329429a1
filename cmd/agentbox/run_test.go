package main

import (
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
		{[]string{"--app", "/nonexistent/app", "qa", "hi"}, 1, "app folder /nonexistent/app does not exist: create an app there with `agentbox init /nonexistent/app`"},
		{[]string{"--bogus"}, 2, "unknown flag --bogus"},
		{[]string{"qa", "hi", "--jsn"}, 2, "unknown flag --jsn (did you mean --json?)"},
		{[]string{"qa", "--", "--json"}, 1, "is not an app folder"}, // "--json" is the prompt
		{[]string{"--rewind", "1", "qa"}, 2, "need the --chat"},
		{[]string{"--chat", "c", "--rewind", "1", "--fork", "1", "qa"}, 2, "one or the other"},
		{[]string{"--chat", "c", "--fork", "-1", "qa"}, 2, "counted from 1"},
		{[]string{"--chat", "c", "--rewind", "x", "qa"}, 2, "invalid value"},
		{[]string{"--previews", "always", "qa", "hi"}, 2, `--previews "always": want auto, wait or exit`},
		{[]string{"--preview-addr", "0.0.0.0:8790", "qa", "hi"}, 2, "want a loopback address"},
		{[]string{"--preview-addr", "8790", "qa", "hi"}, 2, "want HOST:PORT"},
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
	testenv.CopyExampleApp(t, dst)
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
	// Flags after the prompt are flags (`run qa hi --json`).
	if code := runRun(context.Background(), []string{"qa", "hi", "--app", app, "--json"}, &out, &errb); code != 0 {
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
