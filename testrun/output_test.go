package testrun

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sampleReports are two finished suites with every kind of result: a
// passed, failed, errored, timed out and skipped case, a stability run
// with a flaky case, and a script suite.
func sampleReports() []*Report {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	meta := func(d time.Duration) *ReportMetadata {
		return &ReportMetadata{StartedAt: t0, CompletedAt: t0.Add(d), Version: "test", InputFile: "/app/assistants/qa/tests/inputs.jsonl"}
	}
	contains := &Assertion{Type: "contains", Value: "Paris"}
	agent := &Result{ID: "capital", Status: StatusPassed, Input: "Capital of France?", Output: "Paris.", DurationMs: 1200,
		Assertions: []*AssertionResult{{Passed: true, Message: `output contains "Paris"`, Assertion: contains, Actual: "Paris.", Expected: "Paris"}},
		Trace:      &Trace{Completion: &CompletionTrace{Model: "m1", Role: "assistant", Content: "Paris."}},
		Usage:      chat.Usage{InputTokens: 100, OutputTokens: 5, CostUSD: 0.0012},
		Timings:    &chat.Timings{SandboxCreateMS: 300, HookCreateMS: 2, ExecuteMS: 850, TotalMS: 1190}}
	failed := &Result{ID: "tools", Status: StatusFailed, Input: []any{map[string]any{"role": "user", "content": "Weather?"}}, Output: "Sunny.", DurationMs: 900,
		Error:      `tool "lookup" was not called; called: Bash`,
		Assertions: []*AssertionResult{{Passed: false, Message: `tool "lookup" was not called; called: Bash`, Assertion: &Assertion{Type: "tool_called", Value: "lookup"}}},
		Trace: &Trace{ToolCalls: []ToolCall{{ID: "t1", Tool: "Bash", Arguments: map[string]any{"command": "curl wttr.in | head"},
			Result: "sunny <b>22°C</b>"}}},
		ChatID: "test-1-tools-r1", Workspace: "/data/workspaces/test-user/test-1-tools-r1", Usage: chat.Usage{InputTokens: 300, OutputTokens: 40}}
	errored := &Result{ID: "hook", Status: StatusError, Input: "x", Error: "before script failed: boom", DurationMs: 3}
	timedOut := &Result{ID: "slow", Status: StatusTimeout, Input: "slow", Error: "timeout after 1s", DurationMs: 1001}
	skipped := &Result{ID: "later", Status: StatusSkipped, Input: "x", Error: "skip: true"}
	a := &Report{Kind: KindAgent, Name: "qa: tests/inputs.jsonl", Results: []*Result{agent, failed, errored, timedOut, skipped},
		Summary:     &Summary{Total: 5, AgentID: "qa", Connector: "scripted.qa", DurationMs: 3200},
		Environment: &Environment{UserID: "test-user", TeamID: "test-team", Locale: "en-us"}, Metadata: meta(3200 * time.Millisecond)}
	a.summarize()

	run := func(n int, st Status) *Result {
		return &Result{ID: "flaky", Run: n, Status: st, Input: "hi", Output: "?", DurationMs: int64(100 * n), Usage: chat.Usage{InputTokens: 10}}
	}
	runs := []*Result{run(1, StatusPassed), run(2, StatusFailed), run(3, StatusPassed), run(4, StatusPassed), run(5, StatusFailed)}
	runs[1].Error, runs[4].Error = "output does not contain \"Hello\"", "output does not contain \"Hello\""
	stable := []*Result{{ID: "steady", Run: 1, Status: StatusPassed, Input: "x"}, {ID: "steady", Run: 2, Status: StatusPassed, Input: "x"}}
	st := &Report{Kind: KindAgent, Name: "flaky: tests/inputs.jsonl", StabilityResults: []*StabilityResult{stability("flaky", "hi", nil, runs), stability("steady", "x", nil, stable)},
		Summary: &Summary{Total: 2, AgentID: "flaky", Connector: "scripted.flaky", RunsPerCase: 5, DurationMs: 1500}, Metadata: meta(1500 * time.Millisecond)}
	st.summarize()

	sc := &Report{Kind: KindScript, Name: "agents.qa.format", Metadata: meta(20 * time.Millisecond),
		Summary: &Summary{Total: 3, AgentID: "agents.qa.format", DurationMs: 20},
		Results: []*Result{
			{ID: "TestSlug", Status: StatusPassed, Input: "TestSlug", Logs: []string{"slugs ok"}},
			{ID: "TestGreeting", Status: StatusFailed, Input: "TestGreeting", Error: "greets by name",
				Assertion: &ScriptAssertionInfo{Type: "Equal", Expected: "Hi, Ada", Actual: "Hello, Ada!", Message: "greets by name"}},
			{ID: "TestList", Status: StatusSkipped, Input: "TestList", Error: "YAO_ONLY: Process is Yao-only"},
		}}
	sc.summarize()
	return []*Report{a, st, sc}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./testrun -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./testrun -update rewrites it):\n%s", name, got)
	}
}

