package bridge_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/claude"
	"github.com/agentbox/agentbox/codex"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/gemini"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/opencode"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

var record = flag.Bool("record", false, "re-record testdata/cli-requests from the real CLIs in their images")

// cliRecording is one run of a CLI whose requests are recorded.
type cliRecording struct {
	name, cli, image, typ, model string
	exec                         executor.Executor
	shell                        string
	input                        func(command string) map[string]any
	// agents: the model delegates to six subagents at once (Claude Code's
	// Agent tool), whose calls run in parallel.
	agents bool
}

func cliRecordings(t *testing.T) []cliRecording {
	shellInput := func(c string) map[string]any { return map[string]any{"command": c, "description": "run"} }
	var rs []cliRecording
	for _, cli := range testenv.ClaudeVersions(t) {
		for _, model := range []string{"claude-sonnet-4-5", "claude-opus-4-8", "claude-haiku-4-5"} {
			rs = append(rs, cliRecording{name: "claude-" + cli.Version + "-" + model, cli: "claude", image: cli.Image, typ: "anthropic", model: model,
				exec: claude.New(claude.Options{}), shell: "Bash", input: shellInput})
		}
		rs = append(rs, cliRecording{name: "claude-" + cli.Version + "-agents", cli: "claude", image: cli.Image, typ: "anthropic", model: "claude-sonnet-4-5",
			exec: claude.New(claude.Options{}), shell: "Bash", input: shellInput, agents: true})
	}
	return append(rs,
		cliRecording{name: "codex", cli: "codex", typ: "openai", model: "gpt-5-codex", exec: codex.New(codex.Options{}),
			shell: "exec_command", input: func(c string) map[string]any { return map[string]any{"cmd": c} }},
		cliRecording{name: "gemini", cli: "gemini", typ: "anthropic", model: "gemini-2.5-pro", exec: gemini.New(gemini.Options{}),
			shell: "run_shell_command", input: shellInput},
		cliRecording{name: "opencode-anthropic", cli: "opencode", typ: "anthropic", model: "claude-sonnet-4-5", exec: opencode.New(opencode.Options{}),
			shell: "bash", input: shellInput},
		cliRecording{name: "opencode-openai", cli: "opencode", typ: "openai", model: "gpt-5", exec: opencode.New(opencode.Options{}),
			shell: "bash", input: shellInput},
	)
}

