// Package executors plays a hostile agent against every executor (Claude
// Code, Codex, the Gemini CLI, opencode and Cursor's stand-in) through a
// real `agentbox serve`: each CLI runs in its Docker sandbox image, driven
// by a scripted model (package scripted, seen through the bridge's model proxy)
// whose tool calls attack what the docs promise:
//
//   - TestForgedOutput: a process of the agent writes forged JSON lines
//     into every output it can reach (the CLI's stdout through
//     /proc/$PPID/fd/1, the stdio of every process in the sandbox, its own
//     inherited descriptors, the CLI's memory); the done event and the
//     stored history keep the real answer.
//   - TestPlantedConfig: the agent writes every CLI's configuration
//     (project settings, MCP servers, plugins, extensions, hooks, memory
//     and instruction files, in the workspace and in the CLIs' former
//     homes); the chat's next turn resumes the session, and nothing planted
//     runs or reaches the model.
package executors

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// cli is one executor as the tests drive it.
type cli struct {
	name string
	// conn is the connector type its scripted model server speaks to it as.
	conn string
	// shell is the shell tool's name and input turns a command into its
	// input (empty for the stand-in, whose tool calls come from its own
	// script).
	shell string
	input func(command string) map[string]any
}

var clis = []cli{
	{"claude", "anthropic", "Bash", func(c string) map[string]any {
		return map[string]any{"command": c, "description": "run", "timeout": 120000}
	}},
	{"codex", "openai", "exec_command", func(c string) map[string]any { return map[string]any{"cmd": c} }},
	{"gemini", "anthropic", "run_shell_command", func(c string) map[string]any {
		return map[string]any{"command": c, "description": "run"}
	}},
	{"opencode", "anthropic", "bash", func(c string) map[string]any {
		return map[string]any{"command": c, "description": "run"}
	}},
	{"cursor", "anthropic", "", nil},
}

// models is the model each CLI is configured with.
var models = map[string]string{"claude": "claude-sonnet-4-5", "codex": "gpt-5-codex", "gemini": "gemini-2.5-pro",
	"opencode": "claude-sonnet-4-5", "cursor": "auto"}

// server is a running `agentbox serve` on an app with one assistant per
// CLI, named after it, each on its own scripted model server.
type server struct {
	url    string
	data   string // the app's data root
	models map[string]*scripted.Server
	logs   *testenv.SyncBuffer
}

// turnScript is what one CLI's model (or the stand-in) does in a test.
type turnScript struct {
	model *scripted.Script
	// standin is the cursor stand-in's script (see standin_test.go).
	standin []standinTurn
}

// serve starts a server whose assistant per CLI (of only, all when nil)
// follows scripts[cli]. The sandboxes run in the CLIs' test images, with
// no network.
func serve(t *testing.T, scripts map[string]turnScript) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	testenv.Docker(t)
	app := t.TempDir()
	// The sandbox user must reach the data root (t.TempDir is 0700).
	for p := app; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	s := &server{data: filepath.Join(app, "data"), models: map[string]*scripted.Server{}, logs: &testenv.SyncBuffer{}}
	images := map[string]string{}
	var env []string
	for _, c := range clis {
		sc, ok := scripts[c.name]
		if !ok {
			continue
		}
		host := "http://127.0.0.1:9" // never called: the stand-in has no model
		if c.name == "cursor" {
			images[c.name] = standinImage(t, sc.standin)
		} else {
			images[c.name] = testenv.CLIImage(t, c.name)
			srv := scripted.NewServer(sc.model)
			t.Cleanup(srv.Close)
			s.models[c.name] = srv
			host = srv.URL
		}
		env = append(env, "HOST_"+strings.ToUpper(c.name)+"="+host)
		e2etest.Write(t, filepath.Join(app, "connectors", "test", c.name+".conn.yao"), fmt.Sprintf(
			`{"type": %q, "options": {"host": "$ENV.HOST_%s", "key": %q, "model": %q}}`,
			c.conn, strings.ToUpper(c.name), secretKey, models[c.name]))
		e2etest.Write(t, filepath.Join(app, "assistants", c.name, "package.yao"), fmt.Sprintf(
			`{"name": %q, "connector": "test.%s", "sandbox": {"command": %q, "timeout": "4m", "arguments": {"max_turns": 10}}}`,
			c.name, c.name, c.name))
	}
	cfg, _ := json.Marshal(map[string]any{"data_root": "./data", "sandbox": map[string]any{"runtime": "docker", "images": images}})
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), string(cfg))

	srv := e2etest.Serve(t, app, e2etest.Options{Env: env})
	s.url, s.logs = srv.URL, srv.Logs
	return s
}

