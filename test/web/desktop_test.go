package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/desktop/desktoptest"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// serveDesktop serves an app whose one assistant, desk, has a desktop
// (the desktop image, Claude Code on a scripted model that serves
// desktoptest.Page in the sandbox and opens it in the desktop's
// Chromium), for alice and bob.
func serveDesktop(t *testing.T) (s *server, bobToken string) {
	t.Helper()
	img := testenv.CLIImage(t, "desktop")
	testenv.ClaudeBin(t)
	bin := testenv.WebApp(t)
	app := filepath.Join(t.TempDir(), "app")
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), `{
		"data_root": "./data",
		"auth": {"tokens": [
			{"token": "$ENV.AGENTBOX_WEB_TEST_TOKEN", "user": "alice"},
			{"token": "$ENV.AGENTBOX_WEB_TEST_TOKEN_BOB", "user": "bob"}
		]},
		"sandbox": {"runtime": "docker"}
	}`)
	e2etest.Write(t, filepath.Join(app, "connectors", "desk.conn.yao"),
		`{"label": "Scripted desktop model", "type": "scripted", "options": {"script": "desk.yaml", "model": "claude-sonnet-4-5"}}`)
	cmd, _ := json.Marshal("(" + desktoptest.ServeScript("8000") + ") && agentbox-desktop open http://127.0.0.1:8000/")
	e2etest.Write(t, filepath.Join(app, "connectors", "desk.yaml"), `turns:
  - when:
      contains: show me
    tool_calls:
      - name: Bash
        input:
          command: `+string(cmd)+`
          description: Serve the page and show it on the desktop
  - when:
      after_tool_result: Bash
    text: The page is on the desktop.
`)
	e2etest.Write(t, filepath.Join(app, "assistants", "desk", "package.yao"), fmt.Sprintf(`{
		"name": "Desk",
		"connector": "desk",
		"sandbox": {
			"command": "claude",
			"image": %q,
			"desktop": {"resolution": "1280x800"},
			"arguments": {"max_turns": 5, "permission_mode": "bypassPermissions"}
		}
	}`, img))
	token := "web-test-token-" + fmt.Sprint(time.Now().UnixNano())
	bobToken = token + "-bob"
	s = &server{app: app, token: token, Server: e2etest.Serve(t, app, e2etest.Options{Bin: bin,
		Env: []string{"AGENTBOX_WEB_TEST_TOKEN=" + token, "AGENTBOX_WEB_TEST_TOKEN_BOB=" + bobToken}})}
	return s, bobToken
}

// canvasShows is a script for noVNC's frame: whether its canvas holds the
// remote screen with desktoptest.Page on it (the share of orange and of
// blue pixels in each half of the page's area, as desktoptest.Halves
// places them).
const canvasShows = `(() => {
	const c = document.querySelector('#noVNC_container canvas, canvas');
	if (!c || c.width < 100 || c.height < 100) return false;
	const g = c.getContext('2d'), w = c.width, h = c.height;
	const top = Math.floor(h * 2 / 5), bottom = h - Math.floor(h / 20), m = Math.floor(w / 25);
	const share = (x0, x1, rgb) => {
		const d = g.getImageData(x0, top, x1 - x0, bottom - top).data;
		let n = 0, hit = 0;
		for (let i = 0; i < d.length; i += 64) {
			n++;
			if (Math.abs(d[i] - rgb[0]) <= 24 && Math.abs(d[i + 1] - rgb[1]) <= 24 && Math.abs(d[i + 2] - rgb[2]) <= 24) hit++;
		}
		return hit / n;
	};
	return share(m, w / 2 - m, [0xff, 0x8c, 0x00]) > 0.9 && share(w / 2 + m, w - m, [0x1e, 0x50, 0xff]) > 0.9;
})()`

// TestWebDesktop: the user asks the desk assistant for a page; its agent
// serves the page in the sandbox and opens it in the desktop's Chromium;
// the chat's Desktop button shows the sandbox's screen, noVNC served from
// inside the sandbox through the desktop port's preview, and its canvas
// draws the page. Bob gets no preview of alice's chat, and the preview
// without a ticket or cookie is refused.
func TestWebDesktop(t *testing.T) {
	s, bob := serveDesktop(t)
	// The desktop's frame (another site) stays in the page's process,
	// where the test can look into its canvas.
	b := newBrowser(t, chromedp.Flag("disable-site-isolation-trials", true), chromedp.Flag("disable-features", "IsolateOrigins,site-per-process"))
	b.signIn(s)
	b.send("show me the page")
	b.waitText(turnTimeout, ".msg", "The page is on the desktop.")
	chat := b.chatID()

	b.run(10*time.Second, "open the desktop", chromedp.Click(chromedp.CSS(`button.desktop-button`)))
	b.waitFor(60*time.Second, "the desktop's frame", `!!document.querySelector('iframe.desktop-view')`)
	src, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('iframe.desktop-view').src`))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(src)
	if err != nil || !strings.HasSuffix(u.Hostname(), ".preview.localhost") || u.Path != desktop.NoVNCPath {
		t.Fatalf("the desktop's frame is at %q, want noVNC's page on a preview host", src)
	}
	if !b.inChildFrame(90*time.Second, canvasShows) {
		b.screenshot()
		t.Fatal("noVNC's canvas does not show the page the agent opened")
	}
	b.snap("desktop-1-view")

	// Access: the chat's ports are alice's; the preview needs a ticket.
	req, _ := http.NewRequest("GET", s.URL+"/api/chats/"+url.PathEscape(chat)+"/ports", nil)
	req.Header.Set("Authorization", "Bearer "+bob)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			Port int    `json:"port"`
			URL  string `json:"url"`
		} `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && len(list.Data) != 0 {
		t.Errorf("bob lists alice's chat's ports: %+v", list.Data)
	}
	bare := *u
	q := bare.Query()
	for k := range q {
		if strings.Contains(k, "ticket") {
			q.Del(k)
		}
	}
	bare.RawQuery = q.Encode()
	resp, err = previewClient(u.Port()).Get(bare.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the desktop's preview without a ticket: %s, want 403", resp.Status)
	}
}

// previewClient reaches *.preview.localhost on loopback, as browsers do.
func previewClient(port string) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, "127.0.0.1:"+port)
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
