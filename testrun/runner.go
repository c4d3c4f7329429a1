package testrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

// Backend runs the cases' turns and owns their chats: *pipeline.Pipeline.
// Only its public API is used, so a case runs exactly as a user's turn
// does.
type Backend interface {
	Chat(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error)
	App() *assistant.App
	// DeleteChat removes a passed case's chat: its history, memory and
	// workspace.
	DeleteChat(ctx context.Context, user, chatID string) error
	// Workspace finds a failed case's workspace, to say where it is kept.
	Workspace(ctx context.Context, user, chatID string) (*sandbox.Workspace, func(), error)
	// Upload puts a case's attached files into its workspace.
	Upload(ctx context.Context, req pipeline.UploadRequest) (*pipeline.Uploaded, error)
	// OpenTerminal gives a script test of a sandboxed assistant the
	// assistant's real sandbox (Terminal.Sandbox).
	OpenTerminal(ctx context.Context, req pipeline.TerminalRequest) (*pipeline.Terminal, error)
	// CallLLM runs a script test's ctx.llm calls on the app's connectors.
	CallLLM(ctx context.Context, call jsapi.LLMCall) jsapi.LLMResult
}

var _ Backend = (*pipeline.Pipeline)(nil)

// Defaults of Options.
const (
	DefaultUser    = "test-user"
	DefaultTeam    = "test-team"
	DefaultLocale  = "en-us"
	DefaultTimeout = 5 * time.Minute
)

// Options say how a run goes. The zero value runs every case once, one at
// a time, as DefaultUser, with DefaultTimeout per case.
type Options struct {
	// User and Team are who the cases run as (a case's user and team
	// apply when these are empty); Locale is the requests' locale.
	User, Team, Locale string
	// Connector replaces the tested assistant's connector for every case
	// (the backend must allow it: see AllowConnectors).
	Connector string
	// Timeout bounds each case whose file sets none.
	Timeout time.Duration
	// Runs runs each case this many times and reports its pass rate.
	Runs int
	// Parallel runs this many cases (runs) at once; Run lowers it to what
	// the app's limits allow one user (Limits).
	Parallel int
	// Filter keeps the cases (and test functions) whose id matches.
	Filter *regexp.Regexp
	// FailFast stops starting cases after the first that fails.
	FailFast bool
	// BeforeAll and AfterAll name functions of the tested assistant's
	// *_test.ts files run before and after each suite's cases
	// ("env_test.BeforeAll").
	BeforeAll, AfterAll string
	// Simulator is the simulator assistant of dynamic cases that name
	// none.
	Simulator string
	// Context is the context file's content (--ctx): who the cases run
	// as, their metadata, and a script test's scripted memory and sandbox.
	Context *ContextConfig
	// Memory is the hook memory store script tests use when the context
	// scripts none (the app's store: what hooks see).
	Memory jsapi.MemoryStore
	// RunID makes the run's chat ids unique (default: the start time).
	RunID string
	// Version is the product version put in the reports.
	Version string
	// Logger receives what the hook engine logs beside the tests.
	Logger *slog.Logger
}

// Suite is one set of tests: a JSONL file (or a message) for an assistant,
// or a *_test.ts file.
type Suite struct {
	Kind Kind
	// Name identifies the suite in reports: "qa: tests/inputs.jsonl",
	// "scripts.lib.expr".
	Name string
	// Assistant is the tested assistant (agent suites), or the assistant
	// whose src/ holds the script ("" for the app's scripts/).
	Assistant string
	// File is the suite's file (absolute); "" for a message.
	File string
	// Cases are an agent suite's cases.
	Cases []*Case
	// Tests are a script suite's Test... functions, in source order.
	Tests []string
	// Root is the folder File is relative to in messages and function
	// names: the assistant's folder, or the app's for scripts/.
	Root string

	// hooks is a script suite's compiled file.
	hooks *jsapi.Hooks
}

// runner runs suites. It is used by one Run call.
type runner struct {
	backend Backend
	app     *assistant.App
	opts    Options
	emit    func(*Event)
	scripts *scripts

	mu       sync.Mutex
	done     int
	total    int
	passed   int
	failed   int
	stopping bool
}

