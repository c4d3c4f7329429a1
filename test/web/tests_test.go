package web

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestWebTests: the user opens Tests, picks an assistant, sees its suites
// and cases, runs them twice each, watches the progress, and reads the
// report: the case that fails every other run is shown (the report's
// script runs in its sandboxed frame and filters to what did not pass),
// with the other formats to download.
func TestWebTests(t *testing.T) {
	s := serveCopy(t, filepath.Join(testenv.RepoRoot(), "testdata", "apps", "agenttest"), `{
		"data_root": "./data",
		"auth": {"tokens": [{"token": "$ENV.AGENTBOX_WEB_TEST_TOKEN", "user": "alice"}]},
		"sandbox": {"runtime": "local"}
	}`)
	// The report's sandboxed frame stays in the page's process, where
	// the test can look into it.
	b := newBrowser(t, chromedp.Flag("disable-features", "IsolateSandboxedIframes"))
	b.signIn(s)
	b.click(`.tests-link`)
	b.waitText(10*time.Second, `nav[aria-label="Assistants to test"] .title`, "Flaky")
	b.click(`nav[aria-label="Assistants to test"] [data-assistant="flaky"]`)
	b.waitText(10*time.Second, `fieldset.suite legend`, "flaky: tests/inputs.jsonl")
	b.waitText(5*time.Second, `table.cases .cid`, "says-hello")
	b.waitText(5*time.Second, `table.cases .tag`, "contains")
	b.snap("tests-1-suites")

	// Two runs of each case.
	b.waitFor(5*time.Second, "runs set to 2", `(() => {
		const i = document.querySelector('form.run-form input[type=number]');
		Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(i, '2');
		i.dispatchEvent(new Event('input', {bubbles: true}));
		return true;
	})()`)
	b.waitText(5*time.Second, `form.run-form button[type=submit]`, "Run 2 tests × 2")
	b.click(`form.run-form button[type=submit]`)
	b.waitFor(5*time.Second, "the run's address", `/^#\/tests\/flaky\/tr-/.test(location.hash)`)
	b.waitText(turnTimeout, `.progress-line`, "4/4 done")
	b.waitText(turnTimeout, `.progress-line .failed`, "1 failed")
	b.waitFor(turnTimeout, "the report", `!!document.querySelector('iframe.report') && document.querySelector('iframe.report').srcdoc.includes('says-hello')`)
	b.waitText(5*time.Second, `.downloads button`, "JUnit XML")
	b.waitText(5*time.Second, `ul[aria-label="Your test runs"] .tstate`, "failed")

	// The report's own script ran in its frame: it shows what did not pass
	// and hides the rest.
	ok := `document.body.textContent.includes('Pass rate across 2 runs') &&
		document.querySelectorAll('details.case.hidden').length > 0 &&
		[...document.querySelectorAll('details.case:not(.hidden)')].every(d => d.dataset.status !== 'passed')`
	if !b.inChildFrame(20*time.Second, ok) {
		b.screenshot()
		t.Fatal("the report's frame does not show only the cases that did not pass")
	}
	b.snap("tests-2-report")
	if strings.Contains(s.Logs.String(), "panic") {
		t.Error("the server panicked")
	}
}

// inChildFrame evaluates expr in the page's first child frame (in a world
// of its own, which sees the frame's DOM) until it is true or d passes.
func (b *browser) inChildFrame(d time.Duration, expr string) bool {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if b.evalInChildFrame(expr) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *browser) evalInChildFrame(expr string) bool {
	tree, err := chromedp.Call(b.ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil || len(tree.FrameTree.ChildFrames) == 0 {
		return false
	}
	world, err := chromedp.Call(b.ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: tree.FrameTree.ChildFrames[0].Frame.ID})
	if err != nil {
		return false
	}
	byValue := true
	res, err := chromedp.Call(b.ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: expr, ContextID: world.ExecutionContextID, ReturnByValue: &byValue})
	return err == nil && res.ExceptionDetails == nil && res.Result != nil && string(res.Result.Value) == "true"
}
