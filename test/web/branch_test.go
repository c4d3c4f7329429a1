package web

import (
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWebRewindAndFork: the coder (Claude Code in Docker) writes a note,
// then removes it; "Rewind here" on the first answer brings the note and
// the conversation back, "Fork" on it opens a new chat with the note.
func TestWebRewindAndFork(t *testing.T) {
	s := startServer(t)
	b := newBrowser(t)
	b.signIn(s)
	turnEnds := `!document.querySelector('button.stop') && !!document.querySelector('.composer button[type=submit]')`
	note := func(chatID string) int {
		return s.api(t, "GET", "/api/chats/"+url.PathEscape(chatID)+"/files?path=notes.md", nil)
	}

	b.send("Please write a note")
	b.waitText(turnTimeout, ".msg.answer strong", "notes.md")
	b.waitFor(30*time.Second, "the first turn ends", turnEnds)
	id := b.chatID()
	b.run(20*time.Second, "ask to remove it",
		chromedp.SendKeys(chromedp.CSS(`#message`), "Please remove the note\r"))
	b.waitFor(turnTimeout, "the second answer", `document.querySelectorAll('.turn .msg.answer').length >= 2 && `+turnEnds)
	if code := note(id); code != 404 {
		t.Fatalf("after the second turn, GET notes.md = %d, want 404", code)
	}

	// The stored turns carry their actions once the page loads them.
	b.run(30*time.Second, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Chats"]`)))
	b.waitFor(20*time.Second, "the turns' actions", `!!document.querySelector('button[aria-label="Rewind to turn 2"]')`)
	b.snap("turn-actions")
	b.click(`button[aria-label="Rewind to turn 1"]`)
	b.waitFor(30*time.Second, "one turn left", `document.querySelectorAll('.thread .msg.user').length === 1 && !document.querySelector('button[aria-label="Rewind to turn 2"]')`)
	b.waitText(5*time.Second, ".thread .msg.user", "Please write a note")
	if code := note(id); code != 200 {
		t.Errorf("after the rewind, GET notes.md = %d, want 200", code)
	}

	b.click(`button[aria-label="Fork at turn 1"]`)
	b.waitFor(30*time.Second, "the fork opens", `!!location.hash && !location.hash.endsWith(`+jsString(url.PathEscape(id))+`)`)
	fork := b.chatID()
	b.waitText(20*time.Second, ".thread .msg.user", "Please write a note")
	if code := note(fork); code != 200 {
		t.Errorf("the fork %s: GET notes.md = %d, want 200", fork, code)
	}
	b.waitText(10*time.Second, `.chats li.current .title`, "Please write a note")
}
