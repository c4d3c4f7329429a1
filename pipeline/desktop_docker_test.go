package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/desktop/desktoptest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/preview"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/scripted"
)

// screenshotHook saves the desktop's screen after the turn.
const screenshotHook = `
function Next(ctx, payload) {
  ctx.workspace.WriteFile("screen.png", ctx.computer.Screenshot());
  return null;
}
`

// desktopEnv is a kept env whose assistant has the desktop image's
// sandbox with a desktop (1024x768, view only or not) and its screen's
// preview, and whose agent (the real Claude Code CLI, its Bash tool call
// scripted) serves desktoptest.Page in the sandbox and opens it in the
// desktop's Chromium over CDP when asked to "show me".
func desktopEnv(t *testing.T, ctx context.Context, viewOnly bool) (*keptEnv, *preview.Manager) {
	t.Helper()
	img := testenv.CLIImage(t, "desktop")
	pv, err := preview.New(preview.Config{})
	if err != nil {
		t.Fatal(err)
	}
	script := "(" + desktoptest.ServeScript("8000") + ") && agentbox-desktop open http://127.0.0.1:8000/"
	e := newKeptEnv(t, ctx, time.Minute, []scripted.Turn{
		{When: &scripted.Match{Contains: "show me"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": script}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "It is on the desktop."},
	}, func(c *Config) { c.Previews = pv })
	e.coder.Sandbox.Image = img
	e.coder.Sandbox.MemoryBytes = 2 << 30
	e.coder.Sandbox.Desktop = &assistant.Desktop{Resolution: "1024x768", ViewOnly: viewOnly}
	e.coder.Sandbox.Ports = []assistant.Port{{Port: desktop.NoVNCPort, Label: assistant.DesktopLabel}}
	return e, pv
}

// keptSandbox is the chat's kept sandbox.
func (e *keptEnv) keptSandbox(t *testing.T, user, chatID string) sandbox.Sandbox {
	t.Helper()
	e.p.kept.mu.Lock()
	kc := e.p.kept.byKey[keptKey(user, chatID)]
	e.p.kept.mu.Unlock()
	if kc == nil {
		t.Fatal("the chat's sandbox is not kept")
	}
	return kc.sb
}

// desktopCDP runs agentbox-desktop's cdp command in sb: one DevTools
// call to the page, as the agent makes it.
func desktopCDP(t *testing.T, ctx context.Context, sb sandbox.Sandbox, method, params string) string {
	t.Helper()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{desktop.Supervisor, "cdp", method, params}, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cdp %s: %v %+v", method, err, res)
	}
	return res.Stdout
}

// pageTitle is the title of the desktop's page, where desktoptest.Page
// notes the input it got.
func pageTitle(t *testing.T, ctx context.Context, sb sandbox.Sandbox) string {
	t.Helper()
	out := desktopCDP(t, ctx, sb, "Runtime.evaluate", `{"expression": "document.title", "returnByValue": true}`)
	var res struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("cdp Runtime.evaluate: %v: %s", err, out)
	}
	return res.Result.Value
}

// waitListening waits until every declared port of alice's chat listens
// (a minute at most), and returns them.
func waitListening(t testing.TB, pv *preview.Manager, chatID string, base *url.URL) []preview.Status {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		l := pv.List("alice", chatID, base)
		if len(l) > 0 && !slices.ContainsFunc(l, func(p preview.Status) bool { return p.State != preview.StateListening }) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat's ports never all listened: %+v", l)
		}
	}
}

// previewBrowser is an HTTP client with a cookie jar that takes every
// preview host to srv, as browsers resolve *.localhost.
func previewBrowser(srv *httptest.Server) *http.Client {
	jar, _ := cookiejar.New(nil)
	addr := srv.Listener.Addr().String()
	return &http.Client{Jar: jar, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// openDesktop opens the chat's desktop as the web app does: noVNC's page
// on the desktop port's preview URL (its ticket becomes the cookie), then
// websockify's WebSocket to the VNC server, through the preview. It
// returns the VNC connection and the preview's origin.
func openDesktop(t *testing.T, ctx context.Context, pv *preview.Manager, srv *httptest.Server, b *http.Client, chatID string) (*desktoptest.VNC, string) {
	t.Helper()
	base, _ := url.Parse(srv.URL)
	waitListening(t, pv, chatID, base)
	u, err := pv.URL("alice", chatID, desktop.NoVNCPort, desktop.ViewPath, base)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "noVNC") {
		t.Fatalf("GET %s: %d %.200q", u, resp.StatusCode, page)
	}
	pu, _ := url.Parse(u)
	ws, _, err := websocket.Dial(ctx, "ws://"+pu.Host+"/"+desktop.NoVNCSocket, &websocket.DialOptions{HTTPClient: b, Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatalf("websockify through the preview: %v", err)
	}
	ws.SetReadLimit(64 << 20)
	vnc, err := desktoptest.DialVNC(websocket.NetConn(ctx, ws, websocket.MessageBinary))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vnc.Close() })
	if vnc.Width != 1024 || vnc.Height != 768 {
		t.Errorf("the VNC screen is %dx%d, want 1024x768", vnc.Width, vnc.Height)
	}
	return vnc, pu.Scheme + "://" + pu.Host
}

