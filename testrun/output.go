package testrun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Format is a report's file format.
type Format string

// Report formats. -o picks one by the file's extension.
const (
	FormatJSONL    Format = "jsonl"
	FormatJSON     Format = "json"
	FormatHTML     Format = "html"
	FormatMarkdown Format = "markdown"
	FormatJUnit    Format = "junit"
)

// FormatOf picks a report format by a file name's extension: .jsonl,
// .json, .html (.htm), .md (.markdown) or .xml (JUnit).
func FormatOf(name string) (Format, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	case ".json":
		return FormatJSON, nil
	case ".html", ".htm":
		return FormatHTML, nil
	case ".md", ".markdown":
		return FormatMarkdown, nil
	case ".xml":
		return FormatJUnit, nil
	}
	return "", fmt.Errorf("report %s: unknown format %q: use .jsonl, .json, .html, .md or .xml (JUnit)", name, filepath.Ext(name))
}

// Write writes the reports in format f.
func Write(w io.Writer, f Format, reports []*Report) error {
	switch f {
	case FormatJSONL:
		return WriteJSONL(w, reports)
	case FormatJSON:
		return WriteJSON(w, reports)
	case FormatHTML:
		return WriteHTML(w, reports)
	case FormatMarkdown:
		return WriteMarkdown(w, reports)
	case FormatJUnit:
		return WriteJUnit(w, reports)
	}
	return fmt.Errorf("unknown report format %q", f)
}

// JSONLWriter writes Yao's JSONL report as a run goes: a start line per
// suite, a result line per case (per run), a stability line per case run
// several times, and a summary line. It is safe for concurrent use; its
// first write error is kept and returned by Err.
type JSONLWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

// NewJSONLWriter writes to w.
func NewJSONLWriter(w io.Writer) *JSONLWriter { return &JSONLWriter{w: bufio.NewWriter(w)} }

// Event writes the event's line, if Yao's report has one for it, and
// flushes it.
func (j *JSONLWriter) Event(e *Event) {
	line := e.yaoLine()
	if line == nil {
		return
	}
	b, err := marshalLine(line)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	if err != nil {
		j.err = err
		return
	}
	if _, err := j.w.Write(b); err != nil {
		j.err = err
		return
	}
	j.err = j.w.Flush()
}

// Err is the first error writing failed with.
func (j *JSONLWriter) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

func marshalLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteJSONL writes finished reports as Yao's JSONL report.
func WriteJSONL(w io.Writer, reports []*Report) error {
	j := NewJSONLWriter(w)
	for _, r := range reports {
		for _, e := range reportEvents(r) {
			j.Event(e)
		}
	}
	return j.Err()
}

// WriteJSON writes Yao's JSON report: the report itself for one suite, a
// list of them for several.
func WriteJSON(w io.Writer, reports []*Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if len(reports) == 1 {
		return enc.Encode(reports[0])
	}
	return enc.Encode(reports)
}

// statusIcon marks a status in text reports.
func statusIcon(s Status) string {
	switch s {
	case StatusPassed:
		return "✅"
	case StatusFailed:
		return "❌"
	case StatusError:
		return "💥"
	case StatusTimeout:
		return "⏱️"
	case StatusSkipped:
		return "⏭️"
	}
	return "•"
}

