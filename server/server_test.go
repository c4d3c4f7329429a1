package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// apiErr decodes an error response body.
func apiErr(t *testing.T, body string) errorDetail {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	if e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == "" {
		t.Fatalf("error body lacks message/type/code: %s", body)
	}
	return e.Error
}

func TestHealth(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), nil)
	resp, body := do(t, ts, "GET", "/health", "", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("GET /health = %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Error("no X-Request-ID")
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), nil)
	tests := []struct {
		name       string
		auth       string
		wantStatus int
		wantHeader string
	}{
		{"none", "", 401, `Bearer realm="agentbox"`},
		{"wrong token", "Bearer nope", 401, `Bearer realm="agentbox", error="invalid_token"`},
		{"basic scheme", "Basic YWxpY2U6eA==", 401, `Bearer realm="agentbox", error="invalid_token"`},
		{"empty bearer", "Bearer ", 401, `Bearer realm="agentbox", error="invalid_token"`},
		{"token prefix", "Bearer " + tokenAlice[:10], 401, `Bearer realm="agentbox", error="invalid_token"`},
		{"good", "Bearer " + tokenAlice, 200, ""},
		{"scheme case", "bearer " + tokenBob, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hdr := []string{}
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			resp, body := do(t, ts, "GET", "/v1/models", "", "", hdr...)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.wantHeader {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.wantHeader)
			}
			if tt.wantStatus == 401 {
				e := apiErr(t, body)
				if e.Type != "authentication_error" || e.Code != chat.ErrAuth {
					t.Errorf("error = %+v", e)
				}
			}
		})
	}
	// Every route but /health needs a token.
	for _, r := range [][2]string{{"GET", "/v1/models"}, {"POST", "/v1/chat/completions"}, {"GET", "/api/assistants"},
		{"GET", "/api/assistants/qa"}, {"POST", "/api/assistants/qa/chat"}, {"GET", "/api/chats/c1/files"}} {
		resp, _ := do(t, ts, r[0], r[1], "", "")
		if resp.StatusCode != 401 {
			t.Errorf("%s %s without token = %d, want 401", r[0], r[1], resp.StatusCode)
		}
	}
}

func TestNewModes(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	tests := []struct {
		addr    string
		tokens  map[string]string
		dev     bool
		wantErr string
	}{
		{"127.0.0.1:8080", nil, true, ""},
		{"localhost:0", nil, true, ""},
		{"[::1]:8080", nil, true, ""},
		{"", nil, true, ""},
		{":8080", nil, false, "auth.tokens"},
		{"0.0.0.0:8080", nil, false, "auth.tokens"},
		{"192.0.2.1:80", nil, false, "auth.tokens"},
		{":8080", testTokens, false, ""},
		{"127.0.0.1:1", map[string]string{"t": "../etc"}, false, "invalid id"},
	}
	for _, tt := range tests {
		s, err := New(Config{Backend: fb, Addr: tt.addr, Tokens: tt.tokens, Logger: quietLogger()})
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New(%q) error = %v, want it to mention %q", tt.addr, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q): %v", tt.addr, err)
			continue
		}
		if s.DevMode() != tt.dev {
			t.Errorf("New(%q).DevMode() = %v", tt.addr, s.DevMode())
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a backend succeeded")
	}
}

func TestDevModeUsers(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, func(c *Config) { c.Tokens = nil })
	body := `{"model":"qa","messages":[{"role":"user","content":"hi"}]}`
	resp, out := do(t, ts, "POST", "/v1/chat/completions", "", body)
	if resp.StatusCode != 200 {
		t.Fatalf("dev request = %d %s", resp.StatusCode, out)
	}
	if u := fb.lastCall(t).UserID; u != DevUser {
		t.Errorf("user = %q, want %q", u, DevUser)
	}
	do(t, ts, "POST", "/v1/chat/completions", "", body, "X-User-ID", "carol")
	if u := fb.lastCall(t).UserID; u != "carol" {
		t.Errorf("user = %q, want carol", u)
	}
	resp, out = do(t, ts, "POST", "/v1/chat/completions", "", body, "X-User-ID", "../root")
	if resp.StatusCode != 400 || !strings.Contains(out, "X-User-ID") {
		t.Errorf("bad X-User-ID = %d %s", resp.StatusCode, out)
	}
}

