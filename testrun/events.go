package testrun

import (
	"bytes"
	"encoding/json"
	"time"
)

// Event types, in the order a suite produces them. start, result,
// stability and summary are the lines of Yao's JSONL report; the others
// are progress for people watching.
const (
	EventStart     = "start"
	EventCaseStart = "case_start"
	EventTurn      = "turn"
	EventResult    = "result"
	EventStability = "stability"
	EventSummary   = "summary"
	EventLog       = "log"
	// EventDone ends a run of any number of suites.
	EventDone = "done"
)

// Event is one step of a run: what the CLI prints as it goes, the server
// streams to the web app, and (its start, result, stability and summary
// events) what the JSONL report holds. Marshal gives its one encoding.
type Event struct {
	Type string    `json:"type"`
	Time time.Time `json:"timestamp"`
	// Suite names the suite (Report.Name) and Kind its kind.
	Suite string `json:"suite,omitempty"`
	Kind  Kind   `json:"kind,omitempty"`

	// start: the tested assistant (or script) and its case count.
	AgentID    string `json:"agent_id,omitempty"`
	TotalCases int    `json:"total_cases,omitempty"`
	Connector  string `json:"connector,omitempty"`

	// case_start, turn, result: the case, its run and a preview of its
	// input.
	ID    string `json:"id,omitempty"`
	Run   int    `json:"run,omitempty"`
	Input string `json:"input,omitempty"`
	// turn: one turn of a multi-turn case.
	Turn *TurnResult `json:"turn,omitempty"`
	// result: the case's outcome.
	Result *Result `json:"result,omitempty"`
	// stability: a case run several times.
	Stability *StabilityResult `json:"stability,omitempty"`
	// summary: the suite's counts; done: the whole run's.
	Summary *Summary `json:"summary,omitempty"`
	// log: a line for people (a before-all function's output, a kept
	// workspace, a lowered --parallel).
	Message string `json:"message,omitempty"`

	// Done and Total count the run's units (a case's run, a test
	// function) finished and planned, over every suite.
	Done  int `json:"done"`
	Total int `json:"total"`
	// Passed and Failed count the finished units that passed and that
	// failed, errored or timed out.
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// Marshal encodes the event as one JSON line (without the newline).
func (e *Event) Marshal() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		// Results hold JSON-decoded values only; this cannot happen.
		b, _ = json.Marshal(map[string]string{"type": EventLog, "message": "event not encoded: " + err.Error()})
	}
	return b
}

// line is a JSON object whose keys keep their order, so that each JSONL
// line starts with its type as Yao's do.
type line []field

type field struct {
	k string
	v any
}

// MarshalJSON writes the fields in order.
func (l line) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalLine(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(bytes.TrimSuffix(v, []byte("\n")))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// add appends a field unless its value is empty.
func (l line) add(k string, v any, keep bool) line {
	if !keep {
		return l
	}
	return append(l, field{k, v})
}

// yaoLine is the event as the line Yao's JSONL report writes for it
// (start, result, stability, summary), with agentbox's fields after
// Yao's; nil for events that report has no line for.
func (e *Event) yaoLine() line {
	switch e.Type {
	case EventStart:
		return line{{"type", "start"}, {"timestamp", e.Time.Format(time.RFC3339)}, {"agent_id", e.AgentID},
			{"total_cases", e.TotalCases}, {"suite", e.Suite}, {"kind", e.Kind}}.add("connector", e.Connector, e.Connector != "")
	case EventResult:
		r := e.Result
		l := line{{"type", "result"}, {"id", r.ID}, {"status", r.Status}, {"duration_ms", r.DurationMs}}
		l = l.add("output", r.Output, r.Output != nil).add("error", r.Error, r.Error != "").add("trace", r.Trace, r.Trace != nil)
		l = l.add("run", r.Run, r.Run > 0).add("input", r.Input, true).add("assertions", r.Assertions, len(r.Assertions) > 0)
		l = l.add("metadata", r.Metadata, r.Metadata != nil).add("usage", r.Usage, true)
		l = l.add("workspace", r.Workspace, r.Workspace != "").add("chat_id", r.ChatID, r.ChatID != "")
		l = l.add("assertion", r.Assertion, r.Assertion != nil).add("stack_trace", r.StackTrace, r.StackTrace != "")
		return l.add("logs", r.Logs, len(r.Logs) > 0).add("notes", r.Notes, len(r.Notes) > 0).add("suite", e.Suite, true)
	case EventStability:
		sr := e.Stability
		return line{{"type", "stability"}, {"id", sr.ID}, {"runs", sr.Runs}, {"passed", sr.Passed}, {"failed", sr.Failed},
			{"pass_rate", sr.PassRate}, {"stable", sr.Stable}, {"stability_class", sr.StabilityClass}, {"avg_duration_ms", sr.AvgDurationMs},
			{"suite", e.Suite}}
	case EventSummary:
		s := e.Summary
		l := line{{"type", "summary"}, {"total", s.Total}, {"passed", s.Passed}, {"failed", s.Failed}, {"skipped", s.Skipped},
			{"errors", s.Errors}, {"timeouts", s.Timeouts}, {"duration_ms", s.DurationMs}}
		if s.RunsPerCase > 1 {
			l = append(l, field{"runs_per_case", s.RunsPerCase}, field{"total_runs", s.TotalRuns}, field{"overall_pass_rate", s.OverallPassRate},
				field{"stable_cases", s.StableCases}, field{"unstable_cases", s.UnstableCases})
		}
		return l.add("usage", s.Usage, true).add("error", e.Message, e.Message != "").add("suite", e.Suite, true)
	}
	return nil
}

// reportEvents are the events a finished report stands for, in order:
// start, results (or stabilities), summary.
func reportEvents(r *Report) []*Event {
	ev := []*Event{{Type: EventStart, Time: r.Metadata.StartedAt, Suite: r.Name, Kind: r.Kind, AgentID: r.Summary.AgentID,
		TotalCases: r.Summary.Total, Connector: r.Summary.Connector}}
	for _, res := range r.Results {
		ev = append(ev, &Event{Type: EventResult, Suite: r.Name, Kind: r.Kind, ID: res.ID, Run: res.Run, Result: res})
	}
	for _, sr := range r.StabilityResults {
		for _, rd := range sr.RunDetails {
			ev = append(ev, &Event{Type: EventResult, Suite: r.Name, Kind: r.Kind, ID: sr.ID, Run: rd.Run, Result: rd.Result})
		}
		ev = append(ev, &Event{Type: EventStability, Suite: r.Name, Kind: r.Kind, ID: sr.ID, Stability: sr})
	}
	return append(ev, &Event{Type: EventSummary, Time: r.Metadata.CompletedAt, Suite: r.Name, Kind: r.Kind, Summary: r.Summary, Message: r.Error})
}
