package testrun

import (
	"math"
	"time"

	"github.com/agentbox/agentbox/chat"
)

// Status is how a case (or one run of it) ended.
type Status string

// Statuses, as Yao names them.
const (
	StatusPassed  Status = "passed"
	StatusFailed  Status = "failed"
	StatusSkipped Status = "skipped"
	// StatusError: the case could not be run to an answer (the turn
	// failed, a before function threw, the input file is missing).
	StatusError Status = "error"
	// StatusTimeout: the case ran past its timeout.
	StatusTimeout Status = "timeout"
)

// bad reports whether s fails a run.
func (s Status) bad() bool { return s == StatusFailed || s == StatusError || s == StatusTimeout }

// Kind is what a suite tests.
type Kind string

// Suite kinds.
const (
	// KindAgent: JSONL cases (or one message) sent to an assistant.
	KindAgent Kind = "agent"
	// KindScript: Test... functions of a *_test.ts file.
	KindScript Kind = "script"
)

// Report is one suite's outcome, in the shape of Yao's test report (the
// JSON `yao agent test -o report.json` writes), with agentbox's additions
// (usage, workspaces, assertion details, turns).
type Report struct {
	Summary     *Summary     `json:"summary"`
	Environment *Environment `json:"environment,omitempty"`
	// Results has one entry per case (per run when Runs is 1).
	Results []*Result `json:"results,omitempty"`
	// StabilityResults has one entry per case when each ran more than once.
	StabilityResults []*StabilityResult `json:"stability_results,omitempty"`
	Metadata         *ReportMetadata    `json:"metadata"`
	// Error is why the suite could not run at all (its file does not
	// load, its assistant does not exist, a before-all function threw).
	Error string `json:"error,omitempty"`

	// Kind and Name say what the suite is (for reports with several).
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
}

// Summary counts a suite's outcome (Yao's Summary).
type Summary struct {
	Total      int    `json:"total"`
	Passed     int    `json:"passed"`
	Failed     int    `json:"failed"`
	Skipped    int    `json:"skipped"`
	Errors     int    `json:"errors"`
	Timeouts   int    `json:"timeouts"`
	DurationMs int64  `json:"duration_ms"`
	AgentID    string `json:"agent_id"`
	AgentPath  string `json:"agent_path,omitempty"`
	Connector  string `json:"connector"`

	RunsPerCase     int     `json:"runs_per_case,omitempty"`
	TotalRuns       int     `json:"total_runs,omitempty"`
	OverallPassRate float64 `json:"overall_pass_rate,omitempty"`
	StableCases     int     `json:"stable_cases,omitempty"`
	UnstableCases   int     `json:"unstable_cases,omitempty"`

	// Usage adds up the tokens and cost of every turn of the suite
	// (the tested assistant's, simulators' and judges').
	Usage chat.Usage `json:"usage"`
}

// Environment is who the cases ran as.
type Environment struct {
	UserID string `json:"user_id"`
	TeamID string `json:"team_id"`
	Locale string `json:"locale"`
}

// ReportMetadata says when and from what the suite ran.
type ReportMetadata struct {
	StartedAt   time.Time `json:"started_at"`
	CompletedAt time.Time `json:"completed_at"`
	Version     string    `json:"version,omitempty"`
	InputFile   string    `json:"input_file,omitempty"`
	OutputFile  string    `json:"output_file,omitempty"`
}

// Failed reports whether any case failed, errored or timed out, or the
// suite could not run.
func (r *Report) Failed() bool {
	if r.Error != "" {
		return true
	}
	s := r.Summary
	return s != nil && (s.Failed > 0 || s.Errors > 0 || s.Timeouts > 0)
}

// Result is one case's (or one test function's) outcome (Yao's Result,
// with agentbox's additions).
type Result struct {
	ID         string       `json:"id"`
	Status     Status       `json:"status"`
	Input      any          `json:"input"`
	Output     any          `json:"output,omitempty"`
	Expected   any          `json:"expected,omitempty"`
	DurationMs int64        `json:"duration_ms"`
	Error      string       `json:"error,omitempty"`
	Trace      *Trace       `json:"trace,omitempty"`
	Options    *CaseOptions `json:"options,omitempty"`
	// Metadata holds a dynamic case's turns and checkpoints as Yao puts
	// them: mode "dynamic", total_turns, turns, checkpoints.
	Metadata map[string]any `json:"metadata,omitempty"`

	// Run is the run's number (1-based) when the case ran several times.
	Run int `json:"run,omitempty"`
	// Assertions are each assertion's outcome.
	Assertions []*AssertionResult `json:"assertions,omitempty"`
	// Usage is what the case's turns cost.
	Usage chat.Usage `json:"usage"`
	// ChatID is the chat the case ran in; Workspace the folder of its
	// workspace, kept when the case did not pass.
	ChatID    string `json:"chat_id,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Notes say what of the case agentbox did not apply as Yao would.
	Notes []string `json:"notes,omitempty"`
	// Logs are what the test's functions logged (t.log, console.log in
	// script tests; before and after functions).
	Logs []string `json:"logs,omitempty"`
	// StackTrace and Assertion detail a failed script test.
	StackTrace string               `json:"stack_trace,omitempty"`
	Assertion  *ScriptAssertionInfo `json:"assertion,omitempty"`

	// Turns are every turn of a multi-turn case (the first for others).
	Turns []*TurnResult `json:"-"`
	// Checkpoints are a dynamic case's checkpoints.
	Checkpoints map[string]*CheckpointResult `json:"-"`
	// Timings of the case's last turn.
	Timings *chat.Timings `json:"timings,omitempty"`
}

// Trace is what the assistant did for its answer (Yao's Trace).
type Trace struct {
	Completion *CompletionTrace `json:"completion,omitempty"`
	ToolCalls  []ToolCall       `json:"tool_calls,omitempty"`
	Next       any              `json:"next,omitempty"`
}

// CompletionTrace is the model's answer.
type CompletionTrace struct {
	Model            string `json:"model,omitempty"`
	Role             string `json:"role,omitempty"`
	Content          any    `json:"content,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Refusal          string `json:"refusal,omitempty"`
}