func TestModelsAndAssistants(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), nil)

	resp, body := do(t, ts, "GET", "/v1/models", tokenAlice, "")
	var models struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &models); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models = %d %s (%v)", resp.StatusCode, body, err)
	}
	if models.Object != "list" || len(models.Data) != 2 || models.Data[0].ID != "coder" || models.Data[1].ID != "qa" ||
		models.Data[0].Object != "model" || models.Data[0].OwnedBy != "agentbox" || models.Data[0].Created == 0 {
		t.Errorf("models = %+v", models)
	}

	resp, body = do(t, ts, "GET", "/v1/models/qa", tokenAlice, "")
	var one model
	if err := json.Unmarshal([]byte(body), &one); err != nil || resp.StatusCode != 200 || one != models.Data[1] {
		t.Errorf("GET /v1/models/qa = %d %s, want %+v", resp.StatusCode, body, models.Data[1])
	}
	resp, body = do(t, ts, "GET", "/v1/models/gpt-4o", tokenAlice, "")
	if e := apiErrFull(t, body); resp.StatusCode != 404 || e.Type != "not_found_error" || !strings.Contains(e.Message, `"gpt-4o"`) {
		t.Errorf("GET /v1/models/gpt-4o = %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, ts, "GET", "/v1/models/qa", "", ""); resp.StatusCode != 401 {
		t.Errorf("GET /v1/models/qa without a token = %d", resp.StatusCode)
	}

	resp, body = do(t, ts, "GET", "/api/assistants", tokenAlice, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/assistants = %d %s", resp.StatusCode, body)
	}
	want := `{"object":"list","data":[` +
		`{"id":"coder","name":"Coder","sandboxed":true,"command":"claude","skills":[{"name":"bash-helper","description":""},{"name":"code-review","description":"Review a change."}],"available":true},` +
		`{"id":"qa","name":"Q\u0026A","description":"Answers questions","sandboxed":false,"skills":[],"available":true}]}` + "\n"
	if body != want {
		t.Errorf("GET /api/assistants =\n%s\nwant\n%s", body, want)
	}
	for _, secret := range []string{"sk-secret-key", "api.example", "openai.gpt", "image"} {
		if strings.Contains(body, secret) {
			t.Errorf("assistant listing leaks %q", secret)
		}
	}

	resp, body = do(t, ts, "GET", "/api/assistants/coder", tokenBob, "")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, `{"id":"coder","name":"Coder","sandboxed":true`) {
		t.Errorf("GET /api/assistants/coder = %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, ts, "GET", "/api/assistants/nope", tokenBob, "")
	if resp.StatusCode != 404 || apiErr(t, body).Code != CodeNotFound || !strings.Contains(body, `\"nope\"`) {
		t.Errorf("GET unknown assistant = %d %s", resp.StatusCode, body)
	}
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), nil)
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/chat/completions", 405, "POST"},
		{"DELETE", "/api/assistants/qa", 405, "GET, HEAD"},
		{"PUT", "/api/assistants/qa/chat", 405, "POST"},
		{"POST", "/health", 405, "GET, HEAD"},
		{"GET", "/nope", 404, ""},
		{"GET", "/v1/completions", 404, ""},
	}
	for _, tt := range tests {
		resp, body := do(t, ts, tt.method, tt.path, tokenAlice, "")
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
			continue
		}
		apiErr(t, body)
		if got := resp.Header.Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.path, got, tt.allow)
		}
	}
}

