// Package yao runs Yao-style app folders end to end through the agentbox
// binary: a connector that names its endpoint with Yao's "proxy" answers a
// direct assistant from that host (and nothing goes to the default host),
// and Yao-style sandboxed assistants (a v1 sandbox block and a v2
// sandbox.yao) run the real Claude Code CLI in Docker.
package yao

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// copyApp copies testdata/yao/NAME into a temp folder. `agentbox run`
// leaves its chat's workspace image mounted for a look at its files; the
// test unmounts what is mounted under the copy before it is removed.
func copyApp(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(testenv.RepoRoot(), "testdata", "yao", name))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2etest.UnmountUnder(t, dst) })
	return dst
}

// tripwire is an HTTP(S) forward proxy that records every request sent
// through it and answers 502: set as HTTP_PROXY and HTTPS_PROXY, it sees
// any request that would leave for a host other than the loopback ones.
type tripwire struct {
	*httptest.Server
	mu    sync.Mutex
	hosts []string
}

func newTripwire(t *testing.T) *tripwire {
	tw := &tripwire{}
	tw.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw.mu.Lock()
		tw.hosts = append(tw.hosts, r.Method+" "+r.Host)
		tw.mu.Unlock()
		http.Error(w, "tripwire: no request may leave the machine", http.StatusBadGateway)
	}))
	t.Cleanup(tw.Close)
	return tw
}

func (tw *tripwire) seen() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]string(nil), tw.hosts...)
}

// finalData returns the done event's Next data.
func finalData(t *testing.T, events []chat.Event) map[string]any {
	t.Helper()
	last := events[len(events)-1]
	if last.Event != chat.Done || last.Final == nil || last.Final.Error != "" {
		t.Fatalf("last event: %+v", last)
	}
	b, _ := json.Marshal(last.Final.Data)
	var data map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatalf("Next data %s: %v", b, err)
	}
	return data
}

// TestYaoProxyConnector: a Yao connector whose endpoint is its "proxy"
// option answers a direct assistant from that host, with the key meant for
// it; its non-request options stay out of the request; nothing is sent to
// OpenAI's default host (a tripwire proxy would see it).
func TestYaoProxyConnector(t *testing.T) {
	t.Parallel()
	app := copyApp(t, "proxy-app")
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "Hello from the proxy host."}}})
	t.Cleanup(srv.Close)
	tw := newTripwire(t)
	env := []string{"YAO_E2E_HOST=" + srv.URL, "YAO_E2E_KEY=sk-deepseek-only",
		"HTTP_PROXY=" + tw.URL, "HTTPS_PROXY=" + tw.URL, "http_proxy=" + tw.URL, "https_proxy=" + tw.URL, "NO_PROXY=", "no_proxy="}

	check := exec.Command(testenv.Agentbox(t), "check", app)
	check.Env = append(os.Environ(), env...)
	out, err := check.CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if want := "calls " + srv.URL + "/v1/chat/completions (options.proxy: $ENV.YAO_E2E_HOST)"; !strings.Contains(string(out), want) {
		t.Errorf("check does not say where the connector calls (%q):\n%s", want, out)
	}

	events := e2etest.Run(t, app, env, "--user", "alice", "chat", "Say hello.")
	data := finalData(t, events)
	if data["answer"] != "Hello from the proxy host." || data["role"] != "assistant" || data["finish_reason"] != "stop" {
		t.Errorf("Next data = %v", data)
	}
	reqs := srv.TurnRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the proxy host", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-deepseek-only" {
		t.Errorf("request: %s %v", r.Path, r.Header)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["model"] != "deepseek-chat" || body["temperature"] != 0.4 || body["max_completion_tokens"] != 256.0 {
		t.Errorf("body = %v", body)
	}
	for _, k := range []string{"capabilities", "proxy", "host", "key"} {
		if _, ok := body[k]; ok {
			t.Errorf("connector option %q reached the request body", k)
		}
	}
	msgs, _ := body["messages"].([]any)
	if first, _ := msgs[0].(map[string]any); first["content"] != "You are chat answering alice." {
		t.Errorf("system prompt = %v", first)
	}
	if seen := tw.seen(); len(seen) > 0 {
		t.Errorf("requests went to other hosts: %v", seen)
	}
}

