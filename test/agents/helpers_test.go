package agents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// newApp copies the example app into a temporary folder with an app.jsonc
// that runs Docker sandboxes from the test's images (newAppIsolated: with
// an isolation), and replaces each
// scripted connector of clis with an anthropic (Codex: openai) connector whose host is
// $ENV.E2E_HOST_<CLI> (a test's scripted model server, which sees every request).
func newApp(t *testing.T, clis []string) string { return newAppIsolated(t, clis, "") }

func newAppIsolated(t *testing.T, clis []string, isolation string) string {
	t.Helper()
	app := filepath.Join(t.TempDir(), "app")
	if err := os.CopyFS(app, os.DirFS(filepath.Join(testenv.RepoRoot(), "examples", "app"))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountUnder(t, app) })
	_ = os.RemoveAll(filepath.Join(app, "data"))
	imgs := map[string]string{}
	for _, cli := range clis {
		imgs[cli] = testenv.CLIImage(t, cli)
		model := map[string]string{"codex": "gpt-5-codex", "gemini": "gemini-2.5-pro", "opencode": "claude-sonnet-4-5"}[cli]
		// Codex calls the Responses API: an openai connector.
		typ := map[bool]string{true: "openai", false: "anthropic"}[cli == "codex"]
		write(t, filepath.Join(app, "connectors", "scripted", cli+".conn.yao"), fmt.Sprintf(
			`{"label": "scripted model for %s", "type": %q, "options": {"host": "$ENV.E2E_HOST_%s", "key": "%s", "model": %q}}`,
			cli, typ, strings.ToUpper(cli), secretKey, model))
	}
	sb := map[string]any{"runtime": "docker", "images": imgs}
	if isolation != "" {
		sb["isolation"] = isolation
	}
	cfg, _ := json.Marshal(map[string]any{"data_root": "./data", "sandbox": sb})
	write(t, filepath.Join(app, "app.jsonc"), string(cfg))
	return app
}

// secretKey is the connector's key: it must reach the model server only,
// never a sandbox or an event.
const secretKey = "sk-e2e-agents-DO-NOT-LEAK"

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// unmountUnder unmounts every mount point under dir (deepest first):
// `agentbox run` leaves its chat's workspace mounted for a look at it.
func unmountUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], 0); err != nil {
			t.Errorf("unmount %s: %v", points[i], err)
		}
	}
}

// run runs `agentbox run --json` on app with env and returns the events.
func run(t *testing.T, app string, env []string, args ...string) []chat.Event {
	t.Helper()
	cmd := exec.Command(testenv.Agentbox(t), append([]string{"run", "--app", app, "--json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentbox run %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return decodeEvents(t, &stdout, "")
}

// decodeEvents reads JSON events, one a line, after prefix.
func decodeEvents(t *testing.T, r io.Reader, prefix string) []chat.Event {
	t.Helper()
	var events []chat.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok || line == "" {
			continue
		}
		var e chat.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not an event: %q", line)
		}
		events = append(events, e)
	}
	return events
}

// server is a running `agentbox serve` in development mode (no tokens:
// loopback only, the user from X-User-ID).
type server struct{ url string }

// serve starts `agentbox serve` on app with env (testenv.Serve).
func serve(t *testing.T, app string, env []string) *server {
	t.Helper()
	url, _ := testenv.Serve(t, app, env)
	return &server{url: url}
}

// post sends a JSON body as user and returns the response; it fails t
// unless the status is 200.
func (s *server) post(t *testing.T, path string, body any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-ID", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("POST %s: %s %s", path, resp.Status, msg)
	}
	return resp
}

// native sends a turn to the native API and returns its SSE events.
func (s *server) native(t *testing.T, assistant, chatID, message string) []chat.Event {
	t.Helper()
	resp := s.post(t, "/api/assistants/"+assistant+"/chat", map[string]any{"chat_id": chatID, "message": message})
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("native stream Content-Type %q", ct)
	}
	return decodeEvents(t, resp.Body, "data: ")
}

// completion sends a streamed /v1/chat/completions request and returns
// the answer's content, joined from the chunks, and the chat id header.
func (s *server) completion(t *testing.T, assistant, chatID string, messages []map[string]string) (content, gotChat string) {
	t.Helper()
	resp := s.post(t, "/v1/chat/completions", map[string]any{"model": assistant, "chat_id": chatID, "stream": true, "messages": messages})
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		if chunk.Error != nil {
			t.Fatalf("stream error: %s", data)
		}
		for _, c := range chunk.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	if !done {
		t.Errorf("the completion stream did not end with [DONE]")
	}
	return b.String(), resp.Header.Get("X-Chat-ID")
}