func TestGoldenReports(t *testing.T) {
	reports := sampleReports()
	for _, f := range []struct {
		name   string
		format Format
	}{{"report.golden.jsonl", FormatJSONL}, {"report.golden.json", FormatJSON}, {"report.golden.md", FormatMarkdown}, {"report.golden.xml", FormatJUnit}} {
		var b bytes.Buffer
		if err := Write(&b, f.format, reports); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		golden(t, f.name, b.Bytes())
	}
}

func TestJSONLIsYaos(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := WriteJSONL(&b, sampleReports()[:2]); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		if !strings.HasPrefix(l, `{"type":`) {
			t.Errorf("line does not start with its type: %s", l)
		}
		types = append(types, m["type"].(string))
		switch m["type"] {
		case "start":
			if m["agent_id"] == nil || m["total_cases"] == nil || m["timestamp"] == nil {
				t.Errorf("start line = %s", l)
			}
		case "result":
			if m["id"] == nil || m["status"] == nil || m["duration_ms"] == nil {
				t.Errorf("result line = %s", l)
			}
		case "stability":
			if m["pass_rate"] == nil || m["stability_class"] == nil {
				t.Errorf("stability line = %s", l)
			}
		}
	}
	want := "start result result result result result summary start result result result result result stability result result stability summary"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

func TestJUnitParses(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := WriteJUnit(&b, sampleReports()); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tests != 10 || doc.Failures != 3 || doc.Errors != 2 || doc.Skipped != 2 {
		t.Errorf("totals: tests %d failures %d errors %d skipped %d", doc.Tests, doc.Failures, doc.Errors, doc.Skipped)
	}
	if s := doc.Suites[1]; s.Cases[0].Failure == nil || !strings.Contains(s.Cases[0].Failure.Message, "passed 3 of 5 runs (60%, unstable)") {
		t.Errorf("the flaky case = %+v", s.Cases[0])
	}
}

func TestHTMLReport(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleReports()); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`<div class="verdict bad" id="verdict">5 not passing</div>`,
		`tool &#34;lookup&#34; was not called; called: Bash`,
		`<code class="workspace">/data/workspaces/test-user/test-1-tools-r1</code>`,
		`sunny &lt;b&gt;22°C&lt;/b&gt;`, // tool output is escaped, never markup
		"Pass rate across 5 runs",
		`aria-label="flaky passed 60% of runs"`,
		"YAO_ONLY: Process is Yao-only",
		"expected: Hi, Ada · actual: Hello, Ada!",
		"$0.0012",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// Self-contained: nothing is loaded from elsewhere.
	for _, bad := range []string{"<link", "src=\"http", "@import", "url(http"} {
		if strings.Contains(html, bad) {
			t.Errorf("the report loads something: %q", bad)
		}
	}
	if strings.Index(html, ">tools<") > strings.Index(html, ">capital<") {
		t.Error("failed cases must come before passed ones")
	}
}

func TestFormatOf(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]Format{"r.jsonl": FormatJSONL, "r.JSON": FormatJSON, "a/b.html": FormatHTML, "r.htm": FormatHTML,
		"r.md": FormatMarkdown, "r.markdown": FormatMarkdown, "junit.xml": FormatJUnit} {
		if got, err := FormatOf(name); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %q %v", name, got, err)
		}
	}
	if _, err := FormatOf("r.pdf"); err == nil || !strings.Contains(err.Error(), `unknown format ".pdf"`) {
		t.Errorf("pdf = %v", err)
	}
}
