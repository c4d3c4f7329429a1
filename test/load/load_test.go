// Package load drives a real `agentbox serve` with many concurrent
// sandboxed chats: the example app's coder (scripted model, real Claude
// Code CLI, Docker sandboxes, the bridge), checking every chat completes
// correctly and no container is left behind, and measuring throughput and
// the server's peak memory.
package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// server is a running agentbox serve on a copy of the example app.
type server struct {
	*e2etest.Server
	app string
}

func startServer(tb testing.TB) *server {
	tb.Helper()
	testenv.Image(tb)
	app := e2etest.CopyExampleApp(tb, tb.TempDir())
	// The load is 32 chats of 4 users at once: above the default limits
	// (4 turns per user, 16 sandboxes), which are not what is measured.
	e2etest.Write(tb, filepath.Join(app, "app.jsonc"), `{"data_root": "./data", "limits": {"turns_per_user": 8, "sandboxes": 32}}`)
	return &server{app: app, Server: e2etest.Serve(tb, app, e2etest.Options{Args: []string{"--runtime", "docker"}})}
}

// peakRSS is the server's high-water resident memory in bytes.
func (s *server) peakRSS(tb testing.TB) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	tb.Fatal("no VmHWM")
	return 0
}

// chatOnce runs one coder turn over the native SSE endpoint and checks it
// completed and made its file.
func (s *server) chatOnce(ctx context.Context, user, chatID string) error {
	body, _ := json.Marshal(map[string]any{"chat_id": chatID, "message": "Write a hello script and run it."})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/assistants/coder/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-ID", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var done *chat.Final
	var col chat.Collector
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e chat.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("bad event %q: %w", data, err)
		}
		col.Add(e)
		if e.Event == chat.Done {
			done = e.Final
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	switch {
	case done == nil:
		return fmt.Errorf("no done event")
	case done.Error != "":
		return fmt.Errorf("turn failed: %s", done.Error)
	case !strings.Contains(col.Text(), "Hello from agentbox"):
		return fmt.Errorf("answer lacks the program's output: %q", col.Text())
	}
	f := filepath.Join(s.app, "data", "workspaces", user, chatID, "hello.sh")
	if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), "Hello from agentbox") {
		return fmt.Errorf("workspace file: %v", err)
	}
	return nil
}

// run sends n concurrent chats and returns how long they all took.
func (s *server) run(tb testing.TB, round, n int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.chatOnce(ctx, fmt.Sprintf("user%d", i%4), fmt.Sprintf("load-%d-%d", round, i))
		})
	}
	wg.Wait()
	took := time.Since(start)
	for i, err := range errs {
		if err != nil {
			tb.Errorf("chat %d: %v", i, err)
		}
	}
	return took
}

// TestConcurrentChats: concurrent sandboxed chats through the real server
// all complete correctly, and every container is removed.
func TestConcurrentChats(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	s := startServer(t)
	took := s.run(t, 0, 8)
	e2etest.NoPrefixContainers(t, "load-", 15*time.Second)
	t.Logf("8 concurrent chats in %s; server peak RSS %.1f MiB", took.Round(time.Millisecond), float64(s.peakRSS(t))/(1<<20))
}

// BenchmarkConcurrentChats32 is issue 7's load figure: 32 concurrent
// sandboxed chats on one server. It reports chats per minute and the
// server's peak RSS.
func BenchmarkConcurrentChats32(b *testing.B) {
	s := startServer(b)
	var total time.Duration
	for i := range b.N {
		total += s.run(b, i, 32)
	}
	e2etest.NoPrefixContainers(b, "load-", 15*time.Second)
	b.ReportMetric(float64(32*b.N)/total.Minutes(), "chats/min")
	b.ReportMetric(float64(s.peakRSS(b))/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(total.Seconds()/float64(b.N), "s/round")
}