func TestCompletionRequestErrors(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, func(c *Config) { c.BodyLimit = 4096 })
	big := `{"model":"qa","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	tests := []struct {
		name   string
		body   string
		hdr    []string
		status int
		want   string
	}{
		{"too large", big, nil, 413, "over the limit of 4.0 KB (4096 bytes); images count as base64, 4/3 of their size: send fewer or smaller images, or raise the server's body limit"},
		{"syntax", "{\n  \"model\": \"qa\",\n  \"messages\": [}\n", nil, 400, "invalid JSON at line 3, column 16"},
		{"truncated", `{"model":"qa"`, nil, 400, "unexpected end of input"},
		{"empty body", ``, nil, 400, "request body is empty"},
		{"trailing", `{"model":"qa","messages":[{"role":"user","content":"hi"}]} {}`, nil, 400, "unexpected data after the JSON object"},
		{"wrong type", `{"model":"qa","messages":"hi"}`, nil, 400, `field \"messages\" must be an array`},
		{"stream type", `{"model":"qa","stream":"yes","messages":[]}`, nil, 400, `field \"stream\" must be a boolean`},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, nil, 400, "model: missing"},
		{"unknown model", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}]}`, nil, 404, `unknown assistant \"gpt-4\"`},
		{"no messages", `{"model":"qa"}`, nil, 400, "messages: missing or empty"},
		{"empty messages", `{"model":"qa","messages":[]}`, nil, 400, "messages: missing or empty"},
		{"no role", `{"model":"qa","messages":[{"content":"hi"}]}`, nil, 400, "messages[0].role: missing"},
		{"bad role", `{"model":"qa","messages":[{"role":"function","content":"hi"}]}`, nil, 400, `messages[0].role: \"function\" is not supported`},
		{"empty user", `{"model":"qa","messages":[{"role":"user","content":""}]}`, nil, 400, "messages[0].content: empty"},
		{"image address", `{"model":"qa","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, nil, 400, `messages[0].content[1].image_url.url: want a data: URL`},
		{"image not an image", `{"model":"qa","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,aGVsbG8="}}]}]}`, nil, 400, `messages[0].content[0].image_url.url: not an image: want PNG, JPEG, GIF or WebP`},
		{"image detail", `{"model":"qa","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x.example/a.png","detail":"max"}}]}]}`, nil, 400, `messages[0].content[0].image_url.detail: \"max\" is not one of auto, low, high`},
		{"image from assistant", `{"model":"qa","messages":[{"role":"assistant","content":[{"type":"image_url","image_url":"https://x.example/a.png"}]},{"role":"user","content":"hi"}]}`, nil, 400, `messages[0].content: images go in user messages only`},
		{"audio part", `{"model":"qa","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, nil, 400, `messages[0].content[0]: content part type \"input_audio\" is not supported: only text and image_url parts are`},
		{"part no text", `{"model":"qa","messages":[{"role":"user","content":[{"type":"text"}]}]}`, nil, 400, "messages[0].content[0].text is missing"},
		{"content number", `{"model":"qa","messages":[{"role":"user","content":5}]}`, nil, 400, "messages[0].content must be a string or an array of content parts"},
		{"n=2", `{"model":"qa","n":2,"messages":[{"role":"user","content":"hi"}]}`, nil, 400, "n: 2 is not supported"},
		{"bad chat id", `{"model":"qa","chat_id":"../x","messages":[{"role":"user","content":"hi"}]}`, nil, 400, "chat id"},
		{"bad chat header", `{"model":"qa","messages":[{"role":"user","content":"hi"}]}`, []string{"X-Chat-ID", ".hidden"}, 400, "chat id"},
		{"chat id conflict", `{"model":"qa","chat_id":"a","messages":[{"role":"user","content":"hi"}]}`, []string{"X-Chat-ID", "b"}, 400, "differ"},
		// A page of another site sends these without asking first (CORS
		// "simple" requests); JSON it cannot send.
		{"multipart", `{"model":"qa"}`, []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, `Content-Type \"multipart/form-data; boundary=x\" is not accepted`},
		{"form encoded", `{"model":"qa"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "send the JSON body with Content-Type: application/json"},
		{"text/plain", `{"model":"qa"}`, []string{"Content-Type", "text/plain;charset=UTF-8"}, 415, "is not accepted"},
		{"no content type", `{"model":"qa"}`, []string{"Content-Type", ""}, 415, "a body without Content-Type is not accepted"},
		{"json with charset", `{"model":"qa"}`, []string{"Content-Type", "Application/JSON; charset=utf-8"}, 400, "messages: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, tt.body, tt.hdr...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if !strings.Contains(body, tt.want) {
				t.Errorf("body %s does not say %q", body, tt.want)
			}
			e := apiErr(t, body)
			if tt.status == 404 && e.Type != "not_found_error" || tt.status == 400 && e.Type != "invalid_request_error" {
				t.Errorf("type = %q", e.Type)
			}
		})
	}
	if n := fb.numCalls(); n != 0 {
		t.Errorf("backend ran %d turns for bad requests", n)
	}
}

func TestCompletionNonStream(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "t1", Type: chat.TypeThinking, Text: "hmm"})
		emit(chat.Event{Event: chat.End, ID: "t1", Type: chat.TypeThinking})
		chat.Whole(emit, "c1", chat.TypeToolCall, "", map[string]any{"name": "Bash"})
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "Hi "})
		emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "there"})
		emit(chat.Event{Event: chat.Done, Final: &chat.Final{}})
		return &pipeline.Response{Usage: chat.Usage{InputTokens: 7, OutputTokens: 3, CacheReadTokens: 100}}, nil
	}
	ts := startServer(t, fb, nil)
	body := `{"model":"qa","user":"mallory","temperature":0.2,"tools":[],"stream_options":null,
	  "messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`
	resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, body, "Accept-Language", "de-DE,de;q=0.9")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	var c completion
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || c.Model != "qa" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Created == 0 || len(c.Choices) != 1 {
		t.Errorf("completion = %s", out)
	}
	m := c.Choices[0]
	if m.Message.Role != "assistant" || m.Message.Content == nil || *m.Message.Content != "Hi there" || m.Message.ReasoningContent != "hmm" || m.FinishReason != "stop" {
		t.Errorf("choice = %+v", m)
	}
	if u := c.Usage; u.PromptTokens != 107 || u.CompletionTokens != 3 || u.TotalTokens != 110 || u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 100 {
		t.Errorf("usage = %+v", c.Usage)
	}
	req := fb.lastCall(t)
	if req.UserID != "alice" {
		t.Errorf("user = %q: the body's user field must not choose the user", req.UserID)
	}
	if temp := 0.2; req.AssistantID != "qa" || req.Locale != "de-DE" ||
		!reflect.DeepEqual(req.Options, chat.ModelOptions{Temperature: &temp, User: "mallory", Tools: json.RawMessage("[]")}) {
		t.Errorf("request = %+v", req)
	}
	wantMsgs := []chat.Message{{Role: "developer", Content: "be brief"}, {Role: "user", Content: "a\nb"}}
	if !reflect.DeepEqual(req.Messages, wantMsgs) {
		t.Errorf("messages = %+v", req.Messages)
	}
	if got := resp.Header.Get("X-Chat-ID"); got != req.ChatID || !strings.HasPrefix(got, "chat-") {
		t.Errorf("X-Chat-ID = %q, chat id = %q", got, req.ChatID)
	}

	// A chat id from the header or the body is used and echoed.
	for _, tc := range []struct{ body, hdr string }{
		{`{"model":"qa","chat_id":"c-body","messages":[{"role":"user","content":"x"}]}`, ""},
		{`{"model":"qa","messages":[{"role":"user","content":"x"}]}`, "c-body"},
	} {
		hdr := []string{}
		if tc.hdr != "" {
			hdr = []string{"X-Chat-ID", tc.hdr}
		}
		resp, _ := do(t, ts, "POST", "/v1/chat/completions", tokenBob, tc.body, hdr...)
		if got := fb.lastCall(t); got.ChatID != "c-body" || got.UserID != "bob" || resp.Header.Get("X-Chat-ID") != "c-body" {
			t.Errorf("chat id = %q user %q header %q", got.ChatID, got.UserID, resp.Header.Get("X-Chat-ID"))
		}
	}
}

func TestCompletionNextHookContent(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		return &pipeline.Response{Content: "replaced", Data: "replaced"}, nil
	}
	ts := startServer(t, fb, nil)
	_, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(out, `"content":"replaced"`) {
		t.Errorf("non-stream = %s", out)
	}
	_, out = do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(out, `"delta":{"content":"replaced"}`) {
		t.Errorf("stream = %s", out)
	}
}

