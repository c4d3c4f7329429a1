package limits

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
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
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokenAlice)
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
	qaChat := uniq("own")
	if r := s.chat(ctx, tokenAlice, "qa", qaChat, "What is agentbox?"); r.status != 200 || r.final() == nil || r.final().Error != "" {
		t.Fatalf("qa's first turn: %d %s %+v", r.status, r.body, r.final())
	}
	r := s.chat(ctx, tokenAlice, "coder", qaChat, "Write code.")
	refused("native, coder on qa's chat", r.status, r.body, "qa", "coder")
	code, body := openai("coder", qaChat)
	refused("openai, coder on qa's chat", code, body, "qa", "coder")
	if len(chatContainers(t, qaChat)) != 0 {
		t.Error("a refused turn started a sandbox")
	}
	// The owner goes on, on either route.
	if code, body := openai("qa", qaChat); code != 200 || !strings.Contains(body, "agentbox turns a folder") {
		t.Errorf("qa on its own chat (openai): %d %s", code, body)
	}

	// Started on the OpenAI route by qa; coder is refused natively too.
	oaChat := uniq("own")
	if code, body := openai("qa", oaChat); code != 200 {
		t.Fatalf("qa over openai: %d %s", code, body)
	}
	r = s.chat(ctx, tokenAlice, "coder", oaChat, "Write code.")
	refused("native, coder on qa's openai chat", r.status, r.body, "qa", "coder")

	// Another user's chat with the same id is another chat.
	if r := s.chat(ctx, tokenBob, "qa", qaChat, "Hi."); r.status != 200 {
		t.Errorf("bob's chat of the same id: %d %s", r.status, r.body)
	}
}
