package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/testrun"
)

// events of a small run: a suite with a passed and a failed case.
func progressEvents() []*testrun.Event {
	passed := &testrun.Result{ID: "a", Status: testrun.StatusPassed, DurationMs: 1200, Output: "Hello"}
	failed := &testrun.Result{ID: "b", Status: testrun.StatusFailed, DurationMs: 30, Error: "output does not contain \"x\"",
		Workspace: "/data/ws/b", Logs: []string{"a log line"}}
	return []*testrun.Event{
		{Type: testrun.EventStart, Suite: "qa: tests/inputs.jsonl", Kind: testrun.KindAgent, TotalCases: 2, Connector: "scripted.qa", Total: 2},
		{Type: testrun.EventCaseStart, ID: "a", Input: "hi", Total: 2},
		{Type: testrun.EventResult, ID: "a", Input: "hi", Result: passed, Done: 1, Total: 2, Passed: 1},
		{Type: testrun.EventResult, ID: "b", Result: failed, Done: 2, Total: 2, Passed: 1, Failed: 1},
	}
}

func TestProgressPlain(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := newProgress(&b, progressOptions{Verbose: true})
	for _, e := range progressEvents() {
		p.Event(e)
	}
	p.Stop()
	got := b.String()
	for _, want := range []string{"▶ qa: tests/inputs.jsonl (2 cases) · connector scripted.qa", "  … a hi\n", "  PASSED  a hi (1.2s)",
		"  FAILED  b (30ms)", `      output does not contain "x"`, "      workspace kept: /data/ws/b", "      log: a log line", "      answer: Hello"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.ContainsAny(got, "\x1b\r") {
		t.Errorf("plain output has terminal codes:\n%q", got)
	}
}

func TestProgressLive(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := newProgress(&b, progressOptions{Live: true, Color: true})
	for _, e := range progressEvents() {
		p.Event(e)
	}
	p.Stop()
	got := b.String()
	// The status line is drawn after each event and cleared before the
	// next line and at the end.
	for _, want := range []string{"2/2 done", "1 passed", "1 failed", "\r\x1b[K"} {
		if !strings.Contains(got, want) {
			t.Errorf("live output lacks %q:\n%q", want, got)
		}
	}
	if !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("the status line is not cleared at the end: %q", got[max(0, len(got)-40):])
	}
}