// Run runs the suites one after the other and returns a report per suite.
// Every event goes to emit as it happens (from several goroutines when
// Parallel > 1, one at a time). A suite that cannot run (its assistant is
// unknown, a before-all function fails) gets a report with Error set;
// Run's own error is only for bad options.
func Run(ctx context.Context, b Backend, suites []*Suite, opts Options, emit func(*Event)) ([]*Report, error) {
	if emit == nil {
		emit = func(*Event) {}
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	app := b.App()
	r := &runner{backend: b, app: app, opts: opts, scripts: newScripts(app, opts.Timeout)}
	var mu sync.Mutex
	r.emit = func(e *Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		r.mu.Lock()
		e.Done, e.Total, e.Passed, e.Failed = r.done, r.total, r.passed, r.failed
		r.mu.Unlock()
		emit(e)
	}
	for _, s := range suites {
		r.total += r.units(s)
	}
	reports := make([]*Report, 0, len(suites))
	for _, s := range suites {
		var rep *Report
		switch s.Kind {
		case KindScript:
			rep = r.runScriptSuite(ctx, s)
		default:
			rep = r.runAgentSuite(ctx, s)
		}
		reports = append(reports, rep)
	}
	total := Totals(reports)
	r.emit(&Event{Type: EventDone, Summary: &total})
	return reports, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.User == "" {
		o.User = DefaultUser
	}
	if o.Team == "" {
		o.Team = DefaultTeam
	}
	if o.Locale == "" {
		o.Locale = DefaultLocale
	}
	if o.Context != nil {
		if a := o.Context.Authorized; a != nil {
			o.User = cmpOr(a.UserID, o.User)
			o.Team = cmpOr(a.TeamID, a.TenantID, o.Team)
		}
		o.Locale = cmpOr(o.Context.Locale, o.Locale)
	}
	if err := sandbox.ValidateID("user", o.User); err != nil {
		return o, fmt.Errorf("test user: %w", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Runs <= 0 {
		o.Runs = 1
	}
	if o.Parallel <= 0 {
		o.Parallel = 1
	}
	if o.RunID == "" {
		o.RunID = time.Now().UTC().Format("20060102-150405")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// units is how many results the suite will produce.
func (r *runner) units(s *Suite) int {
	if s.Kind == KindScript {
		n := 0
		for _, t := range s.Tests {
			if r.opts.Filter == nil || r.opts.Filter.MatchString(t) {
				n++
			}
		}
		return n
	}
	n := 0
	for _, c := range s.Cases {
		switch {
		case r.opts.Filter != nil && !r.opts.Filter.MatchString(c.ID):
		case c.Skip:
			n++
		default:
			n += r.opts.Runs
		}
	}
	return n
}

// finished counts a finished unit.
func (r *runner) finished(st Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	switch {
	case st == StatusPassed:
		r.passed++
	case st.bad():
		r.failed++
		if r.opts.FailFast {
			r.stopping = true
		}
	}
}

func (r *runner) stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

// Limits lowers a parallelism to what the app lets one user have at once:
// limits.turns_per_user, and limits.sandboxes when the tested assistant
// is sandboxed. It returns the bound and why it applies ("" when it does
// not).
func Limits(app *assistant.App, assistantID string, parallel int) (int, string) {
	lim := assistant.DefaultLimits()
	if app.Config != nil {
		lim = app.Config.Limits.WithDefaults()
	}
	bound, why := lim.TurnsPerUser, fmt.Sprintf("app.jsonc limits.turns_per_user is %d", lim.TurnsPerUser)
	if a := app.Assistants[assistantID]; a != nil && a.Sandbox != nil && lim.Sandboxes < bound {
		bound, why = lim.Sandboxes, fmt.Sprintf("app.jsonc limits.sandboxes is %d", lim.Sandboxes)
	}
	if parallel > bound {
		return bound, why
	}
	return parallel, ""
}

func newReport(s *Suite, opts Options, kind Kind) *Report {
	rep := &Report{
		Kind: kind, Name: s.Name,
		Summary:     &Summary{AgentID: s.Assistant, AgentPath: s.Root},
		Environment: &Environment{UserID: opts.User, TeamID: opts.Team, Locale: opts.Locale},
		Metadata:    &ReportMetadata{StartedAt: time.Now(), Version: opts.Version, InputFile: s.File},
	}
	if opts.Runs > 1 && kind == KindAgent {
		rep.Summary.RunsPerCase = opts.Runs
	}
	return rep
}

// unit is one run of one case.
type unit struct {
	c   *Case
	run int
}

// runAgentSuite runs a suite's cases through the pipeline.
func (r *runner) runAgentSuite(ctx context.Context, s *Suite) *Report {
	rep := newReport(s, r.opts, KindAgent)
	a := r.app.Assistants[s.Assistant]
	conn := r.opts.Connector
	if a != nil && conn == "" {
		conn = a.Connector
	}
	rep.Summary.Connector = conn
	var cases []*Case
	for _, c := range s.Cases {
		if r.opts.Filter == nil || r.opts.Filter.MatchString(c.ID) {
			cases = append(cases, c)
		}
	}
	rep.Summary.Total = len(cases)
	r.emit(&Event{Type: EventStart, Suite: s.Name, Kind: KindAgent, AgentID: s.Assistant, TotalCases: len(cases), Connector: conn})
	finish := func() *Report {
		rep.Metadata.CompletedAt = time.Now()
		rep.Summary.DurationMs = rep.Metadata.CompletedAt.Sub(rep.Metadata.StartedAt).Milliseconds()
		rep.summarize()
		r.emit(&Event{Type: EventSummary, Suite: s.Name, Kind: KindAgent, Summary: rep.Summary, Message: rep.Error})
		return rep
	}
	if a == nil {
		rep.Error = fmt.Sprintf("unknown assistant %q (have: %s)", s.Assistant, strings.Join(sortedIDs(r.app), ", "))
		r.skipAll(cases)
		return finish()
	}
	parallel, why := Limits(r.app, s.Assistant, r.opts.Parallel)
	if why != "" {
		r.emit(&Event{Type: EventLog, Suite: s.Name, Message: fmt.Sprintf("--parallel %d lowered to %d: %s", r.opts.Parallel, parallel, why)})
	}

	var allData any
	if r.opts.BeforeAll != "" {
		data, logs, err := r.callTestFunc(ctx, s, r.opts.BeforeAll, jsapi.CtxArg, caseList(cases))
		r.logLines(s, "before-all", logs)
		if err != nil {
			rep.Error = fmt.Sprintf("before-all %s failed: %v", r.opts.BeforeAll, err)
			r.skipAll(cases)
			return finish()
		}
		allData = beforeData(data)
	}

	var units []unit
	results := map[*Case][]*Result{}
	var mu sync.Mutex
	for _, c := range cases {
		if c.Skip {
			res := &Result{ID: c.ID, Status: StatusSkipped, Input: c.Input, Expected: c.Expected, Error: "skip: true"}
			results[c] = []*Result{res}
			r.finished(StatusSkipped)
			r.emit(&Event{Type: EventResult, Suite: s.Name, Kind: KindAgent, ID: c.ID, Input: summarize(c.Input, 60), Result: res})
			continue
		}
		for run := 1; run <= r.opts.Runs; run++ {
			units = append(units, unit{c, run})
		}
	}
	work := make(chan unit)
	var wg sync.WaitGroup
	for range min(parallel, max(len(units), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				res := r.runCase(ctx, s, u.c, u.run)
				mu.Lock()
				results[u.c] = append(results[u.c], res)
				mu.Unlock()
			}
		}()
	}
	for _, u := range units {
		if r.stopped() || ctx.Err() != nil {
			break
		}
		work <- u
	}
	close(work)
	wg.Wait()

	for _, c := range cases {
		runs := results[c]
		if len(runs) == 0 {
			continue // --fail-fast or an interrupted run
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].Run < runs[j].Run })
		if r.opts.Runs > 1 && !c.Skip {
			sr := stability(c.ID, c.Input, c.Expected, runs)
			rep.StabilityResults = append(rep.StabilityResults, sr)
			r.emit(&Event{Type: EventStability, Suite: s.Name, Kind: KindAgent, ID: c.ID, Stability: sr})
			continue
		}
		if c.Skip && r.opts.Runs > 1 {
			rep.StabilityResults = append(rep.StabilityResults, stability(c.ID, c.Input, c.Expected, runs))
			continue
		}
		rep.Results = append(rep.Results, runs...)
	}
	if r.opts.AfterAll != "" {
		var all []*Result
		for _, c := range cases {
			all = append(all, results[c]...)
		}
		_, logs, err := r.callTestFunc(context.WithoutCancel(ctx), s, r.opts.AfterAll, jsapi.CtxArg, resultList(all), allData)
		r.logLines(s, "after-all", logs)
		if err != nil {
			r.emit(&Event{Type: EventLog, Suite: s.Name, Message: fmt.Sprintf("after-all %s failed: %v", r.opts.AfterAll, err)})
		}
	}
	return finish()
}

// skipAll counts the units of cases that will not run as finished.
func (r *runner) skipAll(cases []*Case) {
	for _, c := range cases {
		n := 1
		if !c.Skip {
			n = r.opts.Runs
		}
		for range n {
			r.finished(StatusSkipped)
		}
	}
}

func (r *runner) logLines(s *Suite, who string, lines []string) {
	for _, l := range lines {
		r.emit(&Event{Type: EventLog, Suite: s.Name, Message: who + ": " + l})
	}
}

func sortedIDs(app *assistant.App) []string {
	ids := make([]string, 0, len(app.Assistants))
	for id := range app.Assistants {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// chatID is the chat a case's run uses: unique per run of agentbox test,
// case and run.
func (r *runner) chatID(c *Case, run int, role string) string {
	id := fmt.Sprintf("test-%s-%s-r%d", r.opts.RunID, safeID(c.ID), run)
	if role != "" {
		id += "-" + role
	}
	if len(id) > sandbox.MaxIDLen {
		id = id[:sandbox.MaxIDLen]
	}
	return id
}

// safeID keeps a case id's characters that a chat id may hold.
func safeID(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() > 48 {
		return b.String()[:48]
	}
	return b.String()
}

// runCase runs one run of a case, with its before and after functions,
// and reports it.
func (r *runner) runCase(ctx context.Context, s *Suite, c *Case, run int) *Result {
	res := &Result{ID: c.ID, Input: c.Input, Expected: c.Expected, Options: c.Options, ChatID: r.chatID(c, run, ""), Notes: c.notes()}
	if r.opts.Runs > 1 {
		res.Run = run
	}
	r.emit(&Event{Type: EventCaseStart, Suite: s.Name, Kind: KindAgent, ID: c.ID, Run: res.Run, Input: summarize(c.Input, 80)})
	start := time.Now()
	timeout := c.TimeoutOr(r.opts.Timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var before any
	ran := false
	if c.Before != "" {
		data, logs, err := r.callTestFunc(cctx, s, c.Before, jsapi.CtxArg, caseArg(c))
		res.Logs = append(res.Logs, logs...)
		if err != nil {
			res.Status, res.Error = StatusError, fmt.Sprintf("before script failed: %v", err)
		}
		before = beforeData(data)
	}
	if res.Status == "" {
		ran = true
		if c.Dynamic() {
			r.runDynamic(cctx, s, c, res)
		} else {
			r.runStatic(cctx, s, c, res)
		}
		if cctx.Err() != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			res.Status, res.Error = StatusTimeout, fmt.Sprintf("timeout after %s", timeout)
		} else if ctx.Err() != nil && res.Status != StatusPassed {
			res.Status, res.Error = StatusError, "canceled: the run was interrupted"
		}
	}
	res.DurationMs = time.Since(start).Milliseconds()
	if c.After != "" && ran {
		// The after function runs whatever happened, within its own
		// bound: a case that timed out still gets its cleanup.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		_, logs, err := r.callTestFunc(actx, s, c.After, jsapi.CtxArg, caseArg(c), resultArg(res), before)
		acancel()
		res.Logs = append(res.Logs, logs...)
		if err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("after script failed: %v", err))
		}
	}
	r.keepOrDelete(ctx, s, res)
	r.finished(res.Status)
	r.emit(&Event{Type: EventResult, Suite: s.Name, Kind: KindAgent, ID: c.ID, Run: res.Run, Input: summarize(c.Input, 60), Result: res})
	return res
}

// keepOrDelete removes a passed case's chat (history, memory, workspace)
// and says where a failed one's workspace is kept.
func (r *runner) keepOrDelete(ctx context.Context, s *Suite, res *Result) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if res.Status == StatusPassed {
		_ = r.backend.DeleteChat(ctx, r.opts.User, res.ChatID)
		res.ChatID = ""
		return
	}
	ws, release, err := r.backend.Workspace(ctx, r.opts.User, res.ChatID)
	if err != nil {
		return // a direct assistant has none
	}
	res.Workspace = ws.Dir()
	release()
}

// runStatic runs a case whose input is one turn (a message or a
// conversation).
func (r *runner) runStatic(ctx context.Context, s *Suite, c *Case, res *Result) {
	msgs, err := r.attach(ctx, s, c, res.ChatID)
	if err != nil {
		res.Status, res.Error = StatusError, err.Error()
		return
	}
	out, err := r.runTurn(ctx, turnRequest{Assistant: s.Assistant, ChatID: res.ChatID, Messages: msgs,
		Connector: r.connector(c), Metadata: c.metadata()}, nil)
	turn := out.turnResult(1, c.Input)
	res.Turns = []*TurnResult{turn}
	res.Usage = out.Usage
	res.Timings = out.Timings
	res.Output, res.Trace = out.output(), out.trace()
	r.emit(&Event{Type: EventTurn, Suite: s.Name, Kind: KindAgent, ID: c.ID, Run: res.Run, Turn: turn})
	if err != nil {
		res.Status, res.Error = StatusError, err.Error()
		return
	}
	ck := &appChecker{r: r, s: s, c: c, res: res}
	res.Assertions = evaluate(ctx, ck, c.Assert, c.Expected, &Answer{Output: res.Output, Input: c.Input, ToolCalls: out.ToolCalls})
	if msg := failures(res.Assertions); msg != "" {
		res.Status, res.Error = StatusFailed, msg
		return
	}
	res.Status = StatusPassed
}

// connector is the connector a case's turns use: --connector, else the
// case's options.connector, else the assistant's ("").
func (r *runner) connector(c *Case) string {
	if r.opts.Connector != "" {
		return r.opts.Connector
	}
	if c.Options != nil {
		return c.Options.Connector
	}
	return ""
}

// metadata is the request metadata of a case: the context file's, the
// case's, then its options'.
func (c *Case) metadata() map[string]any {
	m := map[string]any{}
	for _, src := range []map[string]any{c.Metadata, optMeta(c.Options)} {
		for k, v := range src {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func optMeta(o *CaseOptions) map[string]any {
	if o == nil {
		return nil
	}
	return o.Metadata
}

// notes says which of the case's Yao options agentbox does not apply.
func (c *Case) notes() []string {
	o := c.Options
	if o == nil {
		return nil
	}
	var n []string
	if o.DisableGlobalPrompts {
		n = append(n, "options.disable_global_prompts is not applied: a request cannot change it (set it in package.yao or return it from Create)")
	}
	if o.Mode != "" {
		n = append(n, "options.mode is Yao-only: agentbox assistants have no modes")
	}
	if o.Search != nil {
		n = append(n, "options.search is Yao-only: agentbox has no built-in search")
	}
	return n
}

// attach uploads the case's files into the chat's workspace and mentions
// them in the last message; it returns the turn's messages.
func (r *runner) attach(ctx context.Context, s *Suite, c *Case, chatID string) ([]chat.Message, error) {
	msgs := append([]chat.Message(nil), c.msgs.messages...)
	if len(c.msgs.files) == 0 {
		return msgs, nil
	}
	if a := r.app.Assistants[s.Assistant]; a == nil || a.Sandbox == nil {
		return nil, fmt.Errorf("the input attaches files, which need a sandboxed assistant: %s answers with text only", s.Assistant)
	}
	var lines []string
	for _, f := range c.msgs.files {
		p := f.Source
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(c.File), p)
		}
		fh, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("attachment %s: %w", f.Source, err)
		}
		st, err := fh.Stat()
		if err != nil {
			fh.Close()
			return nil, fmt.Errorf("attachment %s: %w", f.Source, err)
		}
		up, err := r.backend.Upload(ctx, pipeline.UploadRequest{UserID: r.opts.User, ChatID: chatID,
			Path: "attachments/" + f.Name, Body: fh, Size: st.Size(), Limit: st.Size()})
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("attachment %s: %w", f.Source, err)
		}
		lines = append(lines, fmt.Sprintf("[attached %s: %s]", f.Kind, up.Path))
	}
	last := &msgs[len(msgs)-1]
	last.Content = strings.TrimSpace(last.Content + "\n\n" + strings.Join(lines, "\n"))
	return msgs, nil
}

