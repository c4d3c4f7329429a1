package web

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestApprovalDialog: with app.jsonc's policy asking before Bash, the
// coder's ls waits for the user; the page shows the request with its
// command and allow, always and deny; Allow runs it, the turn answers,
// and the request shows as allowed.
func TestApprovalDialog(t *testing.T) {
	s := startServer(t, `{
  "data_root": "./data",
  "auth": {"tokens": [{"token": "$ENV.AGENTBOX_WEB_TEST_TOKEN", "user": "alice"}]},
  "sandbox": {"runtime": "docker"},
  "approval": {"ask": ["Bash(ls:*)"], "timeout": "5m"}
}`)
	b := newBrowser(t)
	b.signIn(s)
	b.send("Please write a note")
	b.waitFor(turnTimeout, "the approval request", `!!document.querySelector('.msg.approval[role="alertdialog"]')`)
	b.waitText(10*time.Second, ".msg.approval pre.input", "ls -la")
	b.waitText(10*time.Second, ".msg.approval .meta", "Bash(ls:*)")
	b.snap("approval-asked")
	b.run(10*time.Second, "allow it", chromedp.Click(chromedp.Search(`//div[contains(@class,"approval")]//button[normalize-space()="Allow"]`)))
	b.waitText(turnTimeout, ".msg.answer strong", "notes.md")
	b.waitText(30*time.Second, ".msg.approval strong", "Allowed")
	b.waitFor(30*time.Second, "the turn ends", `!document.querySelector('button.stop')`)
	b.snap("approval-allowed")
}