// normalize replaces the ids and timestamps that change on every run.
func normalize(s string) string {
	s = regexp.MustCompile(`chatcmpl-[0-9a-f]+`).ReplaceAllString(s, "chatcmpl-ID")
	s = regexp.MustCompile(`"created":\d+`).ReplaceAllString(s, `"created":0`)
	s = regexp.MustCompile(`id: r-[0-9a-f]+\.`).ReplaceAllString(s, "id: r-TURN.")
	return s
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./server -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// scriptedTurn emits a turn with every kind of event.
func scriptedTurn(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	chat.Whole(emit, "s1", chat.TypeSession, "", map[string]any{"session_id": "sess-1", "model": "claude"})
	emit(chat.Event{Event: chat.Start, ID: "t1", Type: chat.TypeThinking})
	emit(chat.Event{Event: chat.Delta, ID: "t1", Type: chat.TypeThinking, Text: "Let me "})
	emit(chat.Event{Event: chat.Delta, ID: "t1", Type: chat.TypeThinking, Text: "look."})
	emit(chat.Event{Event: chat.End, ID: "t1", Type: chat.TypeThinking})
	emit(chat.Event{Event: chat.Start, ID: "c1", Type: chat.TypeToolCall, Props: map[string]any{"name": "Bash", "id": "toolu_1"}})
	emit(chat.Event{Event: chat.End, ID: "c1", Type: chat.TypeToolCall, Props: map[string]any{"input": json.RawMessage(`{"command":"ls"}`)}})
	chat.Whole(emit, "r1", chat.TypeToolResult, "", map[string]any{"tool_call_id": "toolu_1", "content": "a.txt\n", "is_error": false})
	emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "I see "})
	emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "a.txt."})
	emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
	chat.Notice(emit, "n1", "note", "saved")
	emit(chat.Event{Event: chat.Done, Final: &chat.Final{SessionID: "sess-1", Content: "I see a.txt.",
		Usage: chat.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 3, Turns: 2}}})
	return &pipeline.Response{Content: "I see a.txt.", SessionID: "sess-1", Usage: chat.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 3, Turns: 2}}, nil
}

func TestCompletionStreamGolden(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = scriptedTurn
	ts := startServer(t, fb, nil)
	for _, tc := range []struct{ name, body string }{
		{"openai_stream.golden.txt", `{"model":"coder","stream":true,"messages":[{"role":"user","content":"ls"}]}`},
		{"openai_stream_usage.golden.txt", `{"model":"coder","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"ls"}]}`},
	} {
		resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, tc.body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, out)
		}
		for h, want := range map[string]string{"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
		golden(t, tc.name, normalize(out))
	}
}

