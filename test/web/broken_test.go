package web

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestWebBrokenAssistants serves an app in which some assistants have
// errors: their cards say they do not run, choosing one lists its errors
// with their positions and keeps the message box shut, and the others
// answer.
func TestWebBrokenAssistants(t *testing.T) {
	s := serveCopy(t, filepath.Join(testenv.RepoRoot(), "testdata", "apps", "bad-partial"), `{
		"data_root": "./data",
		"auth": {"tokens": [{"token": "$ENV.AGENTBOX_WEB_TEST_TOKEN", "user": "alice"}]},
		"sandbox": {"runtime": "local"}
	}`)
	b := newBrowser(t)
	b.signIn(s)
	b.waitFor(20*time.Second, "ten cards", `document.querySelectorAll('[role=radiogroup][aria-label=Assistants] [role=radio]').length === 10`)
	b.waitText(5*time.Second, `.card.unavailable[data-assistant="badfield"] .card-runs`, "does not run")
	b.waitText(5*time.Second, `.card[data-assistant="ok"]:not(.unavailable) .card-runs`, "chat")
	b.click(`.card[data-assistant="badfield"]`)
	b.waitText(5*time.Second, `.broken[data-broken="badfield"]`, "Misspelt does not run: its files have errors.")
	b.waitText(5*time.Second, `.broken[data-broken="badfield"] li`, `assistants/badfield/package.yao:4:16 unknown field "temprature" in options`)
	b.waitFor(5*time.Second, "the message box shut", `document.querySelector('#message').disabled && document.querySelector('#message').placeholder.includes('does not run')`)
	b.snap("broken-assistant")

	b.click(`.card[data-assistant="ok"]`)
	b.waitFor(5*time.Second, "the message box open", `!document.querySelector('#message').disabled && !document.querySelector('.broken')`)
	b.send("hi")
	b.waitText(60*time.Second, ".msg.answer", "Hello from an assistant that runs.")
}
