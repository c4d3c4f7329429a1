package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
)

// TestProxyBreaker: the model proxy counts its calls with the connector's
// breaker, shared across sessions: upstream 5xx answers open it, then the
// sandbox gets an answer it does not retry (400, x-should-retry: false) without a
// call upstream, and the session remembers why; rate limits do not count;
// after the cooldown a good probe closes it. (The refusal is a 400:
// Claude Code retries 5xx answers whatever x-should-retry says.)
func TestProxyBreaker(t *testing.T) {
	var status atomic.Int32
	status.Store(500)
	var calls atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if st := int(status.Load()); st != 200 {
			w.WriteHeader(st)
			io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"down"}}`)
			return
		}
		io.WriteString(w, `{"id":"m1","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"output_tokens":2}}`)
	}))
	t.Cleanup(up.Close)
	set := breaker.NewSet(breaker.Settings{Failures: 2, Cooldown: 150 * time.Millisecond}, nil)
	open := func() *Session {
		return startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport, Breaker: set.Get("anthropic.test")})
	}
	s1, s2 := open(), open()
	ask := func(s *Session) *http.Response {
		t.Helper()
		resp := post(t, unixClient(s), "http://bridge", "/v1/messages", s.Token(), `{"model":"x"}`)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}
	status.Store(429)
	for range 3 {
		if r := ask(s1); r.StatusCode != 429 {
			t.Fatalf("status %d, want the upstream's 429", r.StatusCode)
		}
	}
	status.Store(502)
	for range 2 {
		if r := ask(s1); r.StatusCode != 502 {
			t.Fatalf("status %d, want the upstream's 502", r.StatusCode)
		}
	}
	if s2.CircuitOpen() != nil || s1.CircuitOpen() != nil {
		t.Fatal("CircuitOpen before any refusal")
	}
	// Open now, for the other session too.
	before := calls.Load()
	resp := post(t, unixClient(s2), "http://bridge", "/v1/messages", s2.Token(), `{"model":"x"}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), "invalid_request_error") || !strings.Contains(string(body), "anthropic.test is failing") {
		t.Fatalf("open breaker answer: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if calls.Load() != before {
		t.Error("a refused call reached the upstream")
	}
	if ce := s2.CircuitOpen(); ce == nil || ce.Code != chat.ErrCircuitOpen {
		t.Errorf("s2.CircuitOpen() = %v", ce)
	}
	if s1.CircuitOpen() != nil {
		t.Error("s1 was refused nothing")
	}
	time.Sleep(200 * time.Millisecond)
	status.Store(200)
	if r := ask(s1); r.StatusCode != 200 {
		t.Fatalf("probe: status %d", r.StatusCode)
	}
	if st := set.Get("anthropic.test").State(); st != breaker.Closed {
		t.Errorf("state after a good probe = %s", st)
	}
}

// TestProxyBreakerStreamEnds: an answer the upstream cuts short is its
// failure; one cut because the session ended (the sandbox stopped reading)
// is not.
func TestProxyBreakerStreamEnds(t *testing.T) {
	var cut atomic.Bool
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n")
		w.(http.Flusher).Flush()
		if cut.Load() {
			panic(http.ErrAbortHandler)
		}
		select {
		case <-gate:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	b := breaker.NewSet(breaker.Settings{Failures: 1, Cooldown: time.Hour}, nil).Get("c")
	stream := func() *Session {
		s := startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport, Breaker: b})
		resp := post(t, unixClient(s), "http://bridge", "/v1/messages", s.Token(), `{"model":"x","stream":true}`)
		buf := make([]byte, 64)
		_, _ = resp.Body.Read(buf)
		t.Cleanup(func() { resp.Body.Close() })
		return s
	}
	for range 2 {
		s := stream()
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.State(); st != breaker.Closed {
		t.Fatalf("after sessions ended mid-answer: state = %s, want closed", st)
	}
	cut.Store(true)
	s := stream()
	deadline := time.Now().Add(5 * time.Second)
	for b.State() != breaker.Open && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := b.State(); st != breaker.Open {
		t.Fatalf("after the upstream cut an answer: state = %s, want open", st)
	}
	_ = s.Close(t.Context())
}