func TestNativeStreamGolden(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = scriptedTurn
	ts := startServer(t, fb, nil)
	resp, out := do(t, ts, "POST", "/api/assistants/coder/chat", tokenAlice,
		`{"chat_id":"c1","message":"ls","locale":"en","metadata":{"k":"v"},"options":{"max_tokens":3}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("status %d %v: %s", resp.StatusCode, resp.Header, out)
	}
	golden(t, "native_stream.golden.txt", normalize(out))
	req := fb.lastCall(t)
	if req.UserID != "alice" || req.ChatID != "c1" || req.AssistantID != "coder" || req.Locale != "en" ||
		req.Metadata["k"] != "v" || req.Options.MaxTokens == nil || *req.Options.MaxTokens != 3 ||
		!reflect.DeepEqual(req.Messages, []chat.Message{{Role: "user", Content: "ls"}}) {
		t.Errorf("request = %+v", req)
	}
	if n := strings.Count(out, "event: done"); n != 1 {
		t.Errorf("%d done events", n)
	}
}

func TestNativeRequests(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	ok := []struct {
		body string
		want []chat.Message
	}{
		{`{"message":"hi"}`, []chat.Message{{Role: "user", Content: "hi"}}},
		{`{"message":{"role":"user","content":[{"type":"text","text":"hi"}]}}`, []chat.Message{{Role: "user", Content: "hi"}}},
		{`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`, []chat.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}},
	}
	for _, tt := range ok {
		resp, out := do(t, ts, "POST", "/api/assistants/qa/chat", tokenBob, tt.body)
		if resp.StatusCode != 200 || !strings.HasSuffix(out, "\n\n") || !strings.Contains(out, "event: done\n") {
			t.Errorf("%s = %d %s", tt.body, resp.StatusCode, out)
			continue
		}
		got := fb.lastCall(t)
		if !reflect.DeepEqual(got.Messages, tt.want) || got.UserID != "bob" || resp.Header.Get("X-Chat-ID") != got.ChatID {
			t.Errorf("%s: request %+v", tt.body, got)
		}
	}
	bad := []struct {
		path, body string
		status     int
		want       string
	}{
		{"/api/assistants/qa/chat", `{"message":"hi","user":"alice"}`, 400, `unknown field \"user\"`},
		{"/api/assistants/qa/chat", `{"message":"hi","messages":[{"role":"user","content":"x"}]}`, 400, "not both"},
		{"/api/assistants/qa/chat", `{"chat_id":"c"}`, 400, "messages is missing"},
		{"/api/assistants/qa/chat", `{"messages":[]}`, 400, "messages: missing or empty"},
		{"/api/assistants/qa/chat", `{"message":""}`, 400, "message is empty"},
		{"/api/assistants/qa/chat", `{"message":42}`, 400, "message must be a string or a message object"},
		{"/api/assistants/qa/chat", `{"message":{"role":"user","content":"x","extra":1}}`, 400, "unknown field"},
		{"/api/assistants/qa/chat", `{"message":"x","chat_id":"a b"}`, 400, "chat id"},
		{"/api/assistants/qa/chat", `{"message":"x"`, 400, "line 1, column 14"},
		{"/api/assistants/none/chat", `{"message":"x"}`, 404, `unknown assistant \"none\"`},
	}
	for _, tt := range bad {
		resp, out := do(t, ts, "POST", tt.path, tokenBob, tt.body)
		if resp.StatusCode != tt.status || !strings.Contains(out, tt.want) {
			t.Errorf("%s %s = %d %s, want %d %q", tt.path, tt.body, resp.StatusCode, out, tt.status, tt.want)
		}
	}
}

// failing returns a Chat that emits pre events, then (like the pipeline)
// an error event and done, and fails with err.
func failing(err *chat.Error, pre ...chat.Event) func(context.Context, *pipeline.Request, chat.EmitFunc) (*pipeline.Response, error) {
	return func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		for _, e := range pre {
			emit(e)
		}
		chat.ErrorEvent(emit, "e1", err.Code, err.Message)
		emit(chat.Event{Event: chat.Done, Final: &chat.Final{Error: err.Code}})
		return nil, err
	}
}