// WriteMarkdown writes a Markdown report: the totals, then per suite a
// table of its cases and the details of those that did not pass.
func WriteMarkdown(w io.Writer, reports []*Report) error {
	var b strings.Builder
	t := Totals(reports)
	b.WriteString("# Agent Test Report\n\n")
	b.WriteString("| Metric | Value |\n| ------ | ----- |\n")
	fmt.Fprintf(&b, "| Suites | %d |\n| Total | %d |\n| Passed | %d |\n| Failed | %d |\n", len(reports), t.Total, t.Passed, t.Failed)
	if t.Skipped > 0 {
		fmt.Fprintf(&b, "| Skipped | %d |\n", t.Skipped)
	}
	if t.Errors > 0 {
		fmt.Fprintf(&b, "| Errors | %d |\n", t.Errors)
	}
	if t.Timeouts > 0 {
		fmt.Fprintf(&b, "| Timeouts | %d |\n", t.Timeouts)
	}
	fmt.Fprintf(&b, "| Pass Rate | %.1f%% |\n| Duration | %s |\n", passRate(t), fmtMs(t.DurationMs))
	fmt.Fprintf(&b, "| Tokens | %d in, %d out |\n", t.Usage.InputTokens, t.Usage.OutputTokens)
	if t.Usage.CostUSD > 0 {
		fmt.Fprintf(&b, "| Cost | $%.4f |\n", t.Usage.CostUSD)
	}
	b.WriteString("\n")
	for _, r := range reports {
		fmt.Fprintf(&b, "## %s\n\n", mdEscape(r.Name))
		s := r.Summary
		if r.Kind == KindAgent {
			fmt.Fprintf(&b, "Assistant `%s`", s.AgentID)
			if s.Connector != "" {
				fmt.Fprintf(&b, ", connector `%s`", s.Connector)
			}
			b.WriteString(". ")
		}
		fmt.Fprintf(&b, "%d passed, %d failed, %d skipped, %d errors, %d timeouts in %s.\n\n", s.Passed, s.Failed, s.Skipped, s.Errors, s.Timeouts, fmtMs(s.DurationMs))
		if r.Error != "" {
			fmt.Fprintf(&b, "**Could not run:** %s\n\n", mdEscape(r.Error))
		}
		if len(r.StabilityResults) > 0 {
			b.WriteString("| ID | Pass Rate | Runs | Class | Avg Duration | Each Run |\n| -- | --------- | ---- | ----- | ------------ | -------- |\n")
			for _, sr := range r.StabilityResults {
				var marks strings.Builder
				for _, rd := range sr.RunDetails {
					marks.WriteString(statusIcon(rd.Status))
				}
				fmt.Fprintf(&b, "| %s | %.0f%% | %d/%d | %s | %s | %s |\n", mdEscape(sr.ID), sr.PassRate, sr.Passed, sr.Runs, sr.StabilityClass, fmtMs(int64(sr.AvgDurationMs)), marks.String())
			}
			b.WriteString("\n")
			for _, sr := range r.StabilityResults {
				for _, rd := range sr.RunDetails {
					if rd.Result != nil && rd.Status != StatusPassed && rd.Status != StatusSkipped {
						writeMarkdownResult(&b, rd.Result)
					}
				}
			}
			continue
		}
		if len(r.Results) > 0 {
			b.WriteString("| | ID | Status | Duration | Tokens | Error |\n| - | -- | ------ | -------- | ------ | ----- |\n")
			for _, res := range r.Results {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s |\n", statusIcon(res.Status), mdEscape(res.ID), res.Status, fmtMs(res.DurationMs),
					res.Usage.InputTokens+res.Usage.OutputTokens, mdEscape(oneLineText(res.Error, 120)))
			}
			b.WriteString("\n")
		}
		for _, res := range r.Results {
			if res.Status != StatusPassed && res.Status != StatusSkipped {
				writeMarkdownResult(&b, res)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMarkdownResult(b *strings.Builder, res *Result) {
	title := res.ID
	if res.Run > 0 {
		title += fmt.Sprintf(" (run %d)", res.Run)
	}
	fmt.Fprintf(b, "### %s %s — %s (%s)\n\n", statusIcon(res.Status), mdEscape(title), res.Status, fmtMs(res.DurationMs))
	if res.Error != "" {
		fmt.Fprintf(b, "**Error:** %s\n\n", mdEscape(res.Error))
	}
	if s, ok := res.Input.(string); ok && res.Input != res.ID {
		fmt.Fprintf(b, "**Input:** %s\n\n", mdEscape(oneLineText(s, 300)))
	}
	if res.Output != nil {
		fmt.Fprintf(b, "**Answer:**\n\n```\n%s\n```\n\n", strings.ReplaceAll(preview(res.Output, 2000), "```", "'''"))
	}
	for _, a := range res.Assertions {
		mark := "✅"
		if !a.Passed {
			mark = "❌"
		}
		typ := "equals"
		if a.Assertion != nil && a.Assertion.Type != "" {
			typ = a.Assertion.Type
		}
		fmt.Fprintf(b, "- %s `%s` %s\n", mark, typ, mdEscape(a.Message))
	}
	if len(res.Assertions) > 0 {
		b.WriteString("\n")
	}
	if res.Trace != nil && len(res.Trace.ToolCalls) > 0 {
		b.WriteString("**Tool Calls**\n\n| Server | Tool | Status | Arguments |\n| ------ | ---- | ------ | --------- |\n")
		for _, tc := range res.Trace.ToolCalls {
			st := "OK"
			if tc.Error != "" {
				st = "ERR: " + oneLineText(tc.Error, 40)
			}
			fmt.Fprintf(b, "| %s | %s | %s | `%s` |\n", tc.Server, mdEscape(tc.Tool), mdEscape(st), strings.ReplaceAll(preview(tc.Arguments, 60), "|", "\\|"))
		}
		b.WriteString("\n")
	}
	if res.Assertion != nil {
		fmt.Fprintf(b, "**Assertion:** `%s` expected `%s`, got `%s`\n\n", res.Assertion.Type, preview(res.Assertion.Expected, 100), preview(res.Assertion.Actual, 100))
	}
	if res.Workspace != "" {
		fmt.Fprintf(b, "**Workspace kept:** `%s`\n\n", res.Workspace)
	}
	if res.StackTrace != "" {
		fmt.Fprintf(b, "```\n%s\n```\n\n", res.StackTrace)
	}
	if len(res.Logs) > 0 {
		fmt.Fprintf(b, "<details><summary>Logs</summary>\n\n```\n%s\n```\n\n</details>\n\n", strings.Join(res.Logs, "\n"))
	}
}

func mdEscape(s string) string {
	r := strings.NewReplacer("|", "\\|", "\n", " ", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func passRate(s Summary) float64 {
	n := s.Passed + s.Failed + s.Errors + s.Timeouts
	if n == 0 {
		return 0
	}
	return float64(s.Passed) / float64(n) * 100
}

// fmtMs prints milliseconds for people: "820ms", "1.2s", "2m05s".
func fmtMs(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// junit types: the schema CI systems read (Jenkins, GitLab, GitHub
// actions' test reporters).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemErr  string          `xml:"system-err,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

func secs(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// WriteJUnit writes JUnit XML: a testsuite per suite, a testcase per case
// (a case run several times passes when every run passed).
func WriteJUnit(w io.Writer, reports []*Report) error {
	t := Totals(reports)
	out := junitSuites{Name: "agentbox test", Time: secs(t.DurationMs)}
	for _, r := range reports {
		js := junitSuite{Name: r.Name, Time: secs(r.Summary.DurationMs), Timestamp: r.Metadata.StartedAt.UTC().Format(time.RFC3339)}
		if r.Summary.AgentID != "" {
			js.Properties = append(js.Properties, junitProperty{"assistant", r.Summary.AgentID})
		}
		if r.Summary.Connector != "" {
			js.Properties = append(js.Properties, junitProperty{"connector", r.Summary.Connector})
		}
		if r.Error != "" {
			js.Cases = append(js.Cases, junitCase{Name: "(suite)", Classname: r.Name, Time: "0", Error: &junitProblem{Message: r.Error, Type: "setup"}})
		}
		for _, res := range r.Results {
			js.Cases = append(js.Cases, junitFor(r.Name, res.ID, res))
		}
		for _, sr := range r.StabilityResults {
			jc := junitCase{Name: sr.ID, Classname: r.Name, Time: secs(int64(sr.AvgDurationMs * float64(len(sr.RunDetails))))}
			var runs []string
			for _, rd := range sr.RunDetails {
				line := fmt.Sprintf("run %d: %s", rd.Run, rd.Status)
				if rd.Error != "" {
					line += ": " + rd.Error
				}
				runs = append(runs, line)
			}
			switch {
			case sr.Runs == 0:
				jc.Skipped = &junitProblem{Message: "skipped"}
			case !sr.Stable:
				jc.Failure = &junitProblem{Type: string(sr.StabilityClass),
					Message: fmt.Sprintf("passed %d of %d runs (%.0f%%, %s)", sr.Passed, sr.Runs, sr.PassRate, sr.StabilityClass),
					Text:    strings.Join(runs, "\n")}
			}
			jc.SystemOut = strings.Join(runs, "\n")
			js.Cases = append(js.Cases, jc)
		}
		for _, c := range js.Cases {
			js.Tests++
			switch {
			case c.Failure != nil:
				js.Failures++
			case c.Error != nil:
				js.Errors++
			case c.Skipped != nil:
				js.Skipped++
			}
		}
		out.Tests += js.Tests
		out.Failures += js.Failures
		out.Errors += js.Errors
		out.Skipped += js.Skipped
		out.Suites = append(out.Suites, js)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func junitFor(suite, name string, res *Result) junitCase {
	if res.Run > 0 {
		name = fmt.Sprintf("%s (run %d)", name, res.Run)
	}
	jc := junitCase{Name: name, Classname: suite, Time: secs(res.DurationMs)}
	var detail []string
	for _, a := range res.Assertions {
		if !a.Passed {
			detail = append(detail, "assertion: "+a.Message)
		}
	}
	if res.Output != nil {
		detail = append(detail, "answer: "+preview(res.Output, 2000))
	}
	if res.Workspace != "" {
		detail = append(detail, "workspace kept: "+res.Workspace)
	}
	if res.StackTrace != "" {
		detail = append(detail, res.StackTrace)
	}
	p := &junitProblem{Message: res.Error, Type: string(res.Status), Text: strings.Join(detail, "\n")}
	switch res.Status {
	case StatusFailed:
		jc.Failure = p
	case StatusError, StatusTimeout:
		jc.Error = p
	case StatusSkipped:
		jc.Skipped = &junitProblem{Message: res.Error}
	}
	if len(res.Logs) > 0 {
		jc.SystemOut = strings.Join(res.Logs, "\n")
	}
	return jc
}
