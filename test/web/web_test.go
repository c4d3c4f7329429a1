// Package web tests the web app in a real browser: Debian's chromium,
// headless, driven by chromedp, against a real `agentbox serve` whose
// coder and reviewer run the real Claude Code CLI in Docker sandboxes on
// scripted models (app/). Under CI=true nothing here skips. When a test fails, a
// screenshot of the page is kept under .cache/artifacts/web/ and its path
// logged.
package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// server is a running agentbox serve on a copy of app/.
type server struct {
	*e2etest.Server
	app   string
	token string
}

// startServer serves a copy of app/; appJSONC, when given, replaces its
// app.jsonc.
func startServer(t *testing.T, appJSONC ...string) *server {
	t.Helper()
	testenv.Image(t)
	testenv.ClaudeBin(t)
	return serveCopy(t, "app", appJSONC...)
}

// serveCopy serves a copy of the app folder src; appJSONC, when given,
// replaces its app.jsonc.
func serveCopy(t *testing.T, src string, appJSONC ...string) *server {
	t.Helper()
	bin := testenv.WebApp(t)
	app := filepath.Join(t.TempDir(), "app")
	if err := os.CopyFS(app, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	for _, c := range appJSONC {
		e2etest.Write(t, filepath.Join(app, "app.jsonc"), c)
	}
	token := "web-test-token-" + fmt.Sprint(time.Now().UnixNano())
	return &server{app: app, token: token, Server: e2etest.Serve(t, app, e2etest.Options{Bin: bin, Env: []string{"AGENTBOX_WEB_TEST_TOKEN=" + token}})}
}

// api calls the server's API as the test user and decodes the answer.
func (s *server) api(t *testing.T, method, path string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// browser is a headless chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts chromium with a fresh profile. The flags keep it
// from reaching out to any service: this network is closed, and Chrome's
// background connections would otherwise be refused and retried. extra
// adds flags.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	exe := testenv.Chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	b := &browser{t: t, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot()
		}
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	return b
}

// snap keeps a screenshot of a step under .cache/artifacts/web when
// AGENTBOX_WEB_SCREENSHOTS is set (to look at the app as the test sees it).
func (b *browser) snap(step string) {
	if os.Getenv("AGENTBOX_WEB_SCREENSHOTS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("no screenshot: %v", err)
		return
	}
	dir := filepath.Join(testenv.RepoRoot(), ".cache", "artifacts", "web")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		p := filepath.Join(dir, step+".png")
		if err := os.WriteFile(p, png, 0o644); err == nil {
			b.t.Logf("screenshot %s", p)
		}
	}
}

// screenshot keeps the page as an artifact and logs its path and text.
func (b *browser) screenshot() {
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("no screenshot: %v", err)
		return
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	dir := filepath.Join(testenv.RepoRoot(), ".cache", "artifacts", "web")
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(b.t.Name(), "_") + "-" + time.Now().Format("150405") + ".png"
	if err := os.MkdirAll(dir, 0o755); err == nil {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err == nil {
			b.t.Logf("screenshot of the page: %s", p)
		}
	}
	b.t.Logf("page text:\n%s", text)
}

// run runs actions with a deadline, failing the test on an error.
func (b *browser) run(d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// waitFor waits until the JavaScript expression is true.
func (b *browser) waitFor(d time.Duration, what, expr string) {
	b.t.Helper()
	b.run(d, what, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(d)))
}

// waitText waits until the element sel holds text.
func (b *browser) waitText(d time.Duration, sel, text string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	x, _ := json.Marshal(text)
	b.waitFor(d, fmt.Sprintf("wait for %q in %s", text, sel),
		fmt.Sprintf(`[...document.querySelectorAll(%s)].some(e => e.textContent.includes(%s))`, q, x))
}

// chatID is the chat the page shows (#/c/<id>).
func (b *browser) chatID() string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	h, err := chromedp.Run(ctx, chromedp.Evaluate[string](`decodeURIComponent(location.hash.replace(/^#\/c\//, ""))`))
	if err != nil {
		b.t.Fatalf("read the address: %v", err)
	}
	return h
}

// signIn opens the app and signs in with the server's token.
func (b *browser) signIn(s *server) {
	b.run(30*time.Second, "open the app and sign in",
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), s.token),
		chromedp.Click(chromedp.CSS(`form.login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Chats"]`)),
	)
}

