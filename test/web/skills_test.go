package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWebSkills: the agent proposes skills while it works; the user sees
// the proposal in the chat, reviews it with its test outcome, approves
// it, and rejects another with a reason.
func TestWebSkills(t *testing.T) {
	s := startServer(t)
	b := newBrowser(t)
	b.signIn(s)

	// A proposal shows in the chat, with a link to review it.
	b.send("Make a skill please")
	b.waitText(turnTimeout, ".msg.skill strong", "Skill proposed: release-notes")
	b.waitText(turnTimeout, ".msg.answer", "I proposed a skill for you to review.")
	b.waitText(30*time.Second, ".skills-link .badge", "1")
	b.run(10*time.Second, "review it", chromedp.Click(chromedp.Search(`//div[contains(@class,"skill")]//a[text()="Review it"]`)))
	b.waitText(10*time.Second, ".proposal-detail h2", "release-notes")
	b.waitText(10*time.Second, ".proposal-detail pre.skill-md", "name: release-notes")
	b.waitText(10*time.Second, ".proposal-detail .file summary", "scripts/notes.sh")

	// Its test turn ran after the chat's turn: the outcome says the skill
	// was loaded and read, with the agent's answer.
	b.waitText(turnTimeout, ".outcome", "Completed")
	b.waitText(10*time.Second, ".outcome .loaded", "the skill was loaded")
	b.waitText(10*time.Second, ".outcome .used", "and used")
	b.waitText(10*time.Second, ".outcome pre.answer", "group the commits by kind")
	b.snap("skills-1-proposal")

	// Approve: it becomes one of the user's skills.
	b.run(10*time.Second, "approve", chromedp.Click(chromedp.Search(`//section[@aria-label="Decision"]//button[text()="Approve"]`)))
	b.waitText(10*time.Second, `.proposal-detail [aria-label="Status"]`, "approved")
	b.waitText(10*time.Second, `ul[aria-label="Your skills"] .title`, "release-notes")
	var mine struct {
		Data []struct{ Name string } `json:"data"`
	}
	if code := s.api(t, "GET", "/api/skills", &mine); code != 200 || len(mine.Data) != 1 || mine.Data[0].Name != "release-notes" {
		t.Fatalf("user skills = %d %+v", code, mine)
	}

	// Another proposal, rejected with a reason; "All" lists both.
	b.send("A lint skill too")
	b.waitText(turnTimeout, ".msg.skill strong", "Skill proposed: lint-fix")
	b.waitText(turnTimeout, ".msg.answer", "I proposed a skill for you to review.")
	b.run(10*time.Second, "review it", chromedp.Click(chromedp.Search(`//div[contains(@class,"skill")][.//strong[contains(., "lint-fix")]]//a[text()="Review it"]`)))
	b.waitText(10*time.Second, ".proposal-detail h2", "lint-fix")
	b.waitText(10*time.Second, ".test .hint", "Not tested yet.")
	b.run(10*time.Second, "reject with a reason",
		chromedp.SendKeys(chromedp.CSS(`#reject-reason`), "It does not name the linter."),
		chromedp.Click(chromedp.Search(`//section[@aria-label="Decision"]//button[text()="Reject"]`)))
	b.waitText(10*time.Second, `.proposal-detail [aria-label="Status"]`, "rejected")
	b.waitText(10*time.Second, `.proposal-detail [aria-label="Reason"]`, "It does not name the linter.")
	b.run(10*time.Second, "list all", chromedp.Click(chromedp.Search(`//nav[@aria-label="Skill proposals"]//button[text()="All"]`)))
	b.waitFor(10*time.Second, "both listed", `document.querySelectorAll('nav[aria-label="Skill proposals"] ul.plist li').length === 2`)
	b.snap("skills-2-rejected")
	if strings.Contains(s.Logs.String(), "panic") {
		t.Error("the server panicked")
	}
}
