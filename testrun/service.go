package testrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/pipeline"
)

// Errors of the Service.
var (
	// ErrNoRun: the user has no test run of that id (another user's runs
	// are never found).
	ErrNoRun = errors.New("no such test run")
	// ErrRunning: the user's previous run has not finished.
	ErrRunning = errors.New("a test run of yours is running")
	// ErrNoTests: the selection finds nothing to run.
	ErrNoTests = errors.New("no tests")
	// ErrBadRun: the run request is invalid; the error says why.
	ErrBadRun = errors.New("invalid test run")
	// ErrServiceClosed: the service is closing and starts no runs.
	ErrServiceClosed = errors.New("test runs are closed")
)

// Bounds of the runs a Service starts.
const (
	// MaxRuns bounds RunRequest.Runs.
	MaxRuns = 50
	// keptRuns is how many finished runs a user keeps; older ones go.
	keptRuns = 20
	// maxEvents bounds a run's event log; past it, progress events
	// (turns, logs) are dropped, results are kept.
	maxEvents = 20000
)

// Service runs an app's tests for a server's users: it lists an
// assistant's tests, starts runs in the background as the user who asked
// (their turns count against their limits, the chats of cases that fail
// stay in their chat list), and keeps each run's events and reports for
// its owner. It is safe for concurrent use.
type Service struct {
	backend Backend
	memory  jsapi.MemoryStore
	version string
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	runs   map[string]*TestRun
	closed bool
}

// NewService makes a Service that runs tests through b; memory is the hook
// memory store script tests see (the app's).
func NewService(b Backend, memory jsapi.MemoryStore, version string, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{backend: b, memory: memory, version: version, log: logger, ctx: ctx, cancel: cancel, runs: map[string]*TestRun{}}
}

// SuiteInfo is a suite as the test list shows it.
type SuiteInfo struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// File is the suite's file, relative to the app.
	File  string     `json:"file,omitempty"`
	Cases []CaseInfo `json:"cases"`
}

// CaseInfo is a case (or test function) as the test list shows it.
type CaseInfo struct {
	ID string `json:"id"`
	// Input is a line of the input.
	Input string `json:"input,omitempty"`
	// Dynamic: a simulator plays the user.
	Dynamic     bool     `json:"dynamic,omitempty"`
	Skip        bool     `json:"skip,omitempty"`
	Assertions  []string `json:"assertions,omitempty"`
	Checkpoints []string `json:"checkpoints,omitempty"`
	Timeout     string   `json:"timeout,omitempty"`
}

// Listing is an assistant's tests: the suites that load, and what is
// wrong with the files that do not.
type Listing struct {
	Assistant string      `json:"assistant"`
	Suites    []SuiteInfo `json:"suites"`
	Problems  []string    `json:"problems,omitempty"`
}

// List finds an assistant's tests.
func (s *Service) List(assistantID string) (*Listing, error) {
	app := s.backend.App()
	if f := broken(app, assistantID); f != nil {
		return &Listing{Assistant: assistantID, Suites: []SuiteInfo{}, Problems: []string{f.Error()}}, nil
	}
	if app.Assistants[assistantID] == nil {
		return nil, fmt.Errorf("%w %q", pipeline.ErrUnknownAssistant, assistantID)
	}
	suites, errs := discover(app, assistantID, DefaultTimeout)
	l := &Listing{Assistant: assistantID, Suites: []SuiteInfo{}}
	for _, e := range errs {
		l.Problems = append(l.Problems, e.Error())
	}
	for _, su := range suites {
		l.Suites = append(l.Suites, suiteInfo(app.Root, su))
	}
	return l, nil
}

func suiteInfo(root string, su *Suite) SuiteInfo {
	si := SuiteInfo{Name: su.Name, Kind: su.Kind, File: relOr(root, su.File), Cases: []CaseInfo{}}
	for _, c := range su.Cases {
		ci := CaseInfo{ID: c.ID, Input: summarize(c.Input, 120), Dynamic: c.Dynamic(), Skip: c.Skip, Timeout: c.Timeout}
		for _, a := range c.Assert {
			ci.Assertions = append(ci.Assertions, cmpOr(a.Type, "equals"))
		}
		for _, cp := range c.Checkpoints {
			ci.Checkpoints = append(ci.Checkpoints, cp.ID)
		}
		si.Cases = append(si.Cases, ci)
	}
	for _, t := range su.Tests {
		si.Cases = append(si.Cases, CaseInfo{ID: t})
	}
	return si
}