// send starts a new chat and sends prompt with the keyboard (Enter).
func (b *browser) send(prompt string) {
	b.run(20*time.Second, "send "+prompt,
		chromedp.Click(chromedp.Search(`//nav[@aria-label="Chats"]//button[normalize-space()="New chat"]`)),
		chromedp.WaitVisible(chromedp.CSS(`textarea[aria-label="Message"]`)),
		chromedp.SendKeys(chromedp.CSS(`textarea[aria-label="Message"]`), prompt),
		chromedp.SendKeys(chromedp.CSS(`textarea[aria-label="Message"]`), "\r"),
	)
}

const turnTimeout = 3 * time.Minute

// openTerminal opens a terminal in the chat's sandbox and waits for its
// shell's prompt.
func (b *browser) openTerminal() {
	b.t.Helper()
	b.run(10*time.Second, "open the terminal tab", chromedp.Click(chromedp.CSS(`#tab-terminal`)))
	b.run(10*time.Second, "open a terminal", chromedp.Click(chromedp.CSS(`button[aria-label="Open a terminal in the chat's sandbox"]`)))
	b.waitText(60*time.Second, ".terminal .status", "Shell in a docker sandbox")
	b.waitFor(30*time.Second, "a prompt", `document.querySelector('.xterm-rows')?.textContent.includes('$')`)
}

// terminalRun types a command line into the terminal. xterm.js reads its
// hidden textarea: the text goes in as typed text (per-key events would
// echo each character twice), Enter as a key.
func (b *browser) terminalRun(line string) {
	b.t.Helper()
	b.run(10*time.Second, "type "+line,
		chromedp.Focus(chromedp.CSS(`.xterm-helper-textarea`)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: line})
			return err
		}),
		chromedp.KeyEvent("\r"))
}

// stepper returns a function that runs a step of t as a subtest, the
// browser reporting to it; a failing step keeps a screenshot.
func (b *browser) stepper(t *testing.T) func(name string, f func(t *testing.T)) {
	return func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			parent := b.t
			b.t = t
			defer func() {
				if t.Failed() {
					b.screenshot()
				}
				b.t = parent
			}()
			f(t)
		})
	}
}

