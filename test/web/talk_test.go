package web

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestTalkWhileItWorks: with the coder's CLI kept between turns, the
// message box stays usable while a turn runs: a message sent then shows
// in the turn where it was sent, the agent answers it in the same turn,
// and the chat's history keeps it there after a reload; Interrupt stops a
// long command and the turn ends without the canceled outcome.
func TestTalkWhileItWorks(t *testing.T) {
	testenv.Image(t)
	testenv.ClaudeBin(t)
	// A copy of the app whose coder keeps its CLI between turns.
	src := filepath.Join(t.TempDir(), "app")
	if err := os.CopyFS(src, os.DirFS("app")); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(src, "assistants", "coder", "package.yao")
	b0, err := os.ReadFile(pkg)
	if err != nil {
		t.Fatal(err)
	}
	kept := strings.Replace(string(b0), `"timeout": "10m",`, `"timeout": "10m", "keep_alive": "5m",`, 1)
	if kept == string(b0) {
		t.Fatal("the coder's package.yao has no sandbox timeout to put keep_alive beside")
	}
	if err := os.WriteFile(pkg, []byte(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	s := serveCopy(t, src)
	b := newBrowser(t)
	b.signIn(s)

	b.send("Run the slow job")
	b.waitText(turnTimeout, ".msg.answer", "Starting the slow job.")
	b.waitFor(10*time.Second, "the Interrupt button while it works", `!!document.querySelector('button.interrupt')`)
	b.run(20*time.Second, "send a message while it works",
		chromedp.SendKeys(chromedp.CSS(`textarea[aria-label="Message"]`), "use tabs please"),
		chromedp.SendKeys(chromedp.CSS(`textarea[aria-label="Message"]`), "\r"),
	)
	b.waitText(30*time.Second, ".turn .msg.user.said", "use tabs please")
	b.snap("talk-said")
	b.waitText(turnTimeout, ".msg.answer", "Switched to tabs.")
	b.waitFor(60*time.Second, "the turn ends", `!document.querySelector('button.stop')`)
	id := b.chatID()
	var detail struct {
		History []struct {
			Role, Content string
			Said          []struct{ Content string } `json:"said"`
		} `json:"history"`
	}
	s.api(t, "GET", "/api/chats/"+id, &detail)
	if n := len(detail.History); n != 2 || len(detail.History[1].Said) != 1 || detail.History[1].Said[0].Content != "use tabs please" {
		t.Errorf("history: %+v, want the answer with the message said into it", detail.History)
	}
	b.run(30*time.Second, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Chats"]`)))
	b.waitText(20*time.Second, ".msg.user.said", "use tabs please")
	b.waitText(20*time.Second, ".msg.answer", "Switched to tabs.")

	// Interrupt: the long command stops, the chat goes on.
	b.run(20*time.Second, "ask for the long job",
		chromedp.SendKeys(chromedp.CSS(`textarea[aria-label="Message"]`), "Start the long job"),
		chromedp.SendKeys(chromedp.CSS(`textarea[aria-label="Message"]`), "\r"),
	)
	b.waitText(turnTimeout, ".msg.tool .target", "sleep 300")
	b.run(10*time.Second, "interrupt", chromedp.Click(chromedp.CSS(`button.interrupt`)))
	b.waitText(60*time.Second, ".msg.notice", "interrupted by its user")
	b.waitFor(60*time.Second, "the interrupted turn ends", `!document.querySelector('button.stop')`)
	b.waitFor(10*time.Second, "not shown as stopped", `![...document.querySelectorAll('.usage')].some(e => e.textContent.includes('Stopped'))`)
	b.snap("talk-interrupted")
}
