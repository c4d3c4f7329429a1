package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/testrun"
)

// progressOptions configure a test progress printer.
type progressOptions struct {
	// Verbose prints each case's answer, turns and logs.
	Verbose bool
	// Live keeps a status line (cases done, passed, failed, time) at the
	// bottom, rewritten as the run goes: only on a terminal. Without it
	// every line is plain.
	Live bool
	// Color uses ANSI styles.
	Color bool
	// Answers prints each case's answer (a run of one message).
	Answers bool
}

// progress prints a test run as it goes: a line per suite, a line per
// finished case (with why it failed), and on a terminal a live status
// line. Event is safe to call from several goroutines.
type progress struct {
	w    io.Writer
	opts progressOptions

	mu     sync.Mutex
	start  time.Time
	status string // the live line as last drawn ("" when none)
	last   *testrun.Event
	stop   chan struct{}
	done   chan struct{}
}

func newProgress(w io.Writer, opts progressOptions) *progress {
	p := &progress{w: w, opts: opts, start: time.Now()}
	if opts.Live {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.tick()
	}
	return p
}

func (p *progress) style(style, s string) string {
	if !p.opts.Color {
		return s
	}
	return style + s + styleReset
}

const styleGreen = "\x1b[32m"

// tick redraws the status line every second, so the time moves while a
// long case runs.
func (p *progress) tick() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.drawStatus()
			p.mu.Unlock()
		}
	}
}

// Stop ends the live line.
func (p *progress) Stop() {
	if p.stop == nil {
		return
	}
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	p.clearStatus()
	p.mu.Unlock()
}