// TestWebApp drives the app through what its users do, one step after
// the other in one browser: sign in, send a message and watch the answer
// stream with its tool calls, open the file the agent wrote, upload a
// file, run ls in a terminal of the sandbox, stop a long turn, and reload
// in the middle of a turn. (A step run alone with -run skips what needs
// an earlier step's chat.)
func TestWebApp(t *testing.T) {
	s := startServer(t)
	b := newBrowser(t)
	b.signIn(s)
	step := b.stepper(t)
	var chatID string
	needChat := func(t *testing.T) {
		if chatID == "" {
			t.Fatal("needs the chat of TestWebApp/Answer, which did not make one")
		}
	}

	step("Answer", func(t *testing.T) {
		// The answer streams: the stop button shows while the turn runs,
		// the tool calls appear with their names, then the answer's
		// Markdown, then the usage.
		b.send("Please write a note")
		b.waitFor(60*time.Second, "the turn runs", `!!document.querySelector('button.stop')`)
		id := b.chatID()
		if id == "" {
			t.Fatal("the page does not name the new chat in its address")
		}
		b.waitFor(turnTimeout, "the Write call", `!!document.querySelector('details.tool[data-tool="Write"]')`)
		b.waitText(turnTimeout, ".msg.answer strong", "notes.md")
		b.waitFor(10*time.Second, "the Bash call", `!!document.querySelector('details.tool[data-tool="Bash"]')`)
		b.waitText(10*time.Second, ".usage", " in · ")
		b.waitFor(10*time.Second, "the turn ends", `!document.querySelector('button.stop') && !!document.querySelector('.composer button[type=submit]')`)
		// A tool call opens to its arguments and result.
		b.run(10*time.Second, "open the Bash call", chromedp.Click(chromedp.CSS(`details.tool[data-tool="Bash"] > summary`)))
		b.waitText(10*time.Second, ".msg.tool[open] .out pre", "notes.md")
		b.snap("1-answer")
		e2etest.NoContainers(t, id, 30*time.Second)
		chatID = id
	})

	step("OpenFile", func(t *testing.T) {
		needChat(t)
		// The file tree shows what the agent wrote; the viewer highlights it.
		b.waitText(30*time.Second, `[role="tree"] button`, "notes.md")
		b.run(10*time.Second, "open notes.md",
			chromedp.Click(chromedp.Search(`//ul[@role="tree"]//button[starts-with(normalize-space(), "notes.md")]`)))
		b.waitText(10*time.Second, ".viewer pre.code", "written by the agent")
		b.waitFor(10*time.Second, "markdown highlighted", `!!document.querySelector('.viewer pre.code .hljs-section')`)
		b.snap("2-viewer")
	})

	step("Upload", func(t *testing.T) {
		needChat(t)
		up := filepath.Join(t.TempDir(), "upload.txt")
		if err := os.WriteFile(up, []byte("uploaded from the browser\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		b.run(20*time.Second, "upload a file", chromedp.SetUploadFiles(chromedp.CSS(`#upload-input`), []string{up}))
		b.waitText(30*time.Second, `[role="tree"] button`, "upload.txt")
		var listing struct {
			Entries []struct{ Name string } `json:"entries"`
		}
		if code := s.api(t, "GET", "/api/chats/"+chatID+"/files?path=.", &listing); code != 200 {
			t.Fatalf("files: %d", code)
		}
		if !strings.Contains(fmt.Sprint(listing.Entries), "upload.txt") {
			t.Errorf("the workspace lacks the upload: %v", listing.Entries)
		}
	})

	step("Terminal", func(t *testing.T) {
		needChat(t)
		// A terminal in the chat's sandbox: ls shows the workspace.
		b.openTerminal()
		if n := len(e2etest.ChatContainers(t, chatID)); n != 1 {
			t.Errorf("%d containers for the terminal, want 1", n)
		}
		b.terminalRun("ls")
		b.waitText(30*time.Second, ".xterm-rows", "upload.txt")
		b.waitText(10*time.Second, ".xterm-rows", "notes.md")
		b.snap("3-terminal")
		b.run(10*time.Second, "close the terminal", chromedp.Click(chromedp.CSS(`button[aria-label="Close the terminal"]`)))
		b.waitText(30*time.Second, ".terminal .status", "sandbox is removed")
		e2etest.NoContainers(t, chatID, 30*time.Second)
		b.run(10*time.Second, "back to the files tab", chromedp.Click(chromedp.CSS(`#tab-files`)))
	})

	step("Stop", func(t *testing.T) {
		// Stop a long turn: the turn ends as stopped and its sandbox goes.
		b.send("Start the long job")
		b.waitText(turnTimeout, ".msg.tool .target", "sleep 300")
		id := b.chatID()
		if len(e2etest.ChatContainers(t, id)) == 0 {
			t.Error("no sandbox runs the long turn")
		}
		b.run(10*time.Second, "stop", chromedp.Click(chromedp.CSS(`button.stop`)))
		b.waitText(60*time.Second, ".usage", "Stopped")
		b.snap("4-stopped")
		e2etest.NoContainers(t, id, 30*time.Second)
	})

	step("Reload", func(t *testing.T) {
		// Reload in the middle of a turn: the page follows it to its end.
		b.send("Run the slow job")
		b.waitText(turnTimeout, ".msg.answer", "Starting the slow job.")
		id := b.chatID()
		b.run(30*time.Second, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Chats"]`)))
		if got := b.chatID(); got != id {
			t.Fatalf("after the reload the page shows chat %q, want %q", got, id)
		}
		b.waitText(20*time.Second, ".msg.user", "Run the slow job")
		b.waitText(20*time.Second, ".msg.answer", "Starting the slow job.")
		b.waitFor(10*time.Second, "still running after the reload", `!!document.querySelector('button.stop')`)
		b.snap("5-reloaded")
		b.waitText(turnTimeout, ".msg.answer", "The slow job finished.")
		b.waitText(10*time.Second, ".usage", " in · ")
		var detail struct {
			History []struct{ Role, Content string } `json:"history"`
		}
		s.api(t, "GET", "/api/chats/"+id, &detail)
		if n := len(detail.History); n != 2 || !strings.Contains(detail.History[1].Content, "The slow job finished.") {
			t.Errorf("history after the reloaded turn: %+v", detail.History)
		}
		e2etest.NoContainers(t, id, 30*time.Second)
	})
}