// RunRequest is what a user asks to run.
type RunRequest struct {
	Assistant string `json:"-"`
	// Suites are the names of the suites to run (empty: all of the
	// assistant's).
	Suites []string `json:"suites,omitempty"`
	// Run keeps the cases whose id matches (Yao's --run).
	Run string `json:"run,omitempty"`
	// Runs runs each case this many times (1 to MaxRuns).
	Runs int `json:"runs,omitempty"`
	// Parallel runs this many cases at once (within the user's limits).
	Parallel int `json:"parallel,omitempty"`
	// Connector is the connector of the tested assistant's turns: one its
	// connector_options let a request choose.
	Connector string `json:"connector,omitempty"`
	// Timeout bounds each case that sets none ("30s"; default 5m).
	Timeout string `json:"timeout,omitempty"`
}

// RunState is where a run is.
type RunState string

// Run states.
const (
	RunRunning  RunState = "running"
	RunDone     RunState = "done"
	RunCanceled RunState = "canceled"
)

// RunInfo is a run as the API shows it.
type RunInfo struct {
	ID         string     `json:"id"`
	Assistant  string     `json:"assistant_id"`
	State      RunState   `json:"state"`
	Request    RunRequest `json:"request"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Done, Total, Passed and Failed count the run's units so far.
	Done   int `json:"done"`
	Total  int `json:"total"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	// Summary adds up the suites once the run is done; Failed says
	// whether a test failed or a suite could not run.
	Summary *Summary `json:"summary,omitempty"`
	Failing bool     `json:"failing"`
	Error   string   `json:"error,omitempty"`
	// DroppedEvents counts the progress events (turns, logs) past the
	// event log's bound that the events stream does not have.
	DroppedEvents int       `json:"dropped_events,omitempty"`
	Reports       []*Report `json:"reports,omitempty"`
	EventsURL     string    `json:"events_url,omitempty"`
}

// TestRun is one run a user started: its events as they come, and its
// reports when it is done.
type TestRun struct {
	id, user, assistant string
	req                 RunRequest
	started             time.Time
	cancel              context.CancelFunc

	mu       sync.Mutex
	events   []*Event
	dropped  int
	notify   chan struct{}
	last     *Event
	state    RunState
	finished time.Time
	reports  []*Report
	err      string
}

// ID is the run's id.
func (t *TestRun) ID() string { return t.id }

// Start validates req and starts the run as user in the background.
func (s *Service) Start(user string, req RunRequest) (*TestRun, error) {
	app := s.backend.App()
	if f := broken(app, req.Assistant); f != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRun, f)
	}
	if app.Assistants[req.Assistant] == nil {
		return nil, fmt.Errorf("%w %q", pipeline.ErrUnknownAssistant, req.Assistant)
	}
	opts := Options{User: user, Runs: max(req.Runs, 1), Parallel: max(req.Parallel, 1), Connector: req.Connector,
		Memory: s.memory, Version: s.version, Logger: s.log}
	if req.Runs < 0 || req.Runs > MaxRuns {
		return nil, fmt.Errorf("%w: runs %d: want 1 to %d", ErrBadRun, req.Runs, MaxRuns)
	}
	if req.Parallel < 0 {
		return nil, fmt.Errorf("%w: parallel %d: want 1 or more", ErrBadRun, req.Parallel)
	}
	if req.Run != "" {
		re, err := regexp.Compile(req.Run)
		if err != nil {
			return nil, fmt.Errorf("%w: run %q: %v", ErrBadRun, req.Run, err)
		}
		opts.Filter = re
	}
	if req.Timeout != "" {
		d, err := units.ParseDuration(req.Timeout)
		if err != nil || d <= 0 || d > time.Hour {
			return nil, fmt.Errorf("%w: timeout %q: want a duration up to 1h such as \"30s\"", ErrBadRun, req.Timeout)
		}
		opts.Timeout = d
	}
	if req.Connector != "" {
		if _, ok := app.Connectors[req.Connector]; !ok {
			return nil, fmt.Errorf("%w: connector %q does not exist", ErrBadRun, req.Connector)
		}
	}
	all, errs := discover(app, req.Assistant, max(opts.Timeout, DefaultTimeout))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %v", ErrBadRun, errors.Join(errs...))
	}
	suites := all
	if len(req.Suites) > 0 {
		suites = nil
		for _, name := range req.Suites {
			i := slices.IndexFunc(all, func(su *Suite) bool { return su.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("%w: assistant %s has no suite %q", ErrBadRun, req.Assistant, name)
			}
			suites = append(suites, all[i])
		}
	}
	if len(suites) == 0 {
		return nil, fmt.Errorf("%w: assistant %s has no tests (tests/*.jsonl or src/*_test.ts)", ErrNoTests, req.Assistant)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrServiceClosed
	}
	for _, r := range s.runs {
		if r.user == user && r.State() == RunRunning {
			return nil, fmt.Errorf("%w (%s): wait for it or cancel it", ErrRunning, r.id)
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := "tr-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
	opts.RunID = id[3:]
	ctx, cancel := context.WithCancel(s.ctx)
	run := &TestRun{id: id, user: user, assistant: req.Assistant, req: req, started: time.Now(), cancel: cancel,
		notify: make(chan struct{}), state: RunRunning}
	s.runs[id] = run
	s.forgetOld(user)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		reports, err := Run(ctx, s.backend, suites, opts, run.add)
		run.finish(reports, err, ctx.Err() != nil)
		s.log.Info("test run finished", "run", id, "user", user, "assistant", req.Assistant, "state", run.State())
	}()
	s.log.Info("test run started", "run", id, "user", user, "assistant", req.Assistant, "suites", len(suites))
	return run, nil
}

// forgetOld drops the user's oldest finished runs past keptRuns. s.mu is
// held.
func (s *Service) forgetOld(user string) {
	var mine []*TestRun
	for _, r := range s.runs {
		if r.user == user {
			mine = append(mine, r)
		}
	}
	if len(mine) <= keptRuns {
		return
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].started.Before(mine[j].started) })
	for _, r := range mine[:len(mine)-keptRuns] {
		if r.State() != RunRunning {
			delete(s.runs, r.id)
		}
	}
}

