package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// fakeBackend is a hand-written Backend. Chat runs the test's script (or
// answers "Hello" by default) and records every request; workspaces live
// under root/user/chat and exist only when a test made them.
type fakeBackend struct {
	app  *assistant.App
	root string
	chat func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error)

	mu    sync.Mutex
	calls []*pipeline.Request
}

var _ Backend = (*fakeBackend)(nil)

func testApp() *assistant.App {
	return &assistant.App{
		Root:   "/app",
		Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{
			"openai.gpt": {ID: "openai.gpt", Type: "openai", Options: assistant.ConnectorOptions{Key: "sk-secret-key", Host: "https://api.example"}},
		},
		Assistants: map[string]*assistant.Assistant{
			"qa": {ID: "qa", Name: "Q&A", Description: "Answers questions", Connector: "openai.gpt"},
			"coder": {ID: "coder", Name: "Coder", Connector: "openai.gpt",
				Sandbox: &assistant.Sandbox{Command: "claude", Image: "agentbox/sandbox-claude:latest"},
				Skills:  []*skills.Skill{{Name: "code-review", Description: "Review a change."}, {Name: "bash-helper"}}},
		},
	}
}

func newFake(t *testing.T) *fakeBackend {
	return &fakeBackend{app: testApp(), root: t.TempDir()}
}

func (f *fakeBackend) App() *assistant.App { return f.app }

func (f *fakeBackend) Chat(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	script := f.chat
	f.mu.Unlock()
	if script != nil {
		return script(ctx, req, emit)
	}
	emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText})
	emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "Hel"})
	emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "lo"})
	emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
	return &pipeline.Response{Content: "Hello", Usage: chat.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

func (f *fakeBackend) Workspace(ctx context.Context, user, chatID string) (*sandbox.Workspace, func(), error) {
	if err := sandbox.ValidateID("user", user); err != nil {
		return nil, nil, err
	}
	if err := sandbox.ValidateID("chat", chatID); err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(f.root, user, chatID)
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("workspace %s/%s: %w", user, chatID, sandbox.ErrNotFound)
	}
	ws, err := sandbox.OpenWorkspace(dir, -1, -1)
	if err != nil {
		return nil, nil, err
	}
	return ws, func() { ws.Close() }, nil
}

// lastCall returns the last request Chat received.
func (f *fakeBackend) lastCall(t *testing.T) *pipeline.Request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		t.Fatal("backend got no request")
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeBackend) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// Tokens of the two test users.
const (
	tokenAlice = "tok-alice-0123456789"
	tokenBob   = "tok-bob-9876543210"
)

var testTokens = map[string]string{tokenAlice: "alice", tokenBob: "bob"}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer serves a Server over the fake on a test HTTP server.
func startServer(t testing.TB, fb *fakeBackend, mod func(*Config)) *httptest.Server {
	t.Helper()
	cfg := Config{Backend: fb, Tokens: testTokens, Logger: quietLogger()}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// do sends a request with token (none when "") and the headers in hdr
// (name, value, ...; "Host" sets the request's Host) and returns the
// response with its body read.
func do(t *testing.T, ts *httptest.Server, method, path, token, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal(err)
	}
	return resp, string(b)
}