func TestBackendErrors(t *testing.T) {
	t.Parallel()
	rate := &chat.Error{Code: chat.ErrRateLimit, Message: "the model is rate limited: retry later"}
	text := chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "partial"}
	tests := []struct {
		name     string
		path     string
		body     string
		chat     func(context.Context, *pipeline.Request, chat.EmitFunc) (*pipeline.Response, error)
		status   int
		contains []string
	}{
		{"openai before output", "/v1/chat/completions", `{"model":"qa","stream":true,"messages":[{"role":"user","content":"x"}]}`,
			failing(rate), 429, []string{`"type":"rate_limit_error"`, `"code":"rate_limit"`, "retry later"}},
		{"openai non-stream", "/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":"x"}]}`,
			failing(rate, text), 429, []string{`"code":"rate_limit"`}},
		{"openai after output", "/v1/chat/completions", `{"model":"qa","stream":true,"messages":[{"role":"user","content":"x"}]}`,
			failing(rate, text), 200, []string{`"content":"partial"`, "data: {\"error\":{\"message\":\"the model is rate limited: retry later\",\"type\":\"rate_limit_error\",\"param\":null,\"code\":\"rate_limit\"}}\n\ndata: [DONE]\n\n"}},
		{"native before output", "/api/assistants/qa/chat", `{"message":"x"}`,
			failing(rate), 429, []string{`"code":"rate_limit"`}},
		{"native after output", "/api/assistants/qa/chat", `{"message":"x"}`,
			failing(rate, text), 200, []string{"event: start\ndata: {\"event\":\"start\",\"id\":\"e1\",\"type\":\"error\"", `"done":{"usage":{"input_tokens":0,"output_tokens":0},"error":"rate_limit"}`}},
		{"native plain error", "/api/assistants/qa/chat", `{"message":"x"}`,
			func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
				emit(text)
				return nil, errors.New("db is on fire")
			}, 200, []string{`"type":"error","text":"internal error"`, `"error":"internal"`}},
		{"internal hidden", "/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":"x"}]}`,
			func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
				return nil, errors.New("db is on fire")
			}, 500, []string{`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal"}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fb := newFake(t)
			fb.chat = tt.chat
			ts := startServer(t, fb, nil)
			resp, out := do(t, ts, "POST", tt.path, tokenAlice, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, out)
			}
			for _, c := range tt.contains {
				if !strings.Contains(out, c) {
					t.Errorf("body lacks %q:\n%s", c, out)
				}
			}
			if strings.Contains(out, "fire") {
				t.Errorf("internal error details leaked: %s", out)
			}
			if strings.HasPrefix(tt.path, "/api/") && tt.status == 200 {
				if n := strings.Count(out, "event: done"); n != 1 {
					t.Errorf("%d done events", n)
				}
				if n := strings.Count(out, `"type":"error","text"`); n != 1 {
					t.Errorf("%d error messages:\n%s", n, out)
				}
			}
		})
	}
}

// TestDisconnectCancels: the client going away mid-stream cancels the
// turn's context, on both streaming endpoints.
func TestDisconnectCancels(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/api/assistants/coder/chat", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			fb := newFake(t)
			canceled := make(chan error, 1)
			fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
				emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "working"})
				select {
				case <-ctx.Done():
					canceled <- ctx.Err()
					return nil, ctx.Err()
				case <-time.After(10 * time.Second):
					canceled <- nil
					return &pipeline.Response{}, nil
				}
			}
			ts := startServer(t, fb, nil)
			body := `{"message":"go"}`
			if strings.HasPrefix(path, "/v1") {
				body = `{"model":"coder","stream":true,"messages":[{"role":"user","content":"go"}]}`
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tokenAlice)
			req.Header.Set("Content-Type", "application/json")
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("first line %q %v (status %d)", line, err, resp.StatusCode)
			}
			cancel() // the client goes away
			select {
			case err := <-canceled:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("backend ctx ended with %v, want context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("backend context not canceled after the client went away")
			}
		})
	}
}

// TestResponseEndsWithDone: a native turn's response ends with its done
// event while the turn still tears down (its sandbox removed, its chat
// released): the client does not wait for that, the turn reports itself
// ended, and the client's leaving does not cancel the teardown.
func TestResponseEndsWithDone(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	release, torn := make(chan struct{}), make(chan error, 1)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "Done."})
		emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
		emit(chat.Event{Event: chat.Done, Final: &chat.Final{Content: "Done."}})
		<-release // the teardown
		torn <- ctx.Err()
		return &pipeline.Response{Content: "Done."}, nil
	}
	srv, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	resp, out := do(t, ts, "POST", "/api/assistants/coder/chat", tokenAlice, `{"chat_id":"c1","message":"go"}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"event":"done"`) || strings.Count(out, `"event":"done"`) != 1 {
		t.Fatalf("status %d, want the answer and one done event:\n%s", resp.StatusCode, out)
	}
	select {
	case <-torn:
		t.Fatal("the response waited for the turn's teardown")
	default:
	}
	// The turn has ended for its client.
	if st := srv.runs.find("alice", "c1", "").state(); st.Running || st.Ended == nil {
		t.Errorf("turn after the done event: %+v; want it ended", st)
	}
	close(release)
	select {
	case err := <-torn:
		if err != nil {
			t.Errorf("the teardown's context ended with %v after the client went away", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the turn did not finish its teardown")
	}
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		time.Sleep(150 * time.Millisecond) // a slow sandbox start: no events yet
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "hi"})
		return &pipeline.Response{}, nil
	}
	ts := startServer(t, fb, func(c *Config) { c.Heartbeat = 30 * time.Millisecond })
	for _, tc := range []struct{ path, body, first string }{
		{"/api/assistants/qa/chat", `{"message":"x"}`, ": ping\n\n"},
		{"/v1/chat/completions", `{"model":"qa","stream":true,"messages":[{"role":"user","content":"x"}]}`, `data: {"id":"chatcmpl-`},
	} {
		resp, out := do(t, ts, "POST", tc.path, tokenAlice, tc.body)
		if resp.StatusCode != 200 || !strings.HasPrefix(out, tc.first) || !strings.Contains(out, ": ping\n\n") {
			t.Errorf("%s: no heartbeat before the first event:\n%s", tc.path, out)
		}
	}
}

