package server

import (
	"bufio"
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// BenchmarkTimeToFirstEvent measures the server's overhead to the first
// event of POST /api/assistants/{id}/chat: request, auth, decoding,
// validation and SSE framing, with a backend that emits at once (its own
// time to first event is zero). It reports the median as median-ms.
func BenchmarkTimeToFirstEvent(b *testing.B) {
	fb := &fakeBackend{app: testApp(), chat: func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "hi"})
		emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
		return &pipeline.Response{Content: "hi"}, nil
	}}
	ts := startServer(b, fb, nil)
	body := `{"chat_id":"c1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}]}`
	client := ts.Client()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("POST", ts.URL+"/api/assistants/coder/chat", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokenAlice)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if err != nil || line != "event: start\n" {
			b.Fatalf("first line %q: %v", line, err)
		}
		times = append(times, time.Since(t0))
		_, _ = br.WriteTo(discard{})
		resp.Body.Close()
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
