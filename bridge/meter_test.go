package bridge

import (
	"io"
	"strings"
	"testing"
)

const sampleSSE = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":12,"output_tokens":1,"cache_read_input_tokens":5,"cache_creation_input_tokens":2}}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"usage: {\"output_tokens\": 999}"}}` + "\n\n" +
	"event: message_delta\r\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":30}}` + "\r\n\r\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

// readChunked reads a Messages API body through a meterBody in chunks of
// the given sizes (cycled) and returns the metered usage.
func readChunked(body string, sse bool, sizes []int) usageFields {
	return readUsage(messagesUsage, body, sse, sizes)
}

func readUsage(u *usageReader, body string, sse bool, sizes []int) usageFields {
	var m meter
	mb := &meterBody{rc: io.NopCloser(&chunkReader{s: body, sizes: sizes}), m: &m, sse: sse, usage: u}
	_, _ = io.Copy(io.Discard, mb)
	_ = mb.Close()
	return m.u
}

type chunkReader struct {
	s     string
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = max(1, r.sizes[r.i%len(r.sizes)])
		r.i++
	}
	n = min(n, len(p), len(r.s))
	copy(p, r.s[:n])
	r.s = r.s[n:]
	return n, nil
}

func TestMeterBody(t *testing.T) {
	t.Parallel()
	want := usageFields{input: 12, output: 30, cacheRead: 5, cacheCreation: 2}
	tests := []struct {
		name  string
		body  string
		sse   bool
		sizes []int
		want  usageFields
	}{
		{"sse whole", sampleSSE, true, []int{1 << 20}, want},
		{"sse bytewise", sampleSSE, true, []int{1}, want},
		{"sse odd chunks", sampleSSE, true, []int{7, 3, 50}, want},
		{"sse cut before message_delta", sampleSSE[:strings.Index(sampleSSE, "event: message_delta")], true, nil, usageFields{input: 12, output: 1, cacheRead: 5, cacheCreation: 2}},
		{"json", `{"type":"message","usage":{"input_tokens":4,"output_tokens":6}}`, false, []int{5}, usageFields{input: 4, output: 6}},
		{"json invalid", `{"usage":{"input_tokens":4`, false, nil, usageFields{}},
		{"sse garbage", "data: {not json\n\ndata: [DONE]\n", true, nil, usageFields{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := readChunked(tc.body, tc.sse, tc.sizes); got != tc.want {
				t.Fatalf("usage %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMeterOtherAPIs: the Responses API's and the Gemini API's answers,
// streamed and whole, are metered in the same terms: input without its
// cached part, output with reasoning.
func TestMeterOtherAPIs(t *testing.T) {
	t.Parallel()
	responsesSSE := "event: response.created\n" +
		`data: {"type":"response.created","response":{"id":"r","usage":null}}` + "\n\n" +
		"event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","delta":"usage"}` + "\n\n" +
		"event: response.completed\n" +
		`data: {"type":"response.completed","response":{"id":"r","usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":25,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":125}}}` + "\n\n"
	geminiSSE := `data: {"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":1,"totalTokenCount":51}}` + "\r\n\r\n" +
		`data: {"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":50,"cachedContentTokenCount":10,"candidatesTokenCount":7,"thoughtsTokenCount":30,"toolUsePromptTokenCount":5,"totalTokenCount":92}}` + "\r\n\r\n"
	tests := []struct {
		name  string
		usage *usageReader
		body  string
		sse   bool
		want  usageFields
	}{
		{"responses sse", responsesUsage, responsesSSE, true, usageFields{input: 60, cacheRead: 40, output: 25}},
		{"responses json", responsesUsage, `{"id":"r","usage":{"input_tokens":9,"output_tokens":3}}`, false, usageFields{input: 9, output: 3}},
		{"responses cut before completed", responsesUsage, responsesSSE[:strings.Index(responsesSSE, "event: response.completed")], true, usageFields{}},
		{"gemini sse", geminiUsage, geminiSSE, true, usageFields{input: 45, cacheRead: 10, output: 37}},
		{"gemini json", geminiUsage, `{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2}}`, false, usageFields{input: 8, output: 2}},
		{"gemini json array", geminiUsage, `[{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":1}},{"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":4}}]`, false, usageFields{input: 8, output: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, sizes := range [][]int{{1 << 20}, {1}, {7, 3, 50}} {
				if got := readUsage(tc.usage, tc.body, tc.sse, sizes); got != tc.want {
					t.Fatalf("reads of %v: usage %+v, want %+v", sizes, got, tc.want)
				}
			}
		})
	}
}

// FuzzMeterSSE checks that metering never panics and does not depend on
// how the stream is split into reads.
func FuzzMeterSSE(f *testing.F) {
	f.Add(sampleSSE, 3)
	f.Add("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":1}}\n", 1)
	f.Add("data:"+strings.Repeat("x", maxMeterEvent+10)+"\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":2}}}\n", 4096)
	f.Add(`data: {"type":"message_start","message":{"usage":{"input_tokens":2},"pad":"`+strings.Repeat("x", maxMeterEvent)+`"}}`+"\n", 4096)
	f.Fuzz(func(t *testing.T, body string, size int) {
		if size < 0 {
			size = -size
		}
		whole := readChunked(body, true, []int{1 << 30})
		split := readChunked(body, true, []int{size%97 + 1, size%13 + 1})
		if whole != split {
			t.Fatalf("usage depends on read sizes: whole %+v, split %+v", whole, split)
		}
	})
}