// TestUsersIsolated: two tokens, two users; each request reaches the
// backend as its token's user, and one user's chat files are not the
// other's.
func TestUsersIsolated(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	if err := os.MkdirAll(filepath.Join(fb.root, "alice", "c1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fb.root, "alice", "c1", "secret.txt"), []byte("alice's"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, out := do(t, ts, "GET", "/api/chats/c1/files?path=secret.txt", tokenAlice, "")
	if resp.StatusCode != 200 || out != "alice's" {
		t.Fatalf("owner read = %d %q", resp.StatusCode, out)
	}
	for _, p := range []string{"secret.txt", "", "../../alice/c1/secret.txt", "/workspace/secret.txt"} {
		resp, out := do(t, ts, "GET", "/api/chats/c1/files?path="+p, tokenBob, "")
		if resp.StatusCode == 200 || strings.Contains(out, "alice's") {
			t.Errorf("bob read alice's chat (%q): %d %s", p, resp.StatusCode, out)
		}
	}
	for _, tok := range []string{tokenAlice, tokenBob} {
		do(t, ts, "POST", "/api/assistants/qa/chat", tok, `{"chat_id":"c1","message":"x"}`, "X-User-ID", "alice")
		if got := fb.lastCall(t); got.UserID != testTokens[tok] {
			t.Errorf("token of %s ran as %q", testTokens[tok], got.UserID)
		}
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	ws := filepath.Join(fb.root, "alice", "c1")
	outside := filepath.Join(fb.root, "outside.txt")
	for p, content := range map[string]string{"src/main.go": "package main\n", "README.md": "# hi\n", "notes": "plain text here\n",
		"blob": "\x00\x01\x02", "page.html": "<script>alert(1)</script>"} {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", filepath.Join(ws, "srclink")); err != nil {
		t.Fatal(err)
	}

	resp, out := do(t, ts, "GET", "/api/chats/c1/files", tokenAlice, "")
	var l fileListing
	if err := json.Unmarshal([]byte(out), &l); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list = %d %s", resp.StatusCode, out)
	}
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name)
	}
	if l.Path != "." || strings.Join(names, ",") != "README.md,blob,escape,notes,page.html,src,srclink" {
		t.Errorf("listing = %s", out)
	}

	tests := []struct {
		path   string
		status int
		ctype  string
		body   string
	}{
		{"src", 200, "application/json", `"name":"main.go"`},
		{"/workspace/src/", 200, "application/json", `"path":"src"`},
		{"srclink/main.go", 200, "text/x-go; charset=utf-8", "package main\n"},
		{"src/main.go", 200, "text/x-go; charset=utf-8", "package main\n"},
		{"README.md", 200, "text/markdown; charset=utf-8", "# hi\n"},
		{"notes", 200, "text/plain; charset=utf-8", "plain text here\n"},
		{"blob", 200, "application/octet-stream", "\x00\x01\x02"},
		{"page.html", 200, "text/html; charset=utf-8", "<script>"},
		{"missing.txt", 404, "application/json", "missing.txt"},
		{"src/main.go/x", 404, "application/json", "not_found"},
		{"../outside.txt", 400, "application/json", "outside the chat's workspace"},
		{"/etc/passwd", 400, "application/json", "outside the chat's workspace"},
		{"escape", 400, "application/json", "outside the chat's workspace"},
	}
	for _, tt := range tests {
		resp, out := do(t, ts, "GET", "/api/chats/c1/files?path="+tt.path, tokenAlice, "")
		if resp.StatusCode != tt.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.ctype) || !strings.Contains(out, tt.body) {
			t.Errorf("GET %q = %d %q %q, want %d %q containing %q", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), out, tt.status, tt.ctype, tt.body)
		}
		if tt.status == 200 && tt.ctype != "application/json" {
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
				t.Errorf("GET %q: CSP = %q", tt.path, csp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %q: no nosniff", tt.path)
			}
		}
		if strings.Contains(out, "host file") {
			t.Errorf("GET %q leaked a host file", tt.path)
		}
	}
	// A range request reads part of a file.
	resp, out = do(t, ts, "GET", "/api/chats/c1/files?path=notes", tokenAlice, "", "Range", "bytes=0-4")
	if resp.StatusCode != 206 || out != "plain" {
		t.Errorf("range = %d %q", resp.StatusCode, out)
	}
	// Bad chat ids and a chat without a workspace.
	for _, tc := range []struct {
		chat   string
		status int
	}{{".hidden", 400}, {"c2", 404}, {"a@b", 404}} {
		resp, out := do(t, ts, "GET", "/api/chats/"+tc.chat+"/files", tokenAlice, "")
		if resp.StatusCode != tc.status {
			t.Errorf("chat %q = %d %s, want %d", tc.chat, resp.StatusCode, out, tc.status)
		}
	}
}

func TestFilesFIFO(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	ws := filepath.Join(fb.root, "alice", "c1")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(filepath.Join(ws, "pipe")); err != nil {
		t.Fatal(err)
	}
	resp, out := do(t, ts, "GET", "/api/chats/c1/files?path=pipe", tokenAlice, "")
	if resp.StatusCode != 400 || !strings.Contains(out, "not a regular file") {
		t.Errorf("fifo = %d %s", resp.StatusCode, out)
	}
}

