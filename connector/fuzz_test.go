package connector

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

func TestSSEReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{"basic", "data: a\n\ndata: b\n\n", []sseEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"crlf and names", "event: x\r\ndata: 1\r\n\r\n", []sseEvent{{Event: "x", Data: []byte("1")}}},
		{"multi-line data", "data: a\ndata: b\n\n", []sseEvent{{Data: []byte("a\nb")}}},
		{"no space after colon", "data:a\n\n", []sseEvent{{Data: []byte("a")}}},
		{"only one space stripped", "data:  a\n\n", []sseEvent{{Data: []byte(" a")}}},
		{"comments and ids ignored", ": keep-alive\nid: 4\nretry: 10\ndata: x\n\n", []sseEvent{{Data: []byte("x")}}},
		{"event without data is skipped", "event: ping\n\ndata: y\n\n", []sseEvent{{Data: []byte("y")}}},
		{"last event without blank line", "data: [DONE]", []sseEvent{{Data: []byte("[DONE]")}}},
		{"empty data field", "data\n\n", []sseEvent{{Data: []byte("")}}},
		{"long line", "data: " + strings.Repeat("x", 100000) + "\n\n", []sseEvent{{Data: []byte(strings.Repeat("x", 100000))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// One byte at a time exercises every buffer boundary.
			r := newSSEReader(iotest.OneByteReader(strings.NewReader(tt.in)))
			var got []sseEvent
			for {
				ev, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
			if !reflect.DeepEqual(render(got), render(tt.want)) {
				t.Errorf("events = %q, want %q", render(got), render(tt.want))
			}
		})
	}
}

func render(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Event+"|"+string(e.Data))
	}
	return out
}

func TestSSEReaderLimit(t *testing.T) {
	t.Parallel()
	big := "data: " + strings.Repeat("x", maxEventBytes+10) + "\n\n"
	_, err := newSSEReader(strings.NewReader(big)).Next()
	if !errors.Is(err, errEventTooLarge) {
		t.Fatalf("err = %v, want errEventTooLarge", err)
	}
}

// FuzzSSEReader checks the parser never panics, never loops, and that
// every event's data came from data lines of the input.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "event: x\r\ndata: 1\r\n\r\n", ":c\n\ndata:\n", "data: a\ndata: b", "\r\n\n\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newSSEReader(bytes.NewReader(in))
		for i := 0; ; i++ {
			if i > len(in)+1 {
				t.Fatalf("more events than input bytes")
			}
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > len(in) {
				t.Fatalf("event data longer than the input")
			}
		}
	})
}

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
			_ = p.stream(newSSEReader(bytes.NewReader(in)), out)
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
