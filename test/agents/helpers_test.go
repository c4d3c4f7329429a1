package agents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
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
	testenv.CopyExampleApp(t, app)
	t.Cleanup(func() { e2etest.UnmountUnder(t, app) })
	imgs := map[string]string{}
	for _, cli := range clis {
		imgs[cli] = testenv.CLIImage(t, cli)
		model := map[string]string{"codex": "gpt-5-codex", "gemini": "gemini-2.5-pro", "opencode": "claude-sonnet-4-5"}[cli]
		// Codex calls the Responses API: an openai connector.
		typ := map[bool]string{true: "openai", false: "anthropic"}[cli == "codex"]
		e2etest.Write(t, filepath.Join(app, "connectors", "scripted", cli+".conn.yao"), fmt.Sprintf(
			`{"label": "scripted model for %s", "type": %q, "options": {"host": "$ENV.E2E_HOST_%s", "key": "%s", "model": %q}}`,
			cli, typ, strings.ToUpper(cli), secretKey, model))
	}
	sb := map[string]any{"runtime": "docker", "images": imgs}
	if isolation != "" {
		sb["isolation"] = isolation
	}
	cfg, _ := json.Marshal(map[string]any{"data_root": "./data", "sandbox": sb})
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), string(cfg))
	return app
}

// secretKey is the connector's key: it must reach the model server only,
// never a sandbox or an event.
const secretKey = "sk-e2e-agents-DO-NOT-LEAK"

// server is a running `agentbox serve` in development mode (no tokens:
// loopback only, the user from X-User-ID).
type server struct{ url string }

// serve starts `agentbox serve` on app with env.
func serve(t *testing.T, app string, env []string) *server {
	t.Helper()
	return &server{url: e2etest.Serve(t, app, e2etest.Options{Env: env}).URL}
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
	return e2etest.DecodeEvents(t, resp.Body, "data: ")
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
