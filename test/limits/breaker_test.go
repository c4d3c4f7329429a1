package limits

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"

	"github.com/agentbox/agentbox/scripted"
)

// TestBreakerThroughTheModelProxy: the coder's connector points at an
// upstream that fails with 500s. The real CLI's model calls go through the
// bridge's proxy, which counts them with the connector's breaker: the turn
// fails with circuit_open once it opens, the next turn fails at once with
// 503 and Retry-After without starting a sandbox, /health and /metrics
// show the open breaker, and once the upstream is back a probe after the
// cooldown closes it.
func TestBreakerThroughTheModelProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	model := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "Recovered."}}})
	t.Cleanup(model.Close)
	var healthy atomic.Bool
	var calls atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() && r.Method == http.MethodPost {
			calls.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"upstream is down"}}`)
			return
		}
		model.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)

	// The cooldown outlasts turn 1's teardown and turn 2 even on a busy
	// machine.
	app := newApp(t, `"limits": {"breaker": {"failures": 2, "cooldown": "20s"}}`, "")
	if err := os.MkdirAll(filepath.Join(app, "connectors", "flaky"), 0o755); err != nil {
		t.Fatal(err)
	}
	e2etest.Write(t, filepath.Join(app, "connectors", "flaky", "up.conn.yao"),
		`{"type": "anthropic", "options": {"host": "`+up.URL+`", "key": "sk-ant-test", "model": "claude-sonnet-4-5"}}`)
	pkg := filepath.Join(app, "assistants", "coder", "package.yao")
	b, err := os.ReadFile(pkg)
	if err != nil {
		t.Fatal(err)
	}
	e2etest.Write(t, pkg, strings.Replace(string(b), `"connector": "scripted.demo"`, `"connector": "flaky.up"`, 1))
	s := start(t, app, "")
	ctx := context.Background()

	// 1: the CLI's calls fail until the breaker opens; the proxy then
	// refuses, and the turn's error is the breaker's.
	chat1 := e2etest.NewID("brk")
	r := s.Chat(ctx, e2etest.TokenAlice, "coder", chat1, "Say hi.")
	if f := r.Final(); r.Status != 200 || f == nil || f.Error != "circuit_open" {
		t.Fatalf("turn 1: status %d %s, done %+v: want a stream ending with circuit_open", r.Status, r.Body, f)
	}
	var said []string
	for _, e := range r.Events {
		if e.Type == "error" && e.Event == "start" {
			said = append(said, e.Text)
		}
	}
	if msg := strings.Join(said, " "); !strings.Contains(msg, "flaky.up is failing") {
		t.Errorf("turn 1's error events do not say why: %q", msg)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the failing upstream got %d calls, want 2 (then the breaker opened)", n)
	}
	// 2: fails at once, before any sandbox.
	chat2 := e2etest.NewID("brk")
	t0 := time.Now()
	r = s.Chat(ctx, e2etest.TokenAlice, "coder", chat2, "Say hi.")
	took := time.Since(t0)
	if r.Status != 503 || r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, `"code":"circuit_open"`) || !strings.Contains(r.Body, "flaky.up") {
		t.Fatalf("turn 2: %d %v %s; want 503 circuit_open with Retry-After", r.Status, r.Header, r.Body)
	}
	t.Logf("open breaker: the turn failed in %s", took.Round(time.Millisecond))
	if took > time.Second || len(e2etest.ChatContainers(t, chat2)) != 0 || calls.Load() != 2 {
		t.Errorf("turn 2 took %s, made a sandbox or called the upstream", took)
	}
	code, health := s.get(t, "/health", "")
	if code != 200 || !strings.Contains(health, `"connector":"flaky.up","state":"open"`) {
		t.Errorf("health: %d %s", code, health)
	}
	if strings.Contains(health, "sk-ant") || strings.Contains(health, up.URL) {
		t.Errorf("health shows a secret or a host: %s", health)
	}
	_, metrics := s.get(t, "/metrics", e2etest.TokenOperator)
	if !strings.Contains(metrics, `agentbox_circuit_breaker_state{connector="flaky.up",state="open"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(metrics, "agentbox_circuit_breaker"))
	}

	// 3: the upstream is back; after the cooldown a probe closes it.
	healthy.Store(true)
	e2etest.WaitUntil(t, 30*time.Second, "the cooldown", func() bool {
		_, h := s.get(t, "/health", "")
		return !strings.Contains(h, `"state":"open"`)
	})
	r = s.Chat(ctx, e2etest.TokenAlice, "coder", e2etest.NewID("brk"), "Say hi.")
	if f := r.Final(); r.Status != 200 || f == nil || f.Error != "" {
		t.Fatalf("turn 3 after recovery: %d %s %+v", r.Status, r.Body, f)
	}
	if _, health = s.get(t, "/health", ""); strings.Contains(health, "breakers") {
		t.Errorf("health after recovery: %s", health)
	}
}
