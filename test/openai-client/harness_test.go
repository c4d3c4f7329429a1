// Package openaiclient checks agentbox with the real clients of the OpenAI
// ecosystem, at the versions `make cli` pins (scripts/ensure-cli.sh): the
// official openai package (Chat Completions, the Responses API, a function
// calling loop), the AI SDK's default OpenAI provider (which uses the
// Responses API) and its openai-compatible provider (Chat Completions),
// and LangChain's ChatOpenAI (Chat Completions, and the Responses API with
// useResponsesApi). Each test runs a real `agentbox serve` on an app whose
// connectors point at a scripted model (package scripted) and whose sandboxed
// assistant runs the real Claude Code CLI in a Docker sandbox, then drives
// it with one Node.js script per client and checks what the client saw and
// what the model was sent. It also validates /openapi.json with an
// OpenAPI 3.1 validator from npm, and checks tool approval as these
// clients see it (and, with the native API, across a lost connection and
// a restart of the server).
package openaiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// token is the bearer token of the test user, alice.
const token = "sdk-test-token-0123456789"

// packages are the npm packages the scripts import; each must be in the
// node_modules folder the tests find.
var packages = []string{"openai", "ai", "@ai-sdk/openai", "@ai-sdk/openai-compatible", "@langchain/openai", "@langchain/core", "@readme/openapi-parser"}

// nodeModules finds a node_modules folder holding every package:
// AGENTBOX_NODE_MODULES, then NODE_PATH (make test sets it to
// .cache/npm/node_modules), then .cache/npm/node_modules.
func nodeModules(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, c := range []string{os.Getenv("AGENTBOX_NODE_MODULES"), os.Getenv("NODE_PATH"), filepath.Join(testenv.RepoRoot(), ".cache", "npm", "node_modules")} {
		if c == "" {
			continue
		}
		missing := ""
		for _, p := range packages {
			if _, err := os.Stat(filepath.Join(c, p, "package.json")); err != nil {
				missing = p
				break
			}
		}
		if missing == "" {
			return c
		}
		tried = append(tried, c+" (no "+missing+")")
	}
	testenv.Missing(t, "the npm packages "+strings.Join(packages, ", ")+" (make cli, or set AGENTBOX_NODE_MODULES); tried: "+strings.Join(tried, "; "))
	return ""
}

// nodeBin finds Node.js 22 or later (the SDKs' requirement):
// AGENTBOX_NODE_BIN (make sets it to the cached Node.js), then node on
// PATH.
func nodeBin(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("AGENTBOX_NODE_BIN"), filepath.Join(testenv.RepoRoot(), ".cache", "bin", "node")}
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	var seen []string
	for _, c := range candidates {
		if c == "" {
			continue
		}
		out, err := exec.Command(c, "--version").Output()
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(out))
		seen = append(seen, c+" "+v)
		if m := regexp.MustCompile(`^v(\d+)\.`).FindStringSubmatch(v); m != nil {
			if major, _ := strconv.Atoi(m[1]); major >= 22 {
				return c
			}
		}
	}
	testenv.Missing(t, fmt.Sprintf("Node.js 22 or later (make cli, or set AGENTBOX_NODE_BIN); found: %v", seen))
	return ""
}

// runNode runs script (a file of this folder) with the modules and env,
// and decodes the JSON it prints last into out.
func runNode(t *testing.T, script string, env map[string]string, out any) {
	t.Helper()
	node, mods := nodeBin(t), nodeModules(t)
	// ES modules resolve packages from the script's own folder upwards:
	// run a copy next to a node_modules link.
	dir := t.TempDir()
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, script), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, script))
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	defer func() { t.Logf("node %s ran %v", script, time.Since(began).Round(time.Millisecond)) }()
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		t.Fatalf("node %s output: %v\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	if testing.Verbose() {
		t.Logf("node %s:\n%s%s", script, stdout.String(), stderr.String())
	}
}