// Header says what the run tests.
func (p *progress) Header(dir, connector string, suites []*testrun.Suite, filter *regexp.Regexp) {
	cases := 0
	for _, s := range suites {
		for _, c := range s.Cases {
			if filter == nil || filter.MatchString(c.ID) {
				cases++
			}
		}
		for _, t := range s.Tests {
			if filter == nil || filter.MatchString(t) {
				cases++
			}
		}
	}
	line := fmt.Sprintf("agentbox test · %s · %d suite%s, %d test%s", dir, len(suites), plural1(len(suites)), cases, plural1(cases))
	if connector != "" {
		line += " · connector " + connector
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.println(p.style(styleBold, line))
}

func plural1(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// println writes a line above the live status line.
func (p *progress) println(s string) {
	p.clearStatus()
	fmt.Fprintln(p.w, s)
	p.drawStatus()
}

func (p *progress) clearStatus() {
	if p.status != "" {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.status = ""
	}
}

func (p *progress) drawStatus() {
	if !p.opts.Live || p.last == nil {
		return
	}
	e := p.last
	s := fmt.Sprintf("%d/%d done · %s · %s · %s", e.Done, e.Total,
		p.style(styleGreen, fmt.Sprintf("%d passed", e.Passed)), p.failedText(e.Failed), fmtSince(p.start))
	p.clearStatus()
	fmt.Fprint(p.w, p.style(styleDim, "▸ ")+s)
	p.status = s
}

func (p *progress) failedText(n int) string {
	s := fmt.Sprintf("%d failed", n)
	if n > 0 {
		return p.style(styleRed, s)
	}
	return s
}

func fmtSince(t time.Time) string {
	d := time.Since(t).Round(100 * time.Millisecond)
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// Event prints one event of the run.
func (p *progress) Event(e *testrun.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = e
	switch e.Type {
	case testrun.EventStart:
		what := "case"
		if e.Kind == testrun.KindScript {
			what = "test"
		}
		line := fmt.Sprintf("%s (%d %s%s)", e.Suite, e.TotalCases, what, plural1(e.TotalCases))
		if e.Kind == testrun.KindAgent && e.Connector != "" {
			line += p.style(styleDim, " · connector "+e.Connector)
		}
		p.println(p.style(styleCyan, "▶ ") + line)
	case testrun.EventCaseStart:
		if !p.opts.Live && p.opts.Verbose {
			p.println(p.style(styleDim, strings.TrimRight(fmt.Sprintf("  … %s%s %s", e.ID, runSuffix(e.Run), e.Input), " ")))
		}
	case testrun.EventTurn:
		if p.opts.Verbose && e.Turn != nil {
			t := e.Turn
			p.println(p.style(styleDim, fmt.Sprintf("    turn %d of %s: %s → %s", t.Turn, e.ID, truncate(oneLine(textOf(t.Input)), 60), truncate(oneLine(textOf(t.Output)), 80))))
		}
	case testrun.EventResult:
		p.result(e)
	case testrun.EventStability:
		sr := e.Stability
		marks := ""
		for _, rd := range sr.RunDetails {
			marks += p.mark(rd.Status)
		}
		line := fmt.Sprintf("  %s %s passed %d/%d runs (%.0f%%, %s)", marks, e.ID, sr.Passed, sr.Runs, sr.PassRate, sr.StabilityClass)
		if !sr.Stable {
			line = p.style(styleYellow, line)
		}
		p.println(line)
	case testrun.EventSummary:
		if e.Message != "" {
			p.println(p.style(styleRed, "  could not run: "+e.Message))
		}
	case testrun.EventLog:
		p.println(p.style(styleDim, "  "+e.Message))
	}
	p.drawStatus()
}

func runSuffix(run int) string {
	if run > 0 {
		return fmt.Sprintf(" (run %d)", run)
	}
	return ""
}

func (p *progress) mark(s testrun.Status) string {
	switch s {
	case testrun.StatusPassed:
		return p.style(styleGreen, "✓")
	case testrun.StatusSkipped:
		return p.style(styleYellow, "−")
	case testrun.StatusTimeout:
		return p.style(styleRed, "⏱")
	}
	return p.style(styleRed, "✗")
}

func (p *progress) result(e *testrun.Event) {
	r := e.Result
	label := strings.ToUpper(string(r.Status))
	if !p.opts.Color {
		label = fmt.Sprintf("%-7s", label)
	} else {
		label = p.mark(r.Status)
	}
	line := fmt.Sprintf("  %s %s%s", label, r.ID, runSuffix(r.Run))
	if e.Input != "" {
		line += " " + p.style(styleDim, e.Input)
	}
	line += p.style(styleDim, " ("+fmtDur(r.DurationMs)+")")
	p.println(line)
	if r.Status != testrun.StatusPassed && r.Error != "" {
		p.println("      " + p.style(styleRed, truncate(oneLine(r.Error), 300)))
	}
	if r.Workspace != "" {
		p.println(p.style(styleDim, "      workspace kept: "+r.Workspace))
	}
	if p.opts.Answers && !p.opts.Verbose && r.Output != nil {
		p.println(textOf(r.Output))
	}
	if p.opts.Verbose {
		if r.Output != nil {
			p.println(p.style(styleDim, "      answer: "+truncate(oneLine(textOf(r.Output)), 200)))
		}
		for _, l := range r.Logs {
			p.println(p.style(styleDim, "      log: "+l))
		}
		for _, n := range r.Notes {
			p.println(p.style(styleDim, "      note: "+n))
		}
	}
}

func fmtDur(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d < time.Second {
		return fmt.Sprintf("%dms", ms)
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// textOf is a value as one text: strings as they are, the rest as JSON.
func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return contentText(v)
}

// Summary prints the totals, where the reports went and the verdict.
func (p *progress) Summary(reports []*testrun.Report, written []string, code int) {
	t := testrun.Totals(reports)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearStatus()
	parts := []string{fmt.Sprintf("%d passed", t.Passed)}
	if n := t.Failed; n > 0 {
		parts = append(parts, p.style(styleRed, fmt.Sprintf("%d failed", n)))
	}
	if t.Errors > 0 {
		parts = append(parts, p.style(styleRed, fmt.Sprintf("%d errors", t.Errors)))
	}
	if t.Timeouts > 0 {
		parts = append(parts, p.style(styleRed, fmt.Sprintf("%d timed out", t.Timeouts)))
	}
	if t.Skipped > 0 {
		parts = append(parts, p.style(styleYellow, fmt.Sprintf("%d skipped", t.Skipped)))
	}
	parts = append(parts, fmtSince(p.start))
	if tok := t.Usage.InputTokens + t.Usage.OutputTokens; tok > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", tok))
	}
	if t.Usage.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", t.Usage.CostUSD))
	}
	fmt.Fprintln(p.w)
	fmt.Fprintln(p.w, strings.Join(parts, " · "))
	for _, w := range written {
		fmt.Fprintln(p.w, p.style(styleDim, "report: "+w))
	}
	switch code {
	case 0:
		fmt.Fprintln(p.w, p.style(styleGreen+styleBold, "PASS"))
	case 1:
		fmt.Fprintln(p.w, p.style(styleRed+styleBold, "FAIL"))
	default:
		fmt.Fprintln(p.w, p.style(styleRed+styleBold, "FAIL: some tests could not run"))
	}
}