// clickAndType clicks the middle of the desktop's page and presses "a",
// over VNC, and waits until the VNC server has handled both.
func clickAndType(t *testing.T, vnc *desktoptest.VNC) {
	t.Helper()
	if err := vnc.Click(vnc.Width/2, vnc.Height*2/3); err != nil {
		t.Fatal(err)
	}
	if err := vnc.Key(0x61); err != nil {
		t.Fatal(err)
	}
	if err := vnc.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestDesktopInDocker: an assistant with sandbox.desktop gets the desktop
// image's sandbox with its desktop started before the agent runs, and the
// agent told of it; the agent (the real Claude Code CLI, its Bash tool
// call scripted) serves a page in the sandbox and opens it in the
// desktop's Chromium over CDP; the Next hook's ctx.computer.Screenshot()
// shows the page on the X display; the user's VNC connection, through the
// desktop's preview and websockify, drives the page (a click and a key).
func TestDesktopInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, pv := desktopEnv(t, ctx, false)
	if err := os.WriteFile(e.coder.Hooks, []byte(screenshotHook), 0o644); err != nil {
		t.Fatal(err)
	}

	if got, _ := e.turn(t, ctx, "c1", "show me the page"); got != "It is on the desktop." {
		t.Fatalf("answer %q", got)
	}
	var told, opened bool
	for _, r := range e.srv.Requests() {
		told = told || bytes.Contains(r.Body, []byte("agentbox-desktop open URL"))
		opened = opened || bytes.Contains(r.Body, []byte("opened http://127.0.0.1:8000/"))
	}
	if !told {
		t.Error("the agent was not told of its desktop (desktop.AgentHint)")
	}
	if !opened {
		t.Error("the Bash tool's result does not say the page opened")
	}
	dir, err := e.ws.Path("alice", "c1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "screen.png"))
	if err != nil {
		t.Fatalf("the Next hook's screenshot: %v", err)
	}
	shot := desktoptest.Decode(t, b)
	if b := shot.Bounds(); b.Dx() != 1024 || b.Dy() != 768 {
		t.Fatalf("screenshot of %v, want 1024x768", b)
	}
	// The hook's screenshot may come before Chromium painted the page it
	// loaded: the kept sandbox's screen shows it within a while.
	sb := e.keptSandbox(t, "alice", "c1")
	left, right := desktoptest.Halves(shot.Bounds())
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if desktoptest.Share(shot, left, desktoptest.Orange) >= 0.9 && desktoptest.Share(shot, right, desktoptest.Blue) >= 0.9 {
			break
		}
		png, err := desktop.Screenshot(ctx, sb)
		if err != nil {
			t.Fatal(err)
		}
		shot = desktoptest.Decode(t, png)
	}
	desktoptest.ShowsPage(t, shot)
	if !strings.Contains(desktop.AgentHint, "127.0.0.1:9222") {
		t.Error("the hint does not name the CDP address")
	}

	// The user drives the desktop through its preview.
	srv := httptest.NewServer(pv.Handler())
	defer srv.Close()
	vnc, _ := openDesktop(t, ctx, pv, srv, previewBrowser(srv), "c1")
	clickAndType(t, vnc)
	var title string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if title = pageTitle(t, ctx, sb); strings.Contains(title, " click") && strings.Contains(title, " key:a") {
			break
		}
	}
	if !strings.Contains(title, " click") || !strings.Contains(title, " key:a") {
		t.Errorf("the page did not get the VNC click and key: its title is %s", title)
	}
}