// caseArg is a case as before and after functions get it (Yao's).
func caseArg(c *Case) map[string]any {
	m := map[string]any{"id": c.ID, "input": c.Input}
	if c.Metadata != nil {
		m["metadata"] = c.Metadata
	}
	if len(c.Assert) > 0 {
		m["assert"] = normalize(c.Assert)
	}
	if c.Simulator != nil {
		m["simulator"] = normalize(c.Simulator)
	}
	return m
}

func caseList(cases []*Case) []any {
	out := make([]any, 0, len(cases))
	for _, c := range cases {
		m := map[string]any{"id": c.ID, "input": c.Input}
		if c.Metadata != nil {
			m["metadata"] = c.Metadata
		}
		out = append(out, m)
	}
	return out
}

// resultArg is a result as after functions get it (Yao's).
func resultArg(res *Result) map[string]any {
	m := map[string]any{"id": res.ID, "status": string(res.Status), "duration_ms": res.DurationMs}
	if res.Output != nil {
		m["output"] = normalize(res.Output)
	}
	if res.Error != "" {
		m["error"] = res.Error
	}
	return m
}

func resultList(rs []*Result) []any {
	out := make([]any, 0, len(rs))
	for _, res := range rs {
		out = append(out, resultArg(res))
	}
	return out
}

// beforeData is what a before function returned: its data field when it
// returned {data}, as Yao takes it.
func beforeData(v any) any {
	if m, ok := v.(map[string]any); ok {
		if d, has := m["data"]; has {
			return d
		}
	}
	return v
}
