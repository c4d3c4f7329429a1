package web

import (
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWebRewindAndFork: the coder (Claude Code in Docker) writes a note,
// then removes it; "Rewind here" on the first answer brings the note and
// the conversation back; the first message edited and sent again starts
// from before it, and "< 1/2 >" switches back to the other branch as it
// was left; "Fork" on the first answer opens a new chat with the note.
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

	// Edit the first message and send it again: the chat starts over from
	// before it (no note), and the message shows 2/2; the previous
	// version brings the note and its answer back.
	b.click(`button[aria-label="Edit message 1"]`)
	b.waitFor(10*time.Second, "the edit box", `!!document.querySelector('textarea[aria-label="Edit message 1"]')`)
	b.waitFor(10*time.Second, "edit the message", `(() => {
		const t = document.querySelector('textarea[aria-label="Edit message 1"]');
		Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set.call(t, "Please remove the note");
		t.dispatchEvent(new Event("input", {bubbles: true}));
		return true;
	})()`)
	b.click(`.msg.user.editing button[type=submit]`)
	b.waitFor(turnTimeout, "the edited turn's answer, stored", `!!document.querySelector('[aria-label="Version 2 of 2"]') && `+turnEnds)
	b.waitText(5*time.Second, ".thread .msg.user", "Please remove the note")
	if code := note(id); code != 404 {
		t.Errorf("after the edit, GET notes.md = %d, want 404 (the state before turn 1)", code)
	}
	b.snap("edited-message")
	// Version 1 is the branch as it was left: both turns, the note
	// removed by the second.
	b.click(`button[aria-label="Previous version"]`)
	b.waitFor(30*time.Second, "version 1", `!!document.querySelector('[aria-label="Version 1 of 2"]') && document.querySelectorAll('.thread .msg.user').length === 2`)
	b.waitText(5*time.Second, ".thread .msg.user", "Please write a note")
	if code := note(id); code != 404 {
		t.Errorf("back on version 1, GET notes.md = %d, want 404 (its second turn removed it)", code)
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