// TestYaoSandboxedClaudeInDocker: Yao-style sandboxed assistants run the
// real Claude Code CLI in a Docker sandbox: a v1 block (Yao's image
// replaced by agentbox's, comma-separated tools, Yao's secrets form, which
// the sandbox holds only as a placeholder, Yao-style hooks) and a v2
// sandbox.yao (prepare steps, its environment).
func TestYaoSandboxedClaudeInDocker(t *testing.T) {
	testenv.Docker(t)
	testenv.Image(t)
	app := copyApp(t, "sandbox-app")

	t.Run("v1", func(t *testing.T) {
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{Text: "Writing the file.", ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "/workspace/hello.txt", "content": "hello\n"}}}},
			{When: &scripted.Match{AfterToolResult: "Write"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "printenv YAO_E2E_SECRET"}}}},
			{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Done: hello.txt is written."},
		}})
		t.Cleanup(srv.Close)
		events := e2etest.Run(t, app, []string{"YAO_E2E_HOST=" + srv.URL, "YAO_E2E_KEY=sk-ant-test", "YAO_E2E_SECRET=s3cret-for-git"},
			"--runtime", "docker", "--chat", "yao-v1", "coder", "Write hello.txt.")
		data := finalData(t, events)
		if answer, _ := data["answer"].(string); !strings.HasSuffix(answer, "Done: hello.txt is written.") {
			t.Errorf("answer = %v", data["answer"])
		}
		if files := toStrings(data["files"]); !contains(files, "hello.txt") || !contains(files, "from-create.txt") {
			t.Errorf("workspace files = %v", files)
		}
		if tools := toStrings(data["tools"]); !contains(tools, "Write") || !contains(tools, "Bash") {
			t.Errorf("tools = %v", tools)
		}
		if !sawToolResult(srv, "agentbox-placeholder-YAO_E2E_SECRET-") || sawToolResult(srv, "s3cret-for-git") {
			t.Error("the sandbox's environment should hold the secret's placeholder, never its value")
		}
	})

	t.Run("v2", func(t *testing.T) {
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "cat prepared.txt tpl/README.md"}}}},
			{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Prepared."},
		}})
		t.Cleanup(srv.Close)
		events := e2etest.Run(t, app, []string{"YAO_E2E_HOST=" + srv.URL, "YAO_E2E_KEY=sk-ant-test"},
			"--runtime", "docker", "--chat", "yao-v2", "builder", "Show what was prepared.")
		if last := events[len(events)-1]; last.Event != chat.Done || last.Final.Error != "" || last.Final.Content != "Prepared." {
			t.Fatalf("last event: %+v", last)
		}
		if !sawToolResult(srv, "prepared for e2e") || !sawToolResult(srv, "template from the assistant folder") {
			t.Error("prepare steps or the environment did not reach the sandbox")
		}
	})
}

// TestYaoSandboxedClaudeOnOpenAIConnector: a sandboxed Claude Code
// assistant whose connector is an OpenAI-compatible provider (the DeepSeek
// form, its host named with Yao's "proxy" and a trailing "/") runs: the
// model proxy translates the CLI's Messages calls, streamed, with tool
// calls and their results, to Chat Completions at {proxy}chat/completions
// with the connector's key and model, and nothing calls the Messages API.
func TestYaoSandboxedClaudeOnOpenAIConnector(t *testing.T) {
	testenv.Docker(t)
	for _, cli := range testenv.ClaudeVersions(t) {
		t.Run(cli.Version, func(t *testing.T) {
			testenv.RequireImage(t, cli.Image)
			app := copyApp(t, "sandbox-app")
			pkg := filepath.Join(app, "assistants", "local", "package.yao")
			b, err := os.ReadFile(pkg)
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.Replace(b, []byte(`"command": "claude",`), []byte(`"command": "claude", "image": "`+cli.Image+`",`), 1)
			if err := os.WriteFile(pkg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			openAIConnectorTurn(t, app, cli.Version)
		})
	}
}

func openAIConnectorTurn(t *testing.T, app, version string) {
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Text: "Writing the file.", ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "/workspace/hello.txt", "content": "hello\n"}}}},
		{When: &scripted.Match{AfterToolResult: "Write"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "cat hello.txt"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Done: hello.txt is written."},
	}})
	t.Cleanup(srv.Close)
	events := e2etest.Run(t, app, []string{"YAO_E2E_OPENAI_HOST=" + srv.URL + "/", "YAO_E2E_OPENAI_KEY=sk-deepseek-test"},
		"--runtime", "docker", "--chat", "yao-openai", "local", "Write hello.txt.")
	if v := sessionVersion(events); v != version {
		t.Errorf("the CLI in the sandbox is %q, want %s", v, version)
	}
	last := events[len(events)-1]
	if last.Event != chat.Done || last.Final.Error != "" || !strings.HasSuffix(last.Final.Content, "Done: hello.txt is written.") {
		t.Fatalf("last event: %+v", last)
	}
	if last.Final.Usage.InputTokens == 0 || last.Final.Usage.OutputTokens == 0 {
		t.Errorf("usage = %+v, want the upstream's token counts", last.Final.Usage)
	}
	if !sawToolResult(srv, "hello") {
		t.Error("the Bash tool's result did not come back to the model")
	}
	turns := 0
	for _, r := range srv.Requests() {
		switch {
		case r.Path != "/chat/completions":
			t.Errorf("request to %s %s, want only POST /chat/completions", r.Method, r.Path)
		case r.Header.Get("Authorization") != "Bearer sk-deepseek-test":
			t.Errorf("authorization = %q, want the connector's key", r.Header.Get("Authorization"))
		case !bytes.Contains(r.Body, []byte(`"model":"deepseek-chat"`)):
			t.Errorf("request names another model: %.200s", r.Body)
		}
		if r.Turn >= 0 {
			turns++
		}
	}
	if turns != 3 {
		t.Errorf("%d script turns used, want 3", turns)
	}
}

// sessionVersion is the CLI version the session event reports.
func sessionVersion(events []chat.Event) string {
	for _, e := range events {
		if e.Type == chat.TypeSession {
			v, _ := e.Props["version"].(string)
			return v
		}
	}
	return ""
}

// sawToolResult reports whether a request to srv carried s (in a tool
// result the CLI sent back).
func sawToolResult(srv *scripted.Server, s string) bool {
	for _, r := range srv.Requests() {
		if bytes.Contains(r.Body, []byte(s)) {
			return true
		}
	}
	return false
}

func toStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