// TestRecordCLIRequests re-records what each supported CLI sends its
// model API into testdata/cli-requests (TestCLIRequestsPass replays them
// through the proxy). Each CLI runs in its image against a scripted model
// on the host's loopback, reached straight (network "host", no bridge),
// so what is recorded is what the CLI sends, not what the proxy forwards.
// It runs only with -record.
func TestRecordCLIRequests(t *testing.T) {
	if !*record {
		t.Skip("records the CLIs' requests only with -record (not a CI test)")
	}
	dir := filepath.Join("testdata", "cli-requests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rec := range cliRecordings(t) {
		t.Run(rec.name, func(t *testing.T) {
			reqs := recordCLI(t, rec)
			b, err := json.MarshalIndent(reqs, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, rec.name+".json"), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func recordCLI(t *testing.T, rec cliRecording) []bridge.RecordedRequest {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	turns := []scripted.Turn{
		{Text: "Writing.", ToolCalls: []scripted.ToolCall{{Name: rec.shell, Input: rec.input("echo first > notes.txt")}}},
		{When: &scripted.Match{AfterToolResult: rec.shell}, Text: "Done."},
	}
	if rec.agents {
		var calls []scripted.ToolCall
		for i := range 6 {
			calls = append(calls, scripted.ToolCall{Name: "Agent", Input: map[string]any{
				"description": "sub task", "prompt": fmt.Sprintf("SUBTASK-%d: say hi", i), "subagent_type": "general-purpose"}})
		}
		turns = []scripted.Turn{{Text: "Delegating.", ToolCalls: calls}}
		for range 6 {
			turns = append(turns, scripted.Turn{When: &scripted.Match{Contains: "SUBTASK-"}, Text: "sub done", Delay: scripted.Duration(time.Second)})
		}
		turns = append(turns, scripted.Turn{When: &scripted.Match{AfterToolResult: "Agent"}, Text: "Done."})
	}
	srv := scripted.NewServer(&scripted.Script{Turns: turns})
	t.Cleanup(srv.Close)
	img := rec.image
	if img == "" {
		img = testenv.CLIImage(t, rec.cli)
	}
	testenv.RequireImage(t, img)
	rt, err := docker.New(ctx, docker.Options{Instance: "record-" + randID(), Image: img, Network: sandbox.NetworkHost})
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(ctx, "rec", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "rec", ChatID: "c1", Workspace: ws, Image: img, Network: sandbox.NetworkHost})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Remove(context.Background()) }()
	log := func(chat.Event) {}
	_, err = rec.exec.Run(ctx, &executor.Request{
		Assistant: &assistant.Assistant{ID: "recorder"}, UserID: "rec", ChatID: "c1",
		System:    "You are a careful coding assistant.",
		Input:     []chat.Message{{Role: chat.RoleUser, Content: "make notes"}},
		Connector: executor.Connection{Type: rec.typ, Host: srv.URL, Key: "sk-record", Model: rec.model},
		Sandbox:   sb, Timeout: 3 * time.Minute, Emit: log,
	})
	if err != nil {
		t.Logf("turn: %v (the requests it sent are recorded)", err)
	}
	var out []bridge.RecordedRequest
	seen := map[string]bool{}
	for _, r := range srv.Requests() {
		if r.Path == "/" {
			continue // Claude Code's probe of its base URL, which the proxy answers itself
		}
		h := r.Header.Clone()
		for _, k := range []string{"X-Api-Key", "Authorization", "X-Goog-Api-Key", "Content-Length", "Accept-Encoding", "Connection"} {
			h.Del(k)
		}
		var body any
		if err := json.Unmarshal(r.Body, &body); err != nil && len(r.Body) > 0 {
			t.Fatalf("%s %s: body not JSON: %v", r.Method, r.Path, err)
		}
		body = shape(body, "")
		// One request of each shape: the same headers, betas, fields and
		// kinds of content.
		sig := strings.Join([]string{r.Method, r.Path, strings.Join(slices.Sorted(maps.Keys(h)), ","), h.Get("Anthropic-Beta"),
			strings.Join(paths(body, ""), ",")}, "|")
		if seen[sig] {
			continue
		}
		seen[sig] = true
		b, _ := json.Marshal(body)
		out = append(out, bridge.RecordedRequest{Method: r.Method, Path: r.Path, Query: r.RawQuery, Header: h, Body: b})
	}
	if len(out) == 0 {
		t.Fatal("the CLI sent no request")
	}
	return out
}

// shape keeps v's structure: strings cut to 60 bytes, tool schemas
// (input_schema, parameters, parametersJsonSchema) replaced by an empty
// object.
func shape(v any, key string) any {
	switch x := v.(type) {
	case string:
		if len(x) > 60 && !strings.HasPrefix(x, "data:") {
			return x[:60]
		}
		return x
	case []any:
		for i := range x {
			x[i] = shape(x[i], key)
		}
	case map[string]any:
		if key == "input_schema" || key == "parameters" || key == "parametersJsonSchema" {
			return map[string]any{}
		}
		for k := range x {
			x[k] = shape(x[k], k)
		}
	}
	return v
}

// paths lists the JSON paths in v (array indexes as []), with the values
// of "type" keys; not inside tool inputs and arguments, which vary with
// what the model asked.
func paths(v any, at string) []string {
	var out []string
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = append(out, paths(e, at+"[]")...)
		}
	case map[string]any:
		for k, e := range x {
			out = append(out, at+"."+k)
			if s, ok := e.(string); ok && k == "type" {
				out = append(out, at+".type="+s)
			}
			if at == "" || k != "input" && k != "args" && k != "arguments" {
				out = append(out, paths(e, at+"."+k)...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