// Get returns the user's run of that id.
func (s *Service) Get(user, id string) (*TestRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.user != user {
		return nil, fmt.Errorf("%w: %s", ErrNoRun, id)
	}
	return r, nil
}

// Runs lists the user's runs, newest first.
func (s *Service) Runs(user string) []*TestRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*TestRun
	for _, r := range s.runs {
		if r.user == user {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].started.After(out[j].started) })
	return out
}

// Close cancels the running runs and waits for them until ctx ends.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add records an event and wakes the followers.
func (t *TestRun) add(e *Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = e
	if len(t.events) >= maxEvents && (e.Type == EventTurn || e.Type == EventLog || e.Type == EventCaseStart) {
		t.dropped++
		return
	}
	t.events = append(t.events, e)
	close(t.notify)
	t.notify = make(chan struct{})
}

func (t *TestRun) finish(reports []*Report, err error, canceled bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reports, t.finished = reports, time.Now()
	t.state = RunDone
	if canceled {
		t.state = RunCanceled
	}
	if err != nil {
		t.err = err.Error()
	}
	close(t.notify)
	t.notify = make(chan struct{})
}

// Cancel stops the run: running cases end as canceled, the rest do not
// start.
func (t *TestRun) Cancel() { t.cancel() }

// State is where the run is.
func (t *TestRun) State() RunState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// Reports are the run's reports, nil until it is done.
func (t *TestRun) Reports() []*Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reports
}

// Events returns the events from index from on, whether the run is over
// (no more will come), and a channel closed when more arrive.
func (t *TestRun) Events(from int) (events []*Event, over bool, more <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from < len(t.events) {
		events = append(events, t.events[max(from, 0):]...)
	}
	return events, t.state != RunRunning, t.notify
}

// Info describes the run; with reports, the reports too once it is done.
func (t *TestRun) Info(reports bool) RunInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	ri := RunInfo{ID: t.id, Assistant: t.assistant, State: t.state, Request: t.req, StartedAt: t.started, Error: t.err, DroppedEvents: t.dropped}
	if e := t.last; e != nil {
		ri.Done, ri.Total, ri.Passed, ri.Failed = e.Done, e.Total, e.Passed, e.Failed
	}
	if t.state != RunRunning {
		f := t.finished
		ri.FinishedAt = &f
		tot := Totals(t.reports)
		ri.Summary = &tot
		ri.Failing = AnyFailed(t.reports)
		if reports {
			ri.Reports = t.reports
		}
	}
	return ri
}
