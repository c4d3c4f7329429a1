package scripted_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/scripted"
)

// BenchmarkAnthropicStreamTurn measures one streamed turn with thinking,
// text and a tool call, end to end over HTTP on loopback.
func BenchmarkAnthropicStreamTurn(b *testing.B) {
	turn := scripted.Turn{
		Thinking:  strings.Repeat("thinking about it ", 20),
		Text:      strings.Repeat("some answer text ", 40),
		ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "/workspace/a.txt", "content": strings.Repeat("x", 2000)}}},
	}
	turns := make([]scripted.Turn, b.N)
	for i := range turns {
		turns[i] = turn
	}
	srv := scripted.NewServer(&scripted.Script{Turns: turns})
	b.Cleanup(srv.Close)
	body := `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"go"}]}`
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n == 0 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
}
