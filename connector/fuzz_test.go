package connector

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/sse"
)

// FuzzProviderStreams feeds arbitrary bytes as an SSE body to both
// providers' stream parsers: no panic, every started message ends, and the
// result is either a completion or an error.
func FuzzProviderStreams(f *testing.F) {
	f.Add([]byte("data: " + oaText("hi") + "\n\ndata: " + oaFinish("stop") + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\"}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n" +
		"data: {\"type\":\"content_block_stop\",\"index\":0}\n\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte(`data: {"choices":[{"delta":{"tool_calls":[{"index":-5,"function":{"arguments":"x"}}]}}]}` + "\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, p := range []provider{&openAI{}, &anthropic{}} {
			var ev chattest.Recorder
			out := &output{emit: ev.Emit, ids: newIDs(), provider: "fuzz"}
			_ = p.stream(sse.NewReader(bytes.NewReader(in), maxEventBytes), out)
			out.closeOpen()
			compact(t, ev.Events())
			_ = p.whole(in, &output{emit: func(chat.Event) {}, ids: newIDs()})
		}
	})
}

// FuzzStatusError classifies arbitrary error bodies: always a known class
// and a message, never the key.
func FuzzStatusError(f *testing.F) {
	f.Add(429, []byte(`{"error":{"message":"slow down","type":"rate_limit_error"}}`), "1")
	f.Add(401, []byte(`{"type":"error","error":{"type":"authentication_error","message":"bad key `+testKey+`"}}`), "")
	f.Add(500, []byte("<html>"), "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Fuzz(func(t *testing.T, status int, body []byte, ra string) {
		h := http.Header{}
		h.Set("Retry-After", ra)
		e := statusError("fuzz", status, h, body, testKey)
		if _, ok := hints[e.Code]; !ok {
			t.Fatalf("class %q", e.Code)
		}
		if e.Message == "" || strings.Contains(e.Message, testKey) {
			t.Fatalf("message %q", e.Message)
		}
		if failureOf(e).RetryAfter < 0 {
			t.Fatalf("negative retry-after %v", failureOf(e).RetryAfter)
		}
	})
}

// FuzzEndpoint: any host either is refused or yields an http(s) URL ending
// in the API path.
func FuzzEndpoint(f *testing.F) {
	for _, s := range []string{"", "https://api.openai.com", "http://127.0.0.1:1/v1/", "ftp://x", "http://u:p@h", "http://h/v1/chat/completions"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		u, err := endpoint("openai", host, openAIDefaultHost, "/chat/completions")
		if err != nil {
			return
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			t.Fatalf("endpoint(%q) = %q", host, u)
		}
		if !strings.HasSuffix(u, "/chat/completions") {
			t.Fatalf("endpoint(%q) = %q", host, u)
		}
	})
}