// TestServeDrains: a shutdown stops accepting, lets a running stream
// finish, and returns.
func TestServeDrains(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	release := make(chan struct{})
	started := make(chan struct{})
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "a"})
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "b"})
		return &pipeline.Response{Content: "ab"}, nil
	}
	s, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	url := "http://" + ln.Addr().String()
	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/api/assistants/qa/chat", strings.NewReader(`{"message":"x"}`))
		req.Header.Set("Authorization", "Bearer "+tokenAlice)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
		got <- sb.String()
	}()
	<-started
	stop() // SIGTERM
	// The listener closes soon after the signal, while the stream is
	// still held open.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Error("still accepting connections while draining")
			break
		}
	}
	close(release)
	out := <-got
	if !strings.Contains(out, `"text":"b"`) || !strings.Contains(out, "event: done") {
		t.Errorf("drained stream incomplete: %s", out)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestServeDrainTimeout: a stream still running after the drain timeout
// is canceled, and Serve waits for its handler.
func TestServeDrainTimeout(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	started := make(chan struct{})
	ended := make(chan error, 1)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "a"})
		close(started)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // sandbox removal
		ended <- ctx.Err()
		return nil, ctx.Err()
	}
	s, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger(), DrainTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	go func() {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/api/assistants/qa/chat", strings.NewReader(`{"message":"x"}`))
		req.Header.Set("Authorization", "Bearer "+tokenAlice)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			_, _ = bufio.NewReader(resp.Body).WriteTo(&strings.Builder{})
			resp.Body.Close()
		}
	}()
	<-started
	t0 := time.Now()
	stop()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("turn ended with %v", err)
		}
	default:
		t.Error("Serve returned before the canceled turn finished")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
}

func TestServeDevModeRefusesPublicListener(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Backend: newFake(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "non-loopback") {
		t.Errorf("Serve on 0.0.0.0 in dev mode = %v", err)
	}
}

// TestAssistantMetadata: package.yao's metadata is shown by the assistants
// API, and name, description and placeholder are translated for the
// request's locale.
func TestAssistantMetadata(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	yes := true
	f.app.Assistants["yao"] = &assistant.Assistant{ID: "yao", Name: "{{name}}", Description: "{{description}}", Connector: "openai.gpt",
		ConnectorOptions: &assistant.ConnectorChoice{Optional: &yes, Connectors: []string{"openai.gpt"}},
		Locales: map[string]map[string]string{
			"en": {"name": "Helper", "description": "Helps", "chat.title": "New chat"},
			"zh": {"name": "助手", "description": "帮助", "chat.title": "新对话"},
		},
		Meta: assistant.Metadata{Type: "worker", Avatar: "/a.png", Tags: []string{"Test"}, Sort: 3, Public: true, Mentionable: true,
			Placeholder: &assistant.Placeholder{Title: "{{chat.title}}", Prompts: []string{"Hi {{name}}"}}, Modes: []string{"chat"}}}
	ts := startServer(t, f, nil)
	_, body := do(t, ts, "GET", "/api/assistants/yao", tokenAlice, "")
	want := `{"id":"yao","name":"Helper","description":"Helps","sandboxed":false,"skills":[],"connectors":["openai.gpt"],"available":true,` +
		`"type":"worker","avatar":"/a.png","tags":["Test"],"sort":3,"public":true,"mentionable":true,` +
		`"placeholder":{"title":"New chat","prompts":["Hi Helper"]},"modes":["chat"]}` + "\n"
	if body != want {
		t.Errorf("GET /api/assistants/yao =\n%s\nwant\n%s", body, want)
	}
	_, body = do(t, ts, "GET", "/api/assistants/yao?locale=zh-CN", tokenAlice, "")
	if !strings.Contains(body, `"name":"助手"`) || !strings.Contains(body, `"title":"新对话"`) {
		t.Errorf("zh-CN: %s", body)
	}
}

// TestTeams: a request's team is its credentials' (the bearer token's
// team, or X-Team-ID in development mode, beside X-User-ID) on every
// chat API; nothing in a request's body or headers chooses it otherwise.
func TestTeams(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, func(c *Config) { c.Teams = map[string]string{tokenAlice: "acme"} })
	calls := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":"hi"}]}`},
		{"/api/assistants/qa/chat", `{"chat_id":"c1","message":"x"}`},
		{"/v1/responses", `{"model":"qa","input":"hi"}`},
	}
	for _, c := range calls {
		do(t, ts, "POST", c.path, tokenAlice, c.body, "X-Team-ID", "other")
		if got := fb.lastCall(t); got.UserID != "alice" || got.TeamID != "acme" {
			t.Errorf("%s with alice's token: user %q team %q, want alice of acme", c.path, got.UserID, got.TeamID)
		}
		do(t, ts, "POST", c.path, tokenBob, c.body, "X-Team-ID", "acme")
		if got := fb.lastCall(t); got.UserID != "bob" || got.TeamID != "" {
			t.Errorf("%s with bob's token: user %q team %q, want bob of no team", c.path, got.UserID, got.TeamID)
		}
	}

	dev := newFake(t)
	ds := startServer(t, dev, func(c *Config) { c.Tokens = nil })
	do(t, ds, "POST", calls[0].path, "", calls[0].body, "X-User-ID", "carol", "X-Team-ID", "acme")
	if got := dev.lastCall(t); got.UserID != "carol" || got.TeamID != "acme" {
		t.Errorf("dev mode: user %q team %q, want carol of acme", got.UserID, got.TeamID)
	}
	resp, out := do(t, ds, "POST", calls[0].path, "", calls[0].body, "X-Team-ID", "../x")
	if resp.StatusCode != 400 || !strings.Contains(out, "X-Team-ID") {
		t.Errorf("bad X-Team-ID = %d %s", resp.StatusCode, out)
	}
}
