package testrun

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
)

//go:embed report.html.tmpl
var reportTemplate string

// ReportScriptHash is the Content-Security-Policy source of the HTML
// report's one inline script ('sha256-...'): a page that shows the report
// in a sandboxed srcdoc frame, which has the page's policy, lets that
// script run and no other.
var ReportScriptHash = func() string {
	_, rest, _ := strings.Cut(reportTemplate, "<script>")
	script, _, _ := strings.Cut(rest, "</script>")
	sum := sha256.Sum256([]byte(script))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":     fmtMs,
	"pct":    func(f float64) string { return fmt.Sprintf("%.0f%%", f) },
	"cost":   fmtCost,
	"pretty": prettyJSON,
	"add":    func(a, b int) int { return a + b },
	"tokens": func(u chat.Usage) int64 { return u.InputTokens + u.OutputTokens },
	"lower":  strings.ToLower,
	"width":  func(part, total int) string { return fmt.Sprintf("%.2f%%", share(float64(part), float64(total))) },
	"fwidth": func(part, total float64) string { return fmt.Sprintf("%.2f%%", share(part, total)) },
	"msf":    func(ms float64) string { return fmtMs(int64(ms)) },
	"rest": func(rate float64, runs int) float64 {
		if runs == 0 {
			return 0
		}
		return 100 - rate
	},
	"typeOf": func(a *AssertionResult) string {
		if a.Assertion == nil || a.Assertion.Type == "" {
			return "equals"
		}
		return a.Assertion.Type
	},
}).Parse(reportTemplate))

func share(part, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return part / total * 100
}

func fmtCost(usd float64) string {
	switch {
	case usd == 0:
		return "$0"
	case usd < 0.01:
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// prettyJSON prints a value for people: text as it is, anything else as
// indented JSON.
func prettyJSON(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	b, err := json.MarshalIndent(normalize(v), "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// htmlView is what the HTML template renders.
type htmlView struct {
	Title     string
	Generated string
	Totals    Summary
	PassRate  float64
	Bad       int
	Suites    []*htmlSuite
}

type htmlSuite struct {
	*Report
	Cases     []*htmlCase
	Stability bool
	// Counts are the suite's statuses for its bar.
	Counts []statusCount
	Units  int
}

type statusCount struct {
	Status Status
	N      int
}

type htmlCase struct {
	ID     string
	Status Status
	Open   bool
	// Preview is a line of the input.
	Preview string
	Result  *Result
	// Runs are the runs of a case run several times, with its figures.
	Runs      []*Result
	Stability *StabilityResult
	Messages  []chat.Message
	Answer    string
	Timings   []timingPart
	TimingsMs float64
	Script    bool
}

type timingPart struct {
	Name  string
	Ms    float64
	Class string
}

// WriteHTML writes a self-contained HTML report (styles and scripts
// inline, nothing loaded from elsewhere): the totals, a chart of the
// suites' outcomes and of pass rates over runs, and each case with its
// input, answer, tool calls, assertions, turns, timings and cost; cases
// that did not pass come first and open.
func WriteHTML(w io.Writer, reports []*Report) error {
	t := Totals(reports)
	v := &htmlView{Title: "Agent test report", Generated: time.Now().Format("2006-01-02 15:04:05"), Totals: t, PassRate: passRate(t)}
	if len(reports) == 1 {
		v.Title = "Test report: " + reports[0].Name
	}
	for _, r := range reports {
		hs := &htmlSuite{Report: r, Stability: len(r.StabilityResults) > 0}
		counts := map[Status]int{}
		for _, res := range r.Results {
			hs.Cases = append(hs.Cases, caseView(res, nil, r.Kind))
			counts[res.Status]++
			hs.Units++
		}
		for _, sr := range r.StabilityResults {
			var runs []*Result
			for _, rd := range sr.RunDetails {
				runs = append(runs, rd.Result)
				counts[rd.Status]++
				hs.Units++
			}
			hs.Cases = append(hs.Cases, caseView(nil, &stabilityCase{sr, runs}, r.Kind))
		}
		for _, st := range []Status{StatusFailed, StatusError, StatusTimeout, StatusPassed, StatusSkipped} {
			if counts[st] > 0 {
				hs.Counts = append(hs.Counts, statusCount{st, counts[st]})
			}
		}
		sort.SliceStable(hs.Cases, func(i, j int) bool { return rank(hs.Cases[i].Status) < rank(hs.Cases[j].Status) })
		for _, c := range hs.Cases {
			if c.Status.bad() {
				v.Bad++
			}
		}
		v.Suites = append(v.Suites, hs)
	}
	return htmlTmpl.Execute(w, v)
}

type stabilityCase struct {
	sr   *StabilityResult
	runs []*Result
}

// rank orders cases: failures first, passes, skips last.
func rank(s Status) int {
	switch s {
	case StatusFailed, StatusError, StatusTimeout:
		return 0
	case StatusPassed:
		return 1
	}
	return 2
}

func caseView(res *Result, st *stabilityCase, kind Kind) *htmlCase {
	c := &htmlCase{Script: kind == KindScript}
	if st != nil {
		c.ID, c.Stability, c.Runs = st.sr.ID, st.sr, st.runs
		c.Status = StatusPassed
		switch {
		case st.sr.Runs == 0:
			c.Status = StatusSkipped
		case !st.sr.Stable:
			c.Status = StatusFailed
		}
		// The details shown are the first run that did not pass, else the
		// last run.
		res = st.runs[len(st.runs)-1]
		for _, r := range st.runs {
			if r.Status.bad() {
				res = r
				break
			}
		}
	} else {
		c.ID, c.Status = res.ID, res.Status
	}
	c.Result = res
	c.Open = c.Status.bad()
	if !c.Script {
		c.Preview = summarize(res.Input, 90)
		c.Messages = inputMessages(res.Input)
	}
	if res.Output != nil {
		c.Answer = prettyJSON(res.Output)
	}
	if tm := res.Timings; tm != nil {
		for _, p := range []timingPart{
			{"waiting for a sandbox", tm.SandboxWaitMS + tm.ChatWaitMS, "wait"},
			{"sandbox", tm.SandboxCreateMS, "sandbox"},
			{"Create hook", tm.HookCreateMS, "hook"},
			{"answer", tm.ExecuteMS, "exec"},
			{"Next hook", tm.HookNextMS, "hook"},
		} {
			if p.Ms >= 0.5 {
				c.Timings = append(c.Timings, p)
				c.TimingsMs += p.Ms
			}
		}
		// Against the turn's whole time, so the bar shows what the parts
		// leave out (loading the history, the done event) as a gap.
		c.TimingsMs = max(c.TimingsMs, tm.TotalMS)
	}
	return c
}

// inputMessages is a case's input as messages, for display.
func inputMessages(in any) []chat.Message {
	p, err := parseInput(in)
	if err != nil {
		return []chat.Message{{Role: chat.RoleUser, Content: preview(in, 4000)}}
	}
	return p.messages
}
