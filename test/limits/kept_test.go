package limits

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"
)

// tickScript: the agent starts a process that outlives its turn (setsid,
// detached from the CLI), appending to /workspace/ticks ten times a
// second.
const tickScript = `turns:
  - when:
      contains: start ticking
    tool_calls:
      - name: Bash
        input:
          command: setsid sh -c 'while :; do date +%s%N >> /workspace/ticks; sleep 0.1; done' </dev/null >/dev/null 2>&1 &
          description: Start the ticker
  - when:
      after_tool_result: Bash
    text: Ticking.
`

// keptCoder gives the example coder sandbox.keep_alive: its sandbox and
// CLI stay up between turns.
func keptCoder(t *testing.T, app string) {
	t.Helper()
	p := filepath.Join(app, "assistants", "coder", "package.yao")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `"timeout": "10m",`, `"timeout": "10m", "keep_alive": "10m",`, 1)
	if s == string(b) {
		t.Fatal("the example coder's package.yao changed: no sandbox timeout to add keep_alive after")
	}
	e2etest.Write(t, p, s)
}

// ticks is the chat's ticks file, read through the files API ("" while
// there is none).
func (s *server) ticks(t testing.TB, chatID string) string {
	t.Helper()
	code, body := s.get(t, "/api/chats/"+chatID+"/files?path=ticks", e2etest.TokenAlice)
	if code != 200 {
		return ""
	}
	return body
}

// TestStopKeptChat: a kept chat (sandbox.keep_alive) whose agent left a
// process writing to its workspace is ended by its user: DELETE answers
// 200 (not 409: the kept sandbox is this server's own) and POST cancel
// stops it between turns too; either way the chat's container is gone
// when the answer comes, and the writes stop.
func TestStopKeptChat(t *testing.T) {
	app := newApp(t, "", tickScript)
	keptCoder(t, app)
	s := start(t, app, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// ticking starts a kept chat whose ticker runs after the turn.
	ticking := func(chatID string) {
		t.Helper()
		r := s.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "start ticking")
		if r.Status != 200 || r.Err != nil || r.Final() == nil || r.Final().Error != "" {
			t.Fatalf("turn: %d %s %v %+v", r.Status, r.Body, r.Err, r.Final())
		}
		if n := len(e2etest.ChatContainers(t, chatID)); n != 1 {
			t.Fatalf("%d containers for the kept chat, want 1", n)
		}
		first := len(s.ticks(t, chatID))
		e2etest.WaitUntil(t, 30*time.Second, "the ticker to write after the turn", func() bool { return len(s.ticks(t, chatID)) > first })
	}

	del := e2etest.NewID("kept-del")
	ticking(del)
	code, body := s.Send(t, http.MethodDelete, "/api/chats/"+del, e2etest.TokenAlice, "", nil)
	if code != 200 || !strings.Contains(body, `"deleted":true`) {
		t.Fatalf("DELETE the kept chat: %d %s", code, body)
	}
	if c := e2etest.ChatContainers(t, del); len(c) != 0 {
		t.Errorf("the deleted chat's container is left: %v", c)
	}
	if _, err := os.Stat(filepath.Join(app, "data", "workspaces", "alice", del)); !os.IsNotExist(err) {
		t.Errorf("the deleted chat's workspace is left: %v", err)
	}

	stop := e2etest.NewID("kept-cancel")
	ticking(stop)
	code, body = s.Send(t, http.MethodPost, "/api/chats/"+stop+"/cancel", e2etest.TokenAlice, "", nil)
	if code != 200 || !strings.Contains(body, `"canceled":0`) {
		t.Fatalf("cancel between turns: %d %s", code, body)
	}
	if c := e2etest.ChatContainers(t, stop); len(c) != 0 {
		t.Errorf("the canceled kept chat's container is left: %v", c)
	}
	// The ticker wrote ten times a second: a second without a write means
	// it is gone (its container is, by the check above).
	before := s.ticks(t, stop)
	time.Sleep(time.Second)
	if after := s.ticks(t, stop); len(after) != len(before) || len(before) == 0 {
		t.Errorf("the ticker still writes after cancel: %d bytes, then %d", len(before), len(after))
	}
	// The chat goes on: its next turn starts a new sandbox.
	r := s.Chat(ctx, e2etest.TokenAlice, "coder", stop, "start ticking")
	if r.Status != 200 || r.Final() == nil || r.Final().Timings == nil || r.Final().Timings.Sandbox != "cold" {
		t.Errorf("the turn after cancel: %d %s %+v", r.Status, r.Body, r.Final())
	}
}
