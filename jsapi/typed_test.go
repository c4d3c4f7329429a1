package jsapi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestTypedHook runs testdata/typed, a strictly typed hook that uses the
// whole ctx API as agentbox.d.ts declares it.
func TestTypedHook(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs(filepath.Join("testdata", "typed"))
	h, err := Load(&assistant.Assistant{ID: "typed", Dir: dir, Hooks: filepath.Join(dir, "src", "index.ts")})
	if err != nil {
		t.Fatal(err)
	}
	sb := newFakeSandbox(t)
	store := NewMemStore()
	var rec chattest.Recorder
	var logs logBuffer
	hc := &Context{ChatID: "c9", UserID: "ann", Locale: "fr", Metadata: map[string]any{"plan": "team"},
		Sandbox: sb, Memory: store, Emit: rec.Emit, Logger: logs.logger()}
	msgs := []chat.Message{{Role: "user", Content: "plan it"}}
	res, err := h.Create(context.Background(), hc, msgs, chat.Options{Sandbox: &chat.SandboxOptions{Arguments: &chat.Arguments{MaxTurns: 10, Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := &CreateResult{
		Messages: append(msgs, chat.Message{Role: "system", Content: "Visit 1; notes: plan.md"}),
		Options:  &chat.Options{ModelOptions: chat.ModelOptions{Temperature: ptr(0.1)}, Sandbox: &chat.SandboxOptions{Arguments: &chat.Arguments{MaxTurns: 4, Model: "m"}}},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("Create = %+v, want %+v", res, want)
	}
	if b, err := os.ReadFile(filepath.Join(sb.dir, "notes", "plan.md")); err != nil || string(b) != "# Plan for ann\n" {
		t.Fatalf("plan.md = %q, %v", b, err)
	}
	if ev := rec.Events(); len(ev) != 4 || ev[2].Text != "Workspace has 1 note(s)" {
		t.Fatalf("events = %+v", ev)
	}
	for _, w := range []string{`level=WARN msg="exit EXEC_FAILED 2 "`, `level=INFO msg="visit 1 team"`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, logs.String())
		}
	}
	next, err := h.Next(context.Background(), hc, NextPayload{Completion: Completion{Content: "ok"}, Tools: []toolCall{{Name: "Write"}, {Name: "Bash", IsError: true}}}, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantData := map[string]any{"answer": "ok", "tools": []any{"Write"}, "started": 1.0, "visits": 1.0, "keys": []any{"visit"}, "has": true}
	if next == nil || !reflect.DeepEqual(next.Data, wantData) {
		t.Fatalf("Next = %+v, want %v", next, wantData)
	}
}

// TestDeclarationsTypeCheck type-checks agentbox.d.ts with the typed hook
// and the seed examples, when a TypeScript compiler is at hand
// (AGENTBOX_TSC or tsc on PATH).
func TestDeclarationsTypeCheck(t *testing.T) {
	t.Parallel()
	tsc := os.Getenv("AGENTBOX_TSC")
	if tsc == "" {
		var err error
		if tsc, err = exec.LookPath("tsc"); err != nil {
			testenv.Missing(t, "a TypeScript compiler (make cli installs one; or set AGENTBOX_TSC)")
		}
	}
	for _, args := range [][]string{
		{"-p", filepath.Join("testdata", "typed", "tsconfig.json")},
		{"--noEmit", "--lib", "ES2020", "--target", "ES2017", "agentbox.d.ts", filepath.Join("testdata", "seed", "src", "index.ts")},
	} {
		out, err := exec.Command(tsc, args...).CombinedOutput()
		if err != nil {
			t.Errorf("tsc %v: %v\n%s", args, err, out)
		}
	}
}
