package server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/testrun"
)

// TestRunner runs the app's assistant tests for the web app:
// *testrun.Service implements it. Runs are their starter's: another
// user never finds them.
type TestRunner interface {
	List(assistantID string) (*testrun.Listing, error)
	Start(user string, req testrun.RunRequest) (*testrun.TestRun, error)
	Get(user, id string) (*testrun.TestRun, error)
	Runs(user string) []*testrun.TestRun
}

var _ TestRunner = (*testrun.Service)(nil)

// testRoutes registers the test runner's routes.
func (s *Server) testRoutes(handle func(method, path string, h func(http.ResponseWriter, *http.Request, string), public bool)) {
	handle("GET", "/api/assistants/{id}/tests", s.listTests, false)
	handle("POST", "/api/assistants/{id}/tests/runs", s.startTests, false)
	handle("GET", "/api/tests/runs", s.testRuns, false)
	handle("GET", "/api/tests/runs/{run}", s.testRun, false)
	handle("GET", "/api/tests/runs/{run}/events", s.testEvents, false)
	handle("GET", "/api/tests/runs/{run}/report", s.testReport, false)
	handle("POST", "/api/tests/runs/{run}/cancel", s.cancelTests, false)
}

// testRunner returns the configured runner, or the 404 of a server
// without one.
func (s *Server) testRunner() (TestRunner, error) {
	if s.cfg.Tests == nil {
		return nil, notFound("this server runs no tests")
	}
	return s.cfg.Tests, nil
}

// testError turns the runner's errors into the API's.
func testError(err error) error {
	switch {
	case errors.Is(err, testrun.ErrNoRun):
		return notFound("%v", err)
	case errors.Is(err, pipeline.ErrUnknownAssistant):
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	case errors.Is(err, testrun.ErrRunning):
		return chat.Errorf(CodeConflict, "%v", err)
	case errors.Is(err, testrun.ErrServiceClosed):
		return &chat.Error{Code: chat.ErrShuttingDown, Message: "the server is shutting down", Err: err}
	case errors.Is(err, testrun.ErrBadRun), errors.Is(err, testrun.ErrNoTests):
		return badRequest("%v", err)
	}
	return err
}

// listTests is GET /api/assistants/{id}/tests: the assistant's suites and
// their cases, and what is wrong with its test files that do not load.
func (s *Server) listTests(w http.ResponseWriter, r *http.Request, user string) {
	tr, err := s.testRunner()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	l, err := tr.List(r.PathValue("id"))
	if err != nil {
		writeError(w, s.log, testError(err))
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// startTests is POST /api/assistants/{id}/tests/runs: a run of the
// assistant's tests (all, or the suites named) as the caller, in the
// background; 202 with the run.
func (s *Server) startTests(w http.ResponseWriter, r *http.Request, user string) {
	tr, err := s.testRunner()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var req testrun.RunRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeJSON(body, &req, true); err != nil {
			writeError(w, s.log, err)
			return
		}
	}
	req.Assistant = r.PathValue("id")
	run, err := tr.Start(user, req)
	if err != nil {
		writeError(w, s.log, testError(err))
		return
	}
	w.Header().Set("Location", "/api/tests/runs/"+run.ID())
	writeJSON(w, http.StatusAccepted, runView(run, false))
}

func runView(run *testrun.TestRun, reports bool) testrun.RunInfo {
	ri := run.Info(reports)
	ri.EventsURL = "/api/tests/runs/" + run.ID() + "/events"
	return ri
}

// testRuns is GET /api/tests/runs: the caller's runs, newest first.
func (s *Server) testRuns(w http.ResponseWriter, r *http.Request, user string) {
	tr, err := s.testRunner()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	out := []testrun.RunInfo{}
	for _, run := range tr.Runs(user) {
		out = append(out, runView(run, false))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

func (s *Server) findRun(w http.ResponseWriter, r *http.Request, user string) *testrun.TestRun {
	tr, err := s.testRunner()
	if err != nil {
		writeError(w, s.log, err)
		return nil
	}
	run, err := tr.Get(user, r.PathValue("run"))
	if err != nil {
		writeError(w, s.log, testError(err))
		return nil
	}
	return run
}

// testRun is GET /api/tests/runs/{run}: the run, with its reports once it
// is done.
func (s *Server) testRun(w http.ResponseWriter, r *http.Request, user string) {
	if run := s.findRun(w, r, user); run != nil {
		writeJSON(w, http.StatusOK, runView(run, true))
	}
}

// cancelTests is POST /api/tests/runs/{run}/cancel.
func (s *Server) cancelTests(w http.ResponseWriter, r *http.Request, user string) {
	if run := s.findRun(w, r, user); run != nil {
		run.Cancel()
		writeJSON(w, http.StatusOK, runView(run, false))
	}
}

// testEvents is GET /api/tests/runs/{run}/events: the run's events as
// server-sent events (event: the type, id: its index, data: the event),
// from after Last-Event-ID (the header or the query's last_event_id), and
// as they come until the run is done.
func (s *Server) testEvents(w http.ResponseWriter, r *http.Request, user string) {
	run := s.findRun(w, r, user)
	if run == nil {
		return
	}
	from := 0
	last := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("last_event_id"); q != "" {
		last = q
	}
	if last != "" {
		n, err := strconv.Atoi(last)
		if err != nil || n < 0 {
			writeError(w, s.log, badRequest("Last-Event-ID %q: want the index of an event of this run", last))
			return
		}
		from = n + 1
	}
	st := newSSEStream(w, s.cfg.Heartbeat, nil)
	defer st.Close()
	if err := st.Commit(); err != nil {
		return
	}
	for {
		events, over, more := run.Events(from)
		for i, e := range events {
			frame := sse.Frame(sse.Event{ID: strconv.Itoa(from + i), Type: e.Type, Data: e.Marshal()})
			if err := st.Write(frame); err != nil {
				return
			}
		}
		from += len(events)
		if over { // the events came with the run over: they were the last
			return
		}
		select {
		case <-more:
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}

// testReport is GET /api/tests/runs/{run}/report?format=html|json|jsonl|md|xml
// (default html): the finished run's report as a download.
func (s *Server) testReport(w http.ResponseWriter, r *http.Request, user string) {
	run := s.findRun(w, r, user)
	if run == nil {
		return
	}
	if run.State() == testrun.RunRunning {
		writeError(w, s.log, chat.Errorf(CodeConflict, "test run %s is still running: its report is written when it ends", run.ID()))
		return
	}
	name := strings.ToLower(r.URL.Query().Get("format"))
	if name == "" {
		name = "html"
	}
	ext := map[string]string{"markdown": "md", "junit": "xml"}[name]
	if ext == "" {
		ext = name
	}
	f, err := testrun.FormatOf("report." + ext)
	if err != nil {
		writeError(w, s.log, badRequest("format %q: want html, json, jsonl, md or xml", name))
		return
	}
	var b bytes.Buffer
	if err := testrun.Write(&b, f, run.Reports()); err != nil {
		writeError(w, s.log, err)
		return
	}
	types := map[testrun.Format]string{testrun.FormatHTML: "text/html; charset=utf-8", testrun.FormatJSON: "application/json",
		testrun.FormatJSONL: "application/x-ndjson", testrun.FormatMarkdown: "text/markdown; charset=utf-8", testrun.FormatJUnit: "application/xml"}
	h := w.Header()
	h.Set("Content-Type", types[f])
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, run.ID(), ext))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-cache")
	// The report's own inline styles and script, nothing else, and never
	// with this server's origin.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; sandbox allow-scripts")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}