// secretKey is every connector's key: it reaches the model servers only.
const secretKey = "sk-executors-DO-NOT-LEAK"

// turn runs one turn of chatID with assistant over the native API and
// returns its events; it fails t unless the stream ends with done.
func (s *server) turn(t *testing.T, assistant, chatID, message string) []chat.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"chat_id": chatID, "message": message})
	resp := s.do(t, ctx, http.MethodPost, "/api/assistants/"+assistant+"/chat", body)
	defer resp.Body.Close()
	events, err := testenv.ReadEvents(resp.Body)
	if err != nil {
		t.Fatalf("turn %q: %v", message, err)
	}
	if len(events) == 0 || events[len(events)-1].Event != chat.Done || events[len(events)-1].Final == nil {
		t.Fatalf("turn %q: the stream did not end with done: %+v", message, events)
	}
	return events
}

// do sends a request as the test's user and fails t unless it answers 200.
func (s *server) do(t *testing.T, ctx context.Context, method, path string, body []byte) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, s.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-ID", "mallory")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
	}
	return resp
}

// history is the chat's stored history.
func (s *server) history(t *testing.T, chatID string) []chat.Message {
	t.Helper()
	resp := s.do(t, context.Background(), http.MethodGet, "/api/chats/"+chatID, nil)
	defer resp.Body.Close()
	var c struct {
		History []chat.Message `json:"history"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatalf("GET /api/chats/%s: %v", chatID, err)
	}
	return c.History
}

// workspace is the host folder of the test user's chat.
func (s *server) workspace(chatID string) string {
	return filepath.Join(s.data, "workspaces", "mallory", chatID)
}

// final is the turn's done event; it fails t unless the turn succeeded,
// with what the model was sent last.
func (s *server) final(t *testing.T, cli string, events []chat.Event) *chat.Final {
	t.Helper()
	f := events[len(events)-1].Final
	if f.Error != "" {
		b, _ := json.Marshal(events)
		if srv := s.models[cli]; srv != nil {
			if reqs := srv.Requests(); len(reqs) > 0 {
				body := string(reqs[len(reqs)-1].Body)
				t.Logf("the last model request: ...%s", body[max(0, len(body)-3000):])
			}
		}
		t.Fatalf("the turn failed (%s): %s", f.Error, b)
	}
	return f
}

// shown is what a client saw of a turn but the tool results (which carry
// the attack's own report): the events' text and string props.
func shown(events []chat.Event) string {
	var sb strings.Builder
	for _, e := range events {
		if e.Type == chat.TypeToolResult {
			continue
		}
		sb.WriteString(e.Text)
		for k, v := range e.Props {
			if s, ok := v.(string); ok && k != "input" {
				sb.WriteString(s)
			}
		}
		if e.Final != nil {
			sb.WriteString(e.Final.Content)
		}
	}
	return sb.String()
}

// toolOutput joins the contents of the turn's tool results.
func toolOutput(events []chat.Event) string {
	var sb strings.Builder
	for _, e := range events {
		if e.Event == chat.Start && e.Type == chat.TypeToolResult {
			fmt.Fprintf(&sb, "%v\n", e.Props["content"])
		}
	}
	return sb.String()
}

// shellOf is the shell command that runs script: the script travels
// base64-encoded, as the Gemini CLI refuses command substitution in a
// command it is given.
func shellOf(script string) string {
	return "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | bash"
}
