package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/e2etest"
)

// devApp is app/ without tokens: development mode, what `make demo` runs.
const devApp = `{"data_root": "./data", "sandbox": {"runtime": "docker"}}`

// attackerPage is a page of another site the developer happens to visit.
const attackerPage = `<!doctype html><html><head><meta charset="utf-8"><title>Cute cats</title></head>
<body><h1>Cute cats</h1><iframe name="sink"></iframe></body></html>`

// evalJSON runs a script that returns a promise of a value, in the page the
// browser shows, and decodes the value.
func (b *browser) evalJSON(d time.Duration, what, script string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => JSON.stringify(await (`+script+`)))()`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		b.t.Fatalf("%s: %s: %v", what, s, err)
	}
}

// wsOutcome is a script: whether a WebSocket to url opens ("open"), or
// closes without opening ("closed").
func wsOutcome(url string) string {
	return fmt.Sprintf(`new Promise(resolve => {
  const ws = new WebSocket(%q, ["agentbox.terminal.v1"]);
  ws.onopen = () => { resolve("open"); ws.close(); };
  ws.onclose = () => resolve("closed");
})`, url)
}

// TestDriveByPage: a development server (no tokens) trusts every request,
// so a page of another site the developer visits must reach nothing.
// Chromium on a page of another loopback origin tries what such a page
// can without asking the server first (a no-cors fetch with a JSON text
// body, one without Content-Type, a text/plain form whose body is JSON,
// a WebSocket terminal); then on a name that resolves to the server
// (DNS rebinding: same origin as far as the browser knows) it tries to
// read a chat's file, start a turn and open a terminal. Every attempt is
// refused before it starts anything; the developer's own page and curl
// keep working.
func TestDriveByPage(t *testing.T) {
	s := startServer(t, devApp)
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]
	// The developer's chat, with a file worth stealing.
	req, _ := http.NewRequest("PUT", s.URL+"/api/chats/secret-chat/files?path=secret.txt", strings.NewReader("the developer's secret"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("upload as curl would: %d", resp.StatusCode)
	}

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, attackerPage)
	}))
	defer evil.Close()
	// rebind.evil.example resolves to the server's address, as the
	// attacker's DNS answers once the page has loaded.
	b := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP rebind.evil.example 127.0.0.1"))

	b.run(30*time.Second, "open the attacker's page", chromedp.Navigate(evil.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`h1`)))
	turn := func(chatID string) string {
		b, _ := json.Marshal(map[string]any{"chat_id": chatID, "message": "Please write a note", "detach": true})
		return string(b)
	}
	var outcome string
	b.evalJSON(30*time.Second, "no-cors fetch", fmt.Sprintf(`fetch(%q, {method: "POST", mode: "no-cors", body: %q}).then(r => r.type)`,
		s.URL+"/api/assistants/coder/chat", turn("drive-nocors")), &outcome)
	if outcome != "opaque" {
		t.Errorf("no-cors fetch: %q", outcome)
	}
	b.evalJSON(30*time.Second, "no-cors fetch without Content-Type", fmt.Sprintf(`fetch(%q, {method: "POST", mode: "no-cors", body: new Blob([%q])}).then(r => r.type)`,
		s.URL+"/api/assistants/coder/chat", turn("drive-blob")), &outcome)
	// A text/plain form sends name=value: this name and value make the
	// body a JSON object.
	formJSON := turn("drive-form")
	b.evalJSON(60*time.Second, "text/plain form", fmt.Sprintf(`new Promise(resolve => {
  const f = document.createElement("form");
  f.method = "POST"; f.action = %q; f.enctype = "text/plain"; f.target = "sink";
  const i = document.createElement("input");
  i.name = %q; i.value = '"}';
  f.appendChild(i); document.body.appendChild(f);
  document.querySelector("iframe").addEventListener("load", () => resolve("loaded"), {once: true});
  f.submit();
})`, s.URL+"/api/assistants/coder/chat", strings.TrimSuffix(formJSON, "}")+`,"locale":"`), &outcome)
	b.evalJSON(30*time.Second, "cross-origin WebSocket", wsOutcome("ws://127.0.0.1:"+port+"/api/chats/drive-ws/terminal"), &outcome)
	if outcome != "closed" {
		t.Errorf("a page of another origin opened a terminal: %s", outcome)
	}

	// DNS rebinding: the page's own origin now reaches the server.
	rebound := "http://rebind.evil.example:" + port
	b.run(30*time.Second, "open the rebound name", chromedp.Navigate(rebound+"/"))
	var got struct {
		Read     int    `json:"read"`
		ReadBody string `json:"read_body"`
		List     int    `json:"list"`
		Turn     int    `json:"turn"`
		WS       string `json:"ws"`
	}
	b.evalJSON(60*time.Second, "the rebound page's requests", fmt.Sprintf(`(async () => {
  const out = {};
  let r = await fetch("/api/chats/secret-chat/files?path=secret.txt");
  out.read = r.status; out.read_body = await r.text();
  r = await fetch("/api/chats"); out.list = r.status;
  r = await fetch("/api/assistants/coder/chat", {method: "POST", headers: {"Content-Type": "application/json"}, body: %q});
  out.turn = r.status;
  out.ws = await %s;
  return out;
})()`, turn("drive-rebind"), wsOutcome("ws://rebind.evil.example:"+port+"/api/chats/drive-rebind-ws/terminal")), &got)
	if got.Read != 403 || strings.Contains(got.ReadBody, "secret") || !strings.Contains(got.ReadBody, "host_not_allowed") {
		t.Errorf("the rebound page read the developer's file: %d %s", got.Read, got.ReadBody)
	}
	if got.List != 403 || got.Turn != 403 || got.WS != "closed" {
		t.Errorf("the rebound page: chats %d, turn %d, terminal %s; want 403, 403, closed", got.List, got.Turn, got.WS)
	}

	// Nothing the pages tried started: no chat, no workspace, no sandbox.
	var chats struct {
		Data []struct{ ID string } `json:"data"`
	}
	if code := s.api(t, "GET", "/api/chats", &chats); code != 200 || len(chats.Data) != 0 {
		t.Errorf("chats after the attack: %d %+v", code, chats.Data)
	}
	for _, id := range []string{"drive-nocors", "drive-blob", "drive-form", "drive-ws", "drive-rebind", "drive-rebind-ws"} {
		if code := s.api(t, "GET", "/api/chats/"+id, nil); code != 404 {
			t.Errorf("chat %s: %d, want 404", id, code)
		}
		if c := e2etest.ChatContainers(t, id); len(c) > 0 {
			t.Errorf("a sandbox runs for %s: %v", id, c)
		}
	}
	if n := strings.Count(s.Logs.String(), "request refused"); n < 7 {
		t.Errorf("%d refusals logged, want 7 or more:\n%s", n, s.Logs.String())
	}

	// The developer's own page still works, in the same browser: it shows
	// the chat's files and may change state.
	b.run(30*time.Second, "open the app", chromedp.Navigate(s.URL+"/#/c/secret-chat"), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Chats"]`)))
	b.waitText(30*time.Second, `[role="tree"] button`, "secret.txt")
	var status int
	b.evalJSON(30*time.Second, "the app's own POST", `fetch("/api/chats/secret-chat/cancel", {method: "POST"}).then(r => r.status)`, &status)
	if status != 200 {
		t.Errorf("the app's own cancel: %d", status)
	}
}