// ToolCall is one tool the agent called, with its result (Yao's
// TraceToolCall).
type ToolCall struct {
	ID string `json:"id,omitempty"`
	// Server is the MCP server ("clock" of mcp__clock__now).
	Server string `json:"server,omitempty"`
	// Tool is the tool's name without the server prefix.
	Tool      string `json:"tool"`
	Arguments any    `json:"arguments,omitempty"`
	Result    any    `json:"result,omitempty"`
	Error     string `json:"error,omitempty"`
	// Name is the name the agent called it by.
	Name string `json:"-"`
}

// TurnResult is one turn of a case (Yao's TurnResult).
type TurnResult struct {
	Turn               int           `json:"turn"`
	Input              any           `json:"input"`
	Output             any           `json:"output,omitempty"`
	Response           *TurnResponse `json:"response,omitempty"`
	CheckpointsReached []string      `json:"checkpoints_reached,omitempty"`
	DurationMs         int64         `json:"duration_ms"`
	Error              string        `json:"error,omitempty"`

	Model   string        `json:"model,omitempty"`
	Usage   chat.Usage    `json:"usage"`
	Timings *chat.Timings `json:"timings,omitempty"`
	// Notices are the codes of the turn's notices (a stuck agent, ...).
	Notices []string `json:"notices,omitempty"`
}

