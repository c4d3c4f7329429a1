// Package openaiclient checks that the official openai npm client works
// against agentbox's /v1 endpoints unchanged: listing models, streaming
// (with usage and reasoning), the stream helper, plain completions and
// errors before and during a stream.
package openaiclient

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server"
)

// backend answers every turn with thinking and two text deltas; a
// message "fail" fails after the first delta.
type backend struct{ app *assistant.App }

func (b backend) App() *assistant.App { return b.app }

func (b backend) Workspace(ctx context.Context, user, chatID string) (*sandbox.Workspace, func(), error) {
	return nil, nil, sandbox.ErrNotFound
}

func (b backend) Chat(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	emit(chat.Event{Event: chat.Start, ID: "t1", Type: chat.TypeThinking, Text: "Looking."})
	emit(chat.Event{Event: chat.End, ID: "t1", Type: chat.TypeThinking})
	chat.Whole(emit, "c1", chat.TypeToolCall, "", map[string]any{"name": "Bash"})
	emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "Two files: "})
	if last == "fail" {
		return nil, &chat.Error{Code: chat.ErrUpstream, Message: "the model stopped answering"}
	}
	emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "a.txt and b.txt."})
	emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
	return &pipeline.Response{Content: "Two files: a.txt and b.txt.", Usage: chat.Usage{InputTokens: 20, OutputTokens: 8, CacheReadTokens: 5}}, nil
}

// nodeModules finds a node_modules folder holding the openai package:
// AGENTBOX_NODE_MODULES, then .cache/npm/node_modules (make cli), then the
// machine set-up's copy.
func nodeModules() string {
	candidates := []string{
		os.Getenv("AGENTBOX_NODE_MODULES"),
		filepath.Join(testenv.RepoRoot(), ".cache", "npm", "node_modules"),
		"/tmp/setup/npmcli/node_modules",
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(c, "openai", "package.json")); err == nil {
			return c
		}
	}
	return ""
}

func TestOpenAIClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node (apt-get install nodejs)")
	}
	mods := nodeModules()
	if mods == "" {
		testenv.Missing(t, "the openai npm package (make cli, or set AGENTBOX_NODE_MODULES)")
	}

	app := &assistant.App{Config: &assistant.AppConfig{}, Assistants: map[string]*assistant.Assistant{
		"qa":    {ID: "qa", Name: "Q&A"},
		"coder": {ID: "coder", Name: "Coder", Sandbox: &assistant.Sandbox{Command: "claude"}},
	}}
	srv, err := server.New(server.Config{Backend: backend{app}, Tokens: map[string]string{"test-token-1": "alice"}, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})

	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	cmd := exec.CommandContext(cctx, node, "client.mjs")
	cmd.Env = append(os.Environ(),
		"AGENTBOX_URL=http://"+ln.Addr().String(),
		"AGENTBOX_TOKEN=test-token-1",
		"AGENTBOX_NODE_MODULES="+mods,
	)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, out)
	}
	var got struct {
		Models        []string       `json:"models"`
		ChatHeader    string         `json:"chatHeader"`
		Content       string         `json:"content"`
		Reasoning     string         `json:"reasoning"`
		Roles         []string       `json:"roles"`
		Finish        []string       `json:"finish"`
		Usage         map[string]any `json:"usage"`
		HelperContent string         `json:"helperContent"`
		Plain         struct {
			Content string         `json:"content"`
			Object  string         `json:"object"`
			Usage   map[string]any `json:"usage"`
		} `json:"plain"`
		NotFound     map[string]any `json:"notFound"`
		MidStream    map[string]any `json:"midStream"`
		Unauthorized map[string]any `json:"unauthorized"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	check("models", got.Models, []string{"coder", "qa"})
	check("X-Chat-ID", got.ChatHeader, "chat-1")
	check("content", got.Content, "Two files: a.txt and b.txt.")
	check("reasoning", got.Reasoning, "Looking.")
	check("roles", got.Roles, []string{"assistant"})
	check("finish", got.Finish, []string{"stop"})
	check("usage", got.Usage, map[string]any{"prompt_tokens": 25.0, "completion_tokens": 8.0, "total_tokens": 33.0,
		"prompt_tokens_details": map[string]any{"cached_tokens": 5.0}})
	check("stream helper", got.HelperContent, "Two files: a.txt and b.txt.")
	check("plain content", got.Plain.Content, "Two files: a.txt and b.txt.")
	check("plain object", got.Plain.Object, "chat.completion")
	check("plain usage total", got.Plain.Usage["total_tokens"], 33.0)
	check("unknown model", got.NotFound, map[string]any{"isAPIError": true, "status": 404.0, "code": "not_found",
		"type": "not_found_error", "message": `404 unknown assistant "nope": GET /api/assistants lists them`})
	check("mid-stream error", got.MidStream, map[string]any{"isAPIError": true, "thrown": true, "code": "upstream",
		"type": "server_error", "message": "the model stopped answering"})
	check("bad token", got.Unauthorized, map[string]any{"status": 401.0, "name": "AuthenticationError"})
}