// script is what the scripted model answers, by what the request holds.
// Every turn is there several times (each request uses one up); turns
// that answer a tool result come first, as the request that carries one
// still holds the user message that asked for the tool.
func script() *scripted.Script {
	var turns []scripted.Turn
	add := func(n int, t scripted.Turn) {
		for range n {
			turns = append(turns, t)
		}
	}
	add(8, scripted.Turn{When: &scripted.Match{AfterToolResult: "get_weather"}, Text: "It is 18C and sunny in Paris."})
	add(16, scripted.Turn{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Done: the sandbox says hello."})
	add(10, scripted.Turn{When: &scripted.Match{Contains: "capital"}, Thinking: "The user asks about France.", Text: "Paris is the capital of France."})
	add(8, scripted.Turn{When: &scripted.Match{Contains: "weather"}, Text: "Let me check.",
		ToolCalls: []scripted.ToolCall{{Name: "get_weather", Input: map[string]any{"city": "Paris"}}}})
	add(8, scripted.Turn{When: &scripted.Match{Contains: "name is Ada"}, Text: "Nice to meet you, Ada."})
	add(8, scripted.Turn{When: &scripted.Match{Contains: "my name?"}, Text: "Your name is Ada."})
	add(6, scripted.Turn{When: &scripted.Match{Contains: "essay"}, Text: "This answer is cut", StopReason: "max_tokens"})
	add(4, scripted.Turn{When: &scripted.Match{Contains: "interrupt"}, Text: "A partial answer that will never be finished.", CutAfter: 3})
	add(6, scripted.Turn{When: &scripted.Match{Contains: "list the files"}, Text: "I will look.",
		ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "echo hello from the sandbox", "description": "Say hello"}}}})
	// The guarded assistant's calls (approval_test.go): each asks first.
	add(8, scripted.Turn{When: &scripted.Match{Contains: "touch the marker"}, Text: "Touching it.",
		ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "touch /workspace/marker-4412 && echo touched-4412"}}}})
	add(4, scripted.Turn{When: &scripted.Match{Contains: "make the folder"}, Text: "Making it.",
		ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "mkdir -p /workspace/folder-7730 && echo made-7730"}}}})
	return &scripted.Script{Turns: turns}
}