// TurnResponse is a turn's full answer.
type TurnResponse struct {
	Content   any        `json:"content,omitempty"`
	Thinking  string     `json:"thinking,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Next      any        `json:"next,omitempty"`
}

// CheckpointResult is a dynamic case's checkpoint (Yao's).
type CheckpointResult struct {
	ID              string           `json:"id"`
	Reached         bool             `json:"reached"`
	ReachedAtTurn   int              `json:"reached_at_turn,omitempty"`
	Required        bool             `json:"required"`
	Passed          bool             `json:"passed"`
	Message         string           `json:"message,omitempty"`
	AgentValidation *AgentValidation `json:"agent_validation,omitempty"`
	Description     string           `json:"description,omitempty"`
	assertions      []*AssertionResult
}

// AgentValidation is what a judge said of a checkpoint.
type AgentValidation struct {
	Passed   bool   `json:"passed"`
	Reason   string `json:"reason,omitempty"`
	Criteria string `json:"criteria,omitempty"`
	Input    any    `json:"input,omitempty"`
	Response any    `json:"response,omitempty"`
}

// ScriptAssertionInfo is the first failed t.assert of a script test.
type ScriptAssertionInfo struct {
	Type     string `json:"type"`
	Expected any    `json:"expected,omitempty"`
	Actual   any    `json:"actual,omitempty"`
	Message  string `json:"message,omitempty"`
}

// StabilityClass classifies a case by its pass rate over runs.
type StabilityClass string

// Stability classes, as Yao defines them.
const (
	StabilityStable         StabilityClass = "stable"          // 100%
	StabilityMostlyStable   StabilityClass = "mostly_stable"   // 80-99%
	StabilityUnstable       StabilityClass = "unstable"        // 50-79%
	StabilityHighlyUnstable StabilityClass = "highly_unstable" // < 50%
)

// ClassifyStability returns the class of a pass rate (0-100).
func ClassifyStability(rate float64) StabilityClass {
	switch {
	case rate == 100:
		return StabilityStable
	case rate >= 80:
		return StabilityMostlyStable
	case rate >= 50:
		return StabilityUnstable
	}
	return StabilityHighlyUnstable
}

// StabilityResult is a case run several times (Yao's).
type StabilityResult struct {
	ID             string         `json:"id"`
	Input          any            `json:"input"`
	Expected       any            `json:"expected,omitempty"`
	Runs           int            `json:"runs"`
	Passed         int            `json:"passed"`
	Failed         int            `json:"failed"`
	PassRate       float64        `json:"pass_rate"`
	Consistency    float64        `json:"consistency"`
	Stable         bool           `json:"stable"`
	StabilityClass StabilityClass `json:"stability_class"`
	AvgDurationMs  float64        `json:"avg_duration_ms"`
	MinDurationMs  int64          `json:"min_duration_ms"`
	MaxDurationMs  int64          `json:"max_duration_ms"`
	StdDeviationMs float64        `json:"std_deviation_ms"`
	RunDetails     []*RunDetail   `json:"run_details"`
}

// RunDetail is one run of a case run several times: Yao's fields, then
// the run's whole result.
type RunDetail struct {
	Run        int    `json:"run"`
	Status     Status `json:"status"`
	DurationMs int64  `json:"duration_ms"`
	Output     any    `json:"output,omitempty"`
	Error      string `json:"error,omitempty"`
	// Result is the run's result (assertions, trace, usage, workspace).
	Result *Result `json:"result,omitempty"`
}

// stability computes a case's figures from its runs. A skipped run counts
// as neither passed nor failed.
func stability(id string, input, expected any, runs []*Result) *StabilityResult {
	sr := &StabilityResult{ID: id, Input: input, Expected: expected, MinDurationMs: math.MaxInt64}
	var total float64
	for _, r := range runs {
		sr.RunDetails = append(sr.RunDetails, &RunDetail{Run: r.Run, Status: r.Status, DurationMs: r.DurationMs, Output: r.Output, Error: r.Error, Result: r})
		switch {
		case r.Status == StatusPassed:
			sr.Passed++
		case r.Status.bad():
			sr.Failed++
		default:
			continue
		}
		sr.Runs++
		total += float64(r.DurationMs)
		sr.MinDurationMs = min(sr.MinDurationMs, r.DurationMs)
		sr.MaxDurationMs = max(sr.MaxDurationMs, r.DurationMs)
	}
	if sr.Runs == 0 {
		sr.MinDurationMs = 0
		return sr
	}
	sr.PassRate = float64(sr.Passed) / float64(sr.Runs) * 100
	sr.AvgDurationMs = total / float64(sr.Runs)
	var sq float64
	for _, rd := range sr.RunDetails {
		if rd.Status == StatusPassed || rd.Status.bad() {
			d := float64(rd.DurationMs) - sr.AvgDurationMs
			sq += d * d
		}
	}
	sr.StdDeviationMs = math.Sqrt(sq / float64(sr.Runs))
	sr.StabilityClass = ClassifyStability(sr.PassRate)
	sr.Stable = sr.PassRate == 100
	sr.Consistency = sr.PassRate / 100
	return sr
}

// summarize fills the report's counts from its results.
func (r *Report) summarize() {
	s := r.Summary
	s.Passed, s.Failed, s.Skipped, s.Errors, s.Timeouts = 0, 0, 0, 0, 0
	s.Usage = chat.Usage{}
	if len(r.StabilityResults) > 0 {
		s.TotalRuns = 0
		var rate float64
		n := 0
		for _, sr := range r.StabilityResults {
			s.TotalRuns += len(sr.RunDetails)
			for _, rd := range sr.RunDetails {
				addUsage(&s.Usage, rd.Result.Usage)
			}
			if sr.Runs == 0 {
				s.Skipped++
				continue
			}
			n++
			rate += sr.PassRate
			if sr.Stable {
				s.StableCases++
				s.Passed++
			} else {
				s.UnstableCases++
				s.Failed++
			}
		}
		if n > 0 {
			s.OverallPassRate = rate / float64(n)
		}
		return
	}
	for _, res := range r.Results {
		addUsage(&s.Usage, res.Usage)
		switch res.Status {
		case StatusPassed:
			s.Passed++
		case StatusFailed:
			s.Failed++
		case StatusSkipped:
			s.Skipped++
		case StatusError:
			s.Errors++
		case StatusTimeout:
			s.Timeouts++
		}
	}
}

// addUsage adds u to into (tokens, cost, turns, duration).
func addUsage(into *chat.Usage, u chat.Usage) {
	into.InputTokens += u.InputTokens
	into.OutputTokens += u.OutputTokens
	into.CacheReadTokens += u.CacheReadTokens
	into.CacheCreationTokens += u.CacheCreationTokens
	into.CostUSD += u.CostUSD
	into.Turns += u.Turns
	into.DurationMS += u.DurationMS
}

// Totals adds up the summaries of reports: what a run of several suites
// tells at its end.
func Totals(reports []*Report) Summary {
	var t Summary
	for _, r := range reports {
		s := r.Summary
		if s == nil {
			continue
		}
		t.Total += s.Total
		t.Passed += s.Passed
		t.Failed += s.Failed
		t.Skipped += s.Skipped
		t.Errors += s.Errors
		t.Timeouts += s.Timeouts
		t.DurationMs += s.DurationMs
		t.TotalRuns += s.TotalRuns
		addUsage(&t.Usage, s.Usage)
		if r.Error != "" {
			t.Errors++
		}
	}
	return t
}

// AnyFailed reports whether any suite failed or could not run.
func AnyFailed(reports []*Report) bool {
	for _, r := range reports {
		if r.Failed() {
			return true
		}
	}
	return false
}
