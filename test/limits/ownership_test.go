package limits

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/e2etest"
)

// TestChatBelongsToOneAssistant is issue 17's "the same chat id shares
// history between assistants": a chat stays with the assistant that
// started it. A request naming another assistant for it is refused with
// 409 chat_assistant, naming both, on the native and the OpenAI-compatible
// routes, before anything runs; the owner goes on as before.
func TestChatBelongsToOneAssistant(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	s := start(t, newApp(t, "", ""), "")
	ctx := context.Background()
	openai := func(model, chatID string) (int, string) {
		body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "Hello?"}}})
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2etest.TokenAlice)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Chat-ID", chatID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	refused := func(where string, status int, body, owner, named string) {
		t.Helper()
		if status != 409 || !strings.Contains(body, `"code":"chat_assistant"`) ||
			!strings.Contains(body, `belongs to assistant \"`+owner+`\"`) || !strings.Contains(body, `names \"`+named+`\"`) {
			t.Errorf("%s: %d %s; want 409 chat_assistant naming %s and %s", where, status, body, owner, named)
		}
	}

	// Started on the native route by qa.
	qaChat := e2etest.NewID("own")
	if r := s.Chat(ctx, e2etest.TokenAlice, "qa", qaChat, "What is agentbox?"); r.Status != 200 || r.Final() == nil || r.Final().Error != "" {
		t.Fatalf("qa's first turn: %d %s %+v", r.Status, r.Body, r.Final())
	}
	r := s.Chat(ctx, e2etest.TokenAlice, "coder", qaChat, "Write code.")
	refused("native, coder on qa's chat", r.Status, r.Body, "qa", "coder")
	code, body := openai("coder", qaChat)
	refused("openai, coder on qa's chat", code, body, "qa", "coder")
	if len(e2etest.ChatContainers(t, qaChat)) != 0 {
		t.Error("a refused turn started a sandbox")
	}
	// The owner goes on, on either route.
	if code, body := openai("qa", qaChat); code != 200 || !strings.Contains(body, "agentbox turns a folder") {
		t.Errorf("qa on its own chat (openai): %d %s", code, body)
	}

	// Started on the OpenAI route by qa; coder is refused natively too.
	oaChat := e2etest.NewID("own")
	if code, body := openai("qa", oaChat); code != 200 {
		t.Fatalf("qa over openai: %d %s", code, body)
	}
	r = s.Chat(ctx, e2etest.TokenAlice, "coder", oaChat, "Write code.")
	refused("native, coder on qa's openai chat", r.Status, r.Body, "qa", "coder")

	// Another user's chat with the same id is another chat.
	if r := s.Chat(ctx, e2etest.TokenBob, "qa", qaChat, "Hi."); r.Status != 200 {
		t.Errorf("bob's chat of the same id: %d %s", r.Status, r.Body)
	}
}