// app writes the test app: direct assistants on an OpenAI and an
// Anthropic connector, one that lets requests choose among models, and a
// sandboxed coder; extra adds files (path in the app: content).
func writeApp(t *testing.T, dir, llm string, extra map[string]string) {
	t.Helper()
	files := map[string]string{
		"app.jsonc": `{"auth": {"tokens": [{"token": "` + token + `", "user": "alice"}]}, "data_root": "` + filepath.Join(dir, "data") + `"}`,
		// Models Yao does not know declare what they take: tool calls
		// and images, an adjustable temperature.
		"connectors/llm/openai.conn.yao": `{"type": "openai", "options": {"host": "` + llm + `", "key": "sk-test", "model": "gpt-test",
			"capabilities": {"tool_calls": true, "vision": "openai"}}}`,
		"connectors/llm/anthropic.conn.yao": `{"type": "anthropic", "options": {"host": "` + llm + `", "key": "sk-ant-test", "model": "claude-sonnet-4-5",
			"capabilities": {"tool_calls": true, "vision": "claude", "temperature_adjustable": true}}}`,
		"assistants/qa/package.yao":        `{"name": "Q&A", "connector": "llm.openai", "options": {"max_tokens": 1000}}`,
		"assistants/qa/prompts.yml":        "- role: system\n  content: Be brief.\n",
		"assistants/claude-qa/package.yao": `{"name": "Claude Q&A", "connector": "llm.anthropic"}`,
		"assistants/picky/package.yao": `{"name": "Picky", "connector": "llm.openai",
			"overridable": {"model": ["gpt-test", "gpt-mini"], "max_tokens": 500, "temperature": {"min": 0, "max": 1}}}`,
		"assistants/coder/package.yao": `{"name": "Coder", "connector": "llm.anthropic",
			"sandbox": {"command": "claude", "timeout": "2m", "max_memory": "1g", "arguments": {"max_turns": 5, "allowed_tools": ["Bash"]}}}`,
	}
	maps.Copy(files, extra)
	for name, body := range files {
		p := filepath.Join(dir, "app", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// agentbox is a running `agentbox serve` and its scripted model.
type agentbox struct {
	url string
	llm *scripted.Server
	srv *e2etest.Server
	// opts start the server again (restart).
	app  string
	opts e2etest.Options
}

// start runs `agentbox serve` (the binary built as `make build` does, with
// Docker sandboxes) on the test app, until the test ends.
func start(t *testing.T) *agentbox {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with extra files in the app, and args for `agentbox
// serve`.
func startWith(t *testing.T, extra map[string]string, args ...string) *agentbox {
	t.Helper()
	nodeBin(t)
	nodeModules(t)
	testenv.Image(t)
	llm := scripted.NewServer(script())
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	writeApp(t, dir, llm.URL, extra)
	a := &agentbox{llm: llm, app: filepath.Join(dir, "app"),
		opts: e2etest.Options{Bin: testenv.Agentbox(t), Args: append([]string{"--runtime", "docker"}, args...)}}
	a.srv = e2etest.Serve(t, a.app, a.opts)
	a.url = a.srv.URL
	return a
}

// restart stops the server with SIGTERM, as an operator would, and starts
// it again on the same app and data (at another address).
func (a *agentbox) restart(t *testing.T) {
	t.Helper()
	a.srv.Stop(syscall.SIGTERM, time.Minute)
	a.srv = e2etest.Serve(t, a.app, a.opts)
	a.url = a.srv.URL
}

// env is what every script gets.
func (a *agentbox) env() map[string]string {
	return map[string]string{"AGENTBOX_URL": a.url, "AGENTBOX_TOKEN": token}
}

// requestWith returns the first model request whose latest user text
// contains s (nil when none).
func (a *agentbox) requestWith(s string) []scripted.Request {
	var out []scripted.Request
	for _, r := range a.llm.TurnRequests() {
		if strings.Contains(r.LastUserText(), s) {
			out = append(out, r)
		}
	}
	return out
}

// check compares one value the client reported with what is wanted.
func check(t *testing.T, name string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s = %s, want %s", name, g, w)
	}
}

// report is what a script printed: get reads a value by a dotted path
// ("chat.content", "agent.items.1.name").
type report map[string]any

func (r report) get(path string) any {
	var v any = map[string]any(r)
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// expect checks values of the report by path.
func (r report) expect(t *testing.T, want map[string]any) {
	t.Helper()
	for _, path := range sortedKeys(want) {
		check(t, path, r.get(path), want[path])
	}
}

// contains checks that the string at path contains every part.
func (r report) contains(t *testing.T, path string, parts ...string) {
	t.Helper()
	s, _ := r.get(path).(string)
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s = %q, want it to contain %q", path, s, p)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// history checks that the model request answering the user text ask
// carried each of the earlier texts: the conversation reached the model.
func (a *agentbox) history(t *testing.T, ask string, earlier ...string) {
	t.Helper()
	reqs := a.requestWith(ask)
	if len(reqs) == 0 {
		t.Errorf("no model request asked %q", ask)
		return
	}
	for _, r := range reqs {
		body := string(r.Body)
		for _, e := range earlier {
			if !strings.Contains(body, e) {
				t.Errorf("the model request for %q lacks %q: %s", ask, e, body)
			}
		}
	}
}

// toolResult checks that a model request for the user text ask carried
// the result of tool, holding result.
func (a *agentbox) toolResult(t *testing.T, ask, tool, result string) {
	t.Helper()
	for _, r := range a.llm.TurnRequests() {
		if !strings.Contains(string(r.Body), ask) {
			continue
		}
		for _, tr := range r.ToolResults() {
			if tr.Tool == tool && strings.Contains(tr.ContentText(), result) {
				return
			}
		}
	}
	t.Errorf("no model request for %q carried a %s result with %q", ask, tool, result)
}