// TestDesktopViewOnlyInDocker: with computer.vnc's view_only the user
// watches the desktop through its preview (noVNC, websockify, the VNC
// server's screen) but cannot drive it: the VNC server takes the
// connection and drops its click and key, while the agent's CDP still
// drives the page. The desktop's preview keeps the access rules: without
// the cookie, with a tampered ticket or with another user's ticket, noVNC's
// page and websockify's WebSocket are refused.
func TestDesktopViewOnlyInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, pv := desktopEnv(t, ctx, true)
	if got, _ := e.turn(t, ctx, "c1", "show me the page"); got != "It is on the desktop." {
		t.Fatalf("answer %q", got)
	}
	sb := e.keptSandbox(t, "alice", "c1")
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{desktop.Supervisor, "status"}, Timeout: time.Minute})
	if err != nil || !strings.Contains(res.Stdout, `"view_only": true`) {
		t.Fatalf("the desktop's status: %v %+v", err, res)
	}
	srv := httptest.NewServer(pv.Handler())
	defer srv.Close()

	// Access: only alice's ticket opens the desktop.
	base, _ := url.Parse(srv.URL)
	vnc, origin := openDesktop(t, ctx, pv, srv, previewBrowser(srv), "c1")
	if l := pv.List("bob", "c1", base); len(l) != 0 {
		t.Errorf("bob lists alice's desktop: %+v", l)
	}
	if _, err := pv.URL("bob", "c1", desktop.NoVNCPort, "", base); err == nil {
		t.Error("bob has a URL of alice's desktop")
	}
	// Bob's preview of a chat of his (never dialed: no request reaches it).
	bob := pv.Open(preview.Owner{User: "bob", Chat: "c9"}, nil, []preview.Port{{Port: desktop.NoVNCPort}})
	defer bob.End("test over")
	bobURL, err := pv.URL("bob", "c9", desktop.NoVNCPort, "", base)
	if err != nil {
		t.Fatal(err)
	}
	bu, _ := url.Parse(bobURL)
	good, err := pv.URL("alice", "c1", desktop.NoVNCPort, desktop.NoVNCPath, base)
	if err != nil {
		t.Fatal(err)
	}
	tampered, _ := url.Parse(good)
	q := tampered.Query()
	q.Set(preview.TicketParam, "x"+q.Get(preview.TicketParam))
	tampered.RawQuery = q.Encode()
	for what, u := range map[string]string{
		"no ticket or cookie": origin + desktop.NoVNCPath,
		"a tampered ticket":   tampered.String(),
		"bob's ticket":        origin + desktop.NoVNCPath + "?" + bu.RawQuery,
	} {
		resp, err := previewBrowser(srv).Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("the desktop with %s: %d, want 403", what, resp.StatusCode)
		}
	}
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(origin, "http")+"/"+desktop.NoVNCSocket, &websocket.DialOptions{HTTPClient: previewBrowser(srv)})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("websockify without the cookie: %v (%v), want 403", err, resp)
	}

	// View only: the click and the key go nowhere; the agent's key (CDP)
	// arrives after them, and alone.
	clickAndType(t, vnc)
	desktopCDP(t, ctx, sb, "Input.dispatchKeyEvent", `{"type": "keyDown", "key": "b", "text": "b"}`)
	var title string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if title = pageTitle(t, ctx, sb); strings.Contains(title, " key:b") {
			break
		}
	}
	if title != desktoptest.Title+" key:b" {
		t.Errorf("a view-only desktop's page took input other than the agent's: its title is %s", title)
	}
}

// TestDesktopPooledInDocker: a new chat of a desktop assistant with
// sandbox.pool claims a pooled sandbox (made ahead of the chat, its
// bridge's sockets, the port relay's among them, linked in at the claim);
// its desktop starts on it, the agent opens its page there, and the
// user's VNC connection through the desktop's preview sees it.
func TestDesktopPooledInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Root(t, "for the warm pool to attach workspaces with mounts")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, pv := desktopEnv(t, ctx, false)
	e.coder.Sandbox.Pool = 1
	e.p.StartPool()
	waitPool(t, ctx, e.p, 1)
	var rec chattest.Recorder
	resp, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "coder", Messages: user("show me the page")}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	if tm := rec.Last().Final.Timings; resp.Content != "It is on the desktop." || tm.Sandbox != chat.SandboxPooled {
		t.Fatalf("%q on a %s sandbox, want the answer on a pooled one", resp.Content, tm.Sandbox)
	}
	opened := false
	for _, ev := range rec.Events() {
		opened = opened || ev.Type == TypePortOpened && ev.Event == chat.Start && ev.Props["port"] == desktop.NoVNCPort
	}
	if !opened {
		t.Error("no port_opened event for the desktop's port")
	}
	sb := e.keptSandbox(t, "alice", "c1")
	if title := pageTitle(t, ctx, sb); title != desktoptest.Title {
		t.Errorf("the desktop's page is %q, want the agent's", title)
	}
	srv := httptest.NewServer(pv.Handler())
	defer srv.Close()
	vnc, _ := openDesktop(t, ctx, pv, srv, previewBrowser(srv), "c1")
	if err := vnc.Sync(); err != nil {
		t.Fatalf("the desktop's screen over VNC: %v", err)
	}
}
