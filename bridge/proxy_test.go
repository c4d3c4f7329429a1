package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

const realKey = "sk-ant-REAL-KEY-never-in-sandbox"

func testUpstream(host string) executor.Connection {
	return executor.Connection{Type: "anthropic", Host: host, Key: realKey, Model: "claude-test"}
}

// fakeAnthropic is an upstream that records what it was sent. A streamed
// answer sends message_start, then waits for gate (if set) before the rest.
type fakeAnthropic struct {
	mu      sync.Mutex
	headers []http.Header
	gate    chan struct{}
	hang    bool
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	gate := f.gate
	f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if f.hang {
		<-r.Context().Done()
		return
	}
	switch r.URL.Path {
	case "/v1/messages":
	case "/v1/messages/count_tokens":
		fmt.Fprint(w, `{"input_tokens": 99}`)
		return
	case "/v1/ratelimited":
	default:
		http.NotFound(w, r)
		return
	}
	if strings.Contains(string(body), `"rate"`) {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"},"usage":{"input_tokens":1000}}`)
		return
	}
	if !strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"m1","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"output_tokens":2,"cache_creation_input_tokens":4}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m2\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1,\"cache_read_input_tokens\":3}}}\n\n")
	fl.Flush()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n")
	fl.Flush()
	fmt.Fprint(w, "event: message_delta\r\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\r\n\r\n")
	fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

func (f *fakeAnthropic) lastHeader() http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[len(f.headers)-1]
}

// unixClient is an HTTP client that reaches the session's model socket.
func unixClient(s *Session) *http.Client {
	sock := filepath.Join(s.Dir(), "model.sock")
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
}

func post(t testing.TB, c *http.Client, base, path, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Api-Key", token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

func newUpstreamServer(t testing.TB, f *fakeAnthropic) *httptest.Server {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

func TestProxyTokenSwapAndMetering(t *testing.T) {
	f := &fakeAnthropic{}
	up := newUpstreamServer(t, f)
	s := startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport})
	c := unixClient(s)

	resp := post(t, c, "http://bridge", "/v1/messages?beta=true", s.Token(), `{"model":"x","stream":true}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "message_stop") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	h := f.lastHeader()
	if h.Get("X-Api-Key") != realKey || h.Get("Authorization") != "" {
		t.Fatalf("upstream auth headers: x-api-key=%q authorization=%q", h.Get("X-Api-Key"), h.Get("Authorization"))
	}
	for k, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, s.Token()) {
				t.Fatalf("upstream got the sandbox token in %s", k)
			}
		}
	}

	resp = post(t, c, "http://bridge", "/v1/messages", s.Token(), `{"model":"x"}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"hi"`) {
		t.Fatalf("non-stream: %d %s", resp.StatusCode, body)
	}
	// Token counting and error answers pass through unmetered.
	resp = post(t, c, "http://bridge", "/v1/messages/count_tokens", s.Token(), `{}`)
	resp.Body.Close()
	resp = post(t, c, "http://bridge", "/v1/messages", s.Token(), `{"model":"rate"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("rate limited: status %d", resp.StatusCode)
	}

	// Four calls went to the provider; two answers are metered.
	want := chat.Usage{InputTokens: 15, OutputTokens: 9, CacheReadTokens: 3, CacheCreationTokens: 4, ModelCalls: 4}
	if got := s.Usage(); !reflect.DeepEqual(got, want) {
		t.Fatalf("usage = %+v, want %+v", got, want)
	}
}

func TestProxyBearerUpstream(t *testing.T) {
	f := &fakeAnthropic{}
	up := newUpstreamServer(t, f)
	s := startSession(t, Options{Upstream: testUpstream(up.URL), UpstreamAuth: AuthBearer, Transport: up.Client().Transport})
	req, _ := http.NewRequest("POST", "http://bridge/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+s.Token())
	resp, err := unixClient(s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if h := f.lastHeader(); h.Get("Authorization") != "Bearer "+realKey || h.Get("X-Api-Key") != "" {
		t.Fatalf("upstream auth: authorization=%q x-api-key=%q", h.Get("Authorization"), h.Get("X-Api-Key"))
	}
}

func TestProxyRefusals(t *testing.T) {
	f := &fakeAnthropic{}
	up := newUpstreamServer(t, f)
	s1 := startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport})
	s2 := startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport})
	if s1.Token() == s2.Token() {
		t.Fatal("two sessions share a token")
	}
	tests := []struct {
		name   string
		token  string
		path   string
		status int
	}{
		{"no token", "", "/v1/messages", 401},
		{"wrong token", "sk-ant-guess", "/v1/messages", 401},
		{"token prefix", s1.Token()[:len(s1.Token())-1], "/v1/messages", 401},
		{"other request's token", s2.Token(), "/v1/messages", 401},
		{"path outside the model API", s1.Token(), "/v1/files", 404},
		{"models listing traversal", s1.Token(), "/v1/models/a/b", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, unixClient(s1), "http://bridge", tc.path, tc.token, `{}`)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if !json.Valid(body) || !strings.Contains(string(body), `"type":"error"`) {
				t.Fatalf("body %s: want an API error", body)
			}
		})
	}
	if n := len(f.headers); n != 0 {
		t.Fatalf("upstream saw %d refused requests", n)
	}

	// A stale token (the session is closed) is refused, even on a
	// connection that was already open.
	m := s1.model
	if err := s1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", s1.Token())
	m.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("stale token: status %d, want 401", rec.Code)
	}
	resp := post(t, unixClient(s2), "http://bridge", "/v1/messages", s1.Token(), `{}`)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("stale token on another session: status %d, want 401", resp.StatusCode)
	}
}

