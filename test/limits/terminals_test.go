package limits

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"

	"github.com/coder/websocket"
)

// terminalMsg is a control message of the terminal WebSocket.
type terminalMsg struct {
	Type      string `json:"type"`
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

// openTerminal opens a terminal of chatID as token's user, as the web app
// does, and returns its socket with its first control message (ready, or
// the error that refused it).
func (s *server) openTerminal(t testing.TB, ctx context.Context, token, chatID string) (*websocket.Conn, terminalMsg) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(s.URL, "http") + "/api/chats/" + chatID + "/terminal?assistant=coder"
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{
		"agentbox.terminal.v1", "agentbox.bearer." + base64.RawURLEncoding.EncodeToString([]byte(token))}})
	if err != nil {
		t.Fatalf("terminal of %s: %v %v", chatID, err, resp)
	}
	t.Cleanup(func() { c.CloseNow() })
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("terminal of %s: %v", chatID, err)
		}
		if typ != websocket.MessageText {
			continue
		}
		var m terminalMsg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("terminal of %s: %s: %v", chatID, b, err)
		}
		return c, m
	}
}

// TestTerminalsCountAgainstTheUser: a terminal takes one of the server's
// sandboxes, and so one of its user's turns (limits.turns_per_user), and a
// user opens at most limits.terminals_per_user of them: a user who holds
// terminals cannot make every other user's turns wait for a sandbox and
// fail with server_busy.
func TestTerminalsCountAgainstTheUser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	s := start(t, newApp(t, `"limits": {"sandboxes": 3, "sandbox_wait": "3s", "turns_per_user": 2, "terminals_per_user": 2}`, "turns:\n  - text: Hi.\n"), "")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prefix := e2etest.NewID("term")

	first, m := s.openTerminal(t, ctx, e2etest.TokenAlice, prefix+"-1")
	if m.Type != "ready" {
		t.Fatalf("first terminal: %+v", m)
	}
	if _, m := s.openTerminal(t, ctx, e2etest.TokenAlice, prefix+"-2"); m.Type != "ready" {
		t.Fatalf("second terminal: %+v", m)
	}
	if _, m := s.openTerminal(t, ctx, e2etest.TokenAlice, prefix+"-3"); m.Type != "error" || m.ErrorCode != "too_many_turns" || !strings.Contains(m.Message, "limits.terminals_per_user") {
		t.Errorf("third terminal: %+v; want too_many_turns naming limits.terminals_per_user", m)
	}
	// Alice's two terminals are her two turns.
	if r := s.Chat(ctx, e2etest.TokenAlice, "coder", prefix+"-a", "Say hi."); r.Status != 429 || !strings.Contains(r.Body, "turns and terminals") || r.Header.Get("Retry-After") == "" {
		t.Errorf("alice's turn beside her terminals: %d %s", r.Status, r.Body)
	}
	// Bob's turn gets the sandbox she left.
	if r := s.Chat(ctx, e2etest.TokenBob, "coder", prefix+"-b", "Say hi."); r.Status != 200 || r.Final() == nil || r.Final().Error != "" {
		t.Errorf("bob's turn: %d %s %+v", r.Status, r.Body, r.Final())
	}
	// A closed terminal gives its user's turn back.
	first.Close(websocket.StatusNormalClosure, "")
	var r e2etest.Reply
	e2etest.WaitUntil(t, 30*time.Second, "alice's turn once her terminal closed", func() bool {
		r = s.Chat(ctx, e2etest.TokenAlice, "coder", prefix+"-a", "Say hi.")
		return r.Status != 429
	})
	if r.Status != 200 || r.Final() == nil || r.Final().Error != "" {
		t.Errorf("alice's turn after closing a terminal: %d %s %+v", r.Status, r.Body, r.Final())
	}
	if n := len(e2etest.ChatContainers(t, prefix+"-1")); n != 0 {
		t.Errorf("the closed terminal's sandbox is left")
	}
	_, metrics := s.get(t, "/metrics", e2etest.TokenOperator)
	if !strings.Contains(metrics, `agentbox_limit_rejections_total{limit="terminals_per_user"} 1`) || !strings.Contains(metrics, `agentbox_limit_rejections_total{limit="sandboxes"} 0`) {
		t.Errorf("metrics:\n%s", grepLines(metrics, "agentbox_limit_rejections_total"))
	}
}
