package web

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// previewPage is what the agent serves in its sandbox.
const previewPage = "Hello from the sandbox"

// TestWebPreview: the user asks the site assistant (Claude Code in Docker
// on a scripted model, a kept chat that declares port 8000) to serve a
// page; its agent starts a web server in the background; the chat's
// Preview button shows the page in a frame from the port's preview URL,
// on a preview host of its own.
func TestWebPreview(t *testing.T) {
	img := testenv.Image(t)
	testenv.ClaudeBin(t)
	bin := testenv.WebApp(t)
	app := filepath.Join(t.TempDir(), "app")
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), `{
		"data_root": "./data",
		"auth": {"tokens": [{"token": "$ENV.AGENTBOX_WEB_TEST_TOKEN", "user": "alice"}]},
		"sandbox": {"runtime": "docker"}
	}`)
	e2etest.Write(t, filepath.Join(app, "connectors", "site.conn.yao"),
		`{"label": "Scripted site model", "type": "scripted", "options": {"script": "site.yaml", "model": "claude-sonnet-4-5"}}`)
	cmd, _ := json.Marshal(`mkdir -p site && echo '<h1>` + previewPage + `</h1>' > site/index.html && ` +
		`(cd site && nohup python3 -m http.server 8000 --bind 127.0.0.1 > ../http.log 2>&1 &) && sleep 1 && echo started`)
	e2etest.Write(t, filepath.Join(app, "connectors", "site.yaml"), `turns:
  - when:
      contains: serve
    tool_calls:
      - name: Bash
        input:
          command: `+string(cmd)+`
          description: Serve the page on port 8000
  - when:
      after_tool_result: Bash
    text: The page is served on port 8000.
`)
	e2etest.Write(t, filepath.Join(app, "assistants", "site", "package.yao"), fmt.Sprintf(`{
		"name": "Site",
		"connector": "site",
		"sandbox": {
			"command": "claude",
			"image": %q,
			"keep_alive": "5m",
			"ports": [{"port": 8000, "label": "site"}],
			"arguments": {"max_turns": 5, "permission_mode": "bypassPermissions"}
		}
	}`, img))
	token := "web-test-token-" + fmt.Sprint(time.Now().UnixNano())
	s := &server{app: app, token: token, Server: e2etest.Serve(t, app, e2etest.Options{Bin: bin,
		Env: []string{"AGENTBOX_WEB_TEST_TOKEN=" + token}})}

	// The preview's frame (another site) stays in the page's process,
	// where the test can look into it.
	b := newBrowser(t, chromedp.Flag("disable-site-isolation-trials", true), chromedp.Flag("disable-features", "IsolateOrigins,site-per-process"))
	b.signIn(s)
	b.send("serve a page")
	b.waitText(turnTimeout, ".msg", "The page is served on port 8000.")

	b.run(10*time.Second, "open the preview", chromedp.Click(chromedp.CSS(`button.preview-button`)))
	b.waitFor(60*time.Second, "the preview's frame", `!!document.querySelector('iframe.preview-view')`)
	src, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('iframe.preview-view').src`))
	if err != nil {
		t.Fatal(err)
	}
	if u, err := url.Parse(src); err != nil || !strings.HasSuffix(u.Hostname(), ".preview.localhost") {
		t.Fatalf("the preview's frame is at %q, want a preview host", src)
	}
	if !b.inChildFrame(60*time.Second, `document.body && document.body.innerText.includes(`+fmt.Sprintf("%q", previewPage)+`)`) {
		b.screenshot()
		t.Fatal("the preview's frame does not show the page the agent serves")
	}
	b.snap("preview-1-view")
}