// TestProxyStreamsUnbuffered reads the first event through the guest relay
// and the host proxy while the upstream still holds the rest back.
func TestProxyStreamsUnbuffered(t *testing.T) {
	f := &fakeAnthropic{gate: make(chan struct{})}
	up := newUpstreamServer(t, f)
	s := startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport})
	base := startGuestProxy(t, s)

	resp := post(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, base, "/v1/messages", s.Token(), `{"stream":true}`)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := r.ReadString('\n')
			b.WriteString(line)
			if err != nil || strings.HasPrefix(line, "data:") {
				got <- b.String()
				return
			}
		}
	}()
	select {
	case first := <-got:
		if !strings.Contains(first, "message_start") {
			t.Fatalf("first event %q", first)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("first event did not arrive while the upstream was still streaming: the proxy buffers")
	}
	close(f.gate)
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("rest of the stream: %q", rest)
	}
}

// startGuestProxy runs the in-sandbox relay on a loopback port and returns
// its base URL.
func startGuestProxy(t testing.TB, s *Session) string {
	t.Helper()
	ln, err := ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	socket := filepath.Join(s.Dir(), "model.sock")
	if s.Networked() {
		socket = GatewayPrefix + channelModel
		t.Setenv(EnvCredentials, s.SandboxEnv()[EnvCredentials])
	}
	go func() { done <- GuestProxy(ctx, ln, socket) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("GuestProxy: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func TestProxyDeadline(t *testing.T) {
	f := &fakeAnthropic{hang: true}
	up := newUpstreamServer(t, f)
	s := startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport, Deadline: time.Now().Add(300 * time.Millisecond)})
	start := time.Now()
	resp := post(t, unixClient(s), "http://bridge", "/v1/messages", s.Token(), `{}`)
	resp.Body.Close()
	// The fake never answers: a 504 is the deadline's.
	if resp.StatusCode != http.StatusGatewayTimeout || time.Since(start) > 30*time.Second {
		t.Fatalf("request across the deadline: status %d after %s, want 504 at the deadline", resp.StatusCode, time.Since(start))
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", s.Token())
	s.model.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("request after the deadline: status %d, want 403", rec.Code)
	}
}

func TestNewUpstream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		conn executor.Connection
		auth string
		want string // error substring; "" = ok
		url  string
	}{
		{"anthropic default host", executor.Connection{Type: "anthropic", Key: "k"}, "", "", DefaultAnthropicHost},
		{"custom host with path", executor.Connection{Type: "anthropic", Host: "https://example.com/anthropic"}, AuthBearer, "", "https://example.com/anthropic"},
		{"openai", executor.Connection{Type: "openai", Host: "https://x/"}, "", "", "https://x/"},
		{"openai default host", executor.Connection{Type: "openai"}, "", "", DefaultOpenAIHost},
		{"no scheme", executor.Connection{Type: "anthropic", Host: "api.example.com"}, "", "want http(s)", ""},
		{"ftp", executor.Connection{Type: "anthropic", Host: "ftp://x"}, "", "want http(s)", ""},
		{"credentials", executor.Connection{Type: "anthropic", Host: "https://u:p@x"}, "", "no credentials", ""},
		{"bad auth", executor.Connection{Type: "anthropic"}, "basic", "upstream auth", ""},
		{"scripted without host", executor.Connection{Type: "scripted"}, "", "has no host", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := newUpstream(tc.conn, tc.auth, nil)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				if err != nil && strings.Contains(err.Error(), "u:p") {
					t.Fatalf("error leaks credentials: %v", err)
				}
				return
			}
			if err != nil || u.url.String() != tc.url {
				t.Fatalf("got %v, %v; want %s", u, err, tc.url)
			}
		})
	}
}

func TestUpstreamPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ base, path, want string }{
		{"", "/v1/messages", "/v1/messages"},
		{"/", "/v1/messages", "/messages"},
		{"/", "/v1/chat/completions", "/chat/completions"},
		{"/anthropic", "/v1/messages", "/anthropic/v1/messages"},
		{"/api/", "/v1/messages", "/api/messages"},
		{"/api/", "/v1/messages/count_tokens", "/api/messages/count_tokens"},
		{"/compat/v1", "/v1/messages", "/compat/v1/messages"},
		{"/api/", "/v1beta/models/m:streamGenerateContent", "/api/v1beta/models/m:streamGenerateContent"},
	}
	for _, tc := range tests {
		if got := upstreamPath(tc.base, tc.path); got != tc.want {
			t.Errorf("upstreamPath(%q, %q) = %q, want %q", tc.base, tc.path, got, tc.want)
		}
	}
}

// A connector host ending in "/" is the API's base as Yao reads it: the
// CLI's /v1/messages goes to HOST/api/messages.
func TestProxyYaoHostBase(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("POST /api/messages", http.StripPrefix("/api", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/v1" + r.URL.Path
		(&fakeAnthropic{}).ServeHTTP(w, r)
	})))
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	s := startSession(t, Options{Upstream: testUpstream(up.URL + "/api/"), Transport: up.Client().Transport})
	resp := post(t, unixClient(s), "http://bridge", "/v1/messages", s.Token(), `{"model":"x"}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":"hi"`) {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

func TestSessionEnvAndWrap(t *testing.T) {
	s := startSession(t, Options{Upstream: testUpstream("http://127.0.0.1:1"), Tools: []Tool{{Name: "t", Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}}})
	env := s.Env()
	if env["ANTHROPIC_API_KEY"] != s.Token() || env["ANTHROPIC_BASE_URL"] != "http://"+GuestProxyAddr {
		t.Fatalf("env %v", env)
	}
	for k, v := range env {
		if strings.Contains(v, realKey) {
			t.Fatalf("env %s holds the real key", k)
		}
	}
	if c := s.Connection(); c.Key != s.Token() || c.Host != "http://"+GuestProxyAddr || c.Model != "claude-test" || c.Type != "anthropic" {
		t.Fatalf("Connection = %v", c)
	}
	argv := s.WrapCommand([]string{"claude", "-p"})
	want := []string{GuestBinary, "bridge", "run", "--socket", GuestModelSocket, "--listen", GuestProxyAddr, "--", "claude", "-p"}
	if strings.Join(argv, " ") != strings.Join(want, " ") {
		t.Fatalf("WrapCommand = %v", argv)
	}
	m := s.MCPServer()
	if m.Command != GuestBinary || strings.Join(m.Args, " ") != "bridge mcp --socket "+GuestToolsSocket || m.Transport != "stdio" {
		t.Fatalf("MCPServer = %+v", m)
	}
	mounts := s.Mounts()
	if len(mounts) != 3 || mounts[0].Writable || !mounts[1].Writable || !mounts[2].Writable {
		t.Fatalf("mounts %+v", mounts)
	}
}

func TestGuestRunStatusAndSignals(t *testing.T) {
	s := startSession(t, Options{Upstream: testUpstream("http://127.0.0.1:1")})
	sock := filepath.Join(s.Dir(), "model.sock")
	tests := []struct {
		name   string
		script string
		cancel bool
		want   int
	}{
		{"exit status", "exit 5", false, 5},
		{"killed by signal", "kill -KILL $$", false, 128 + 9},
		{"ctx end forwards SIGTERM", `trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done`, true, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw := io.Pipe()
			go func() {
				if tc.cancel {
					// Cancel once the trap is installed.
					_, _ = bufio.NewReader(pr).ReadString('\n')
					cancel()
				}
				_, _ = io.Copy(io.Discard, pr)
			}()
			code, err := GuestRun(ctx, RunConfig{Socket: sock, Listen: "127.0.0.1:0", Argv: []string{"sh", "-c", tc.script}, Stdout: pw, Stderr: io.Discard})
			pw.Close()
			if err != nil || code != tc.want {
				t.Fatalf("GuestRun = %d, %v; want %d", code, err, tc.want)
			}
		})
	}
}
