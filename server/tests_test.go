package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/testrun"
)

// testsServer serves the test routes over a real pipeline and test
// service on a copy of testdata/apps/agenttest (its direct assistants
// answer from scripted models).
func testsServer(t *testing.T) *httptest.Server {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testenv.RepoRoot(), "testdata", "apps", "agenttest"))); err != nil {
		t.Fatal(err)
	}
	app, err := assistant.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Config{App: pipeline.Static{App: app}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	svc := testrun.NewService(p, jsapi.NewMemStore(), "test", quietLogger())
	t.Cleanup(func() {
		_ = svc.Close(context.Background())
		_ = p.Close(context.Background())
	})
	s, err := New(Config{Backend: p, Tokens: testTokens, Logger: quietLogger(), Tests: svc})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// followEvents reads a run's event stream to its end and returns the
// events with their ids.
func followEvents(t *testing.T, ts *httptest.Server, url, token, lastID string) (events []testrun.Event, ids []string) {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var typ string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			ids = append(ids, strings.TrimPrefix(line, "id: "))
		case strings.HasPrefix(line, "data: "):
			var e testrun.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				t.Fatalf("event data: %v", err)
			}
			if e.Type != typ {
				t.Errorf("event %q carries type %q", typ, e.Type)
			}
			events = append(events, e)
		}
	}
	return events, ids
}

func TestTestRoutes(t *testing.T) {
	ts := testsServer(t)

	resp, body := do(t, ts, "GET", "/api/assistants/greeter/tests", tokenAlice, "")
	var l testrun.Listing
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &l) != nil {
		t.Fatalf("list = %d %s", resp.StatusCode, body)
	}
	if len(l.Suites) != 2 || l.Suites[0].Name != "greeter: tests/inputs.jsonl" || len(l.Suites[0].Cases) != 17 || l.Suites[1].Kind != testrun.KindScript {
		t.Errorf("suites = %+v", l.Suites)
	}
	if c := l.Suites[0].Cases[16]; c.ID != "dynamic" || !c.Dynamic || len(c.Checkpoints) != 3 {
		t.Errorf("dynamic case = %+v", c)
	}
	if resp, body := do(t, ts, "GET", "/api/assistants/nobody/tests", tokenAlice, ""); resp.StatusCode != 404 {
		t.Errorf("unknown assistant = %d %s", resp.StatusCode, body)
	}

	for _, bad := range []struct{ path, body, want string }{
		{"/api/assistants/greeter/tests/runs", `{"runs": 0, "bogus": 1}`, "bogus"},
		{"/api/assistants/greeter/tests/runs", `{"run": "("}`, "run \\\"(\\\""},
		{"/api/assistants/greeter/tests/runs", `{"suites": ["nope"]}`, `has no suite \"nope\"`},
		{"/api/assistants/greeter/tests/runs", `{"runs": 51}`, "runs 51"},
		{"/api/assistants/greeter/tests/runs", `{"timeout": "2h"}`, "timeout"},
		{"/api/assistants/greeter/tests/runs", `{"connector": "nope.x"}`, `connector \"nope.x\" does not exist`},
		{"/api/assistants/tests.judge/tests/runs", `{}`, "has no tests"},
	} {
		resp, body := do(t, ts, "POST", bad.path, tokenAlice, bad.body)
		if resp.StatusCode != 400 || !strings.Contains(body, bad.want) {
			t.Errorf("POST %s = %d %s, want 400 with %s", bad.body, resp.StatusCode, body, bad.want)
		}
	}

	resp, body = do(t, ts, "POST", "/api/assistants/greeter/tests/runs", tokenAlice, `{"suites": ["greeter: tests/inputs.jsonl"], "run": "^(greets|regex|equals)$", "runs": 2, "parallel": 2}`)
	var run testrun.RunInfo
	if resp.StatusCode != 202 || json.Unmarshal([]byte(body), &run) != nil || run.State != testrun.RunRunning || resp.Header.Get("Location") != "/api/tests/runs/"+run.ID {
		t.Fatalf("start = %d %s", resp.StatusCode, body)
	}
	events, ids := followEvents(t, ts, run.EventsURL, tokenAlice, "")
	if len(events) == 0 || events[0].Type != testrun.EventStart || events[len(events)-1].Type != testrun.EventDone {
		t.Fatalf("events = %v", events)
	}
	last := events[len(events)-1]
	if last.Done != 6 || last.Total != 6 || last.Passed != 6 {
		t.Errorf("done event = %+v", last)
	}
	// Resuming after an event gives the rest.
	rest, _ := followEvents(t, ts, run.EventsURL, tokenAlice, ids[2])
	if len(rest) != len(events)-3 || rest[len(rest)-1].Type != testrun.EventDone {
		t.Errorf("resumed after %s: %d events, want %d", ids[2], len(rest), len(events)-3)
	}

	resp, body = do(t, ts, "GET", "/api/tests/runs/"+run.ID, tokenAlice, "")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &run) != nil {
		t.Fatalf("get = %d %s", resp.StatusCode, body)
	}
	if run.State != testrun.RunDone || run.Failing || len(run.Reports) != 1 || run.Summary.Passed != 3 || len(run.Reports[0].StabilityResults) != 3 {
		t.Errorf("run = %+v", run)
	}
	resp, body = do(t, ts, "GET", "/api/tests/runs/"+run.ID+"/report", tokenAlice, "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") || !strings.Contains(body, "Pass rate across 2 runs") {
		t.Errorf("html report = %d %v", resp.StatusCode, resp.Header)
	}
	resp, body = do(t, ts, "GET", "/api/tests/runs/"+run.ID+"/report?format=junit", tokenAlice, "")
	if resp.StatusCode != 200 || !strings.Contains(body, "<testsuites") {
		t.Errorf("junit report = %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, ts, "GET", "/api/tests/runs/"+run.ID+"/report?format=pdf", tokenAlice, ""); resp.StatusCode != 400 {
		t.Errorf("pdf = %d", resp.StatusCode)
	}
	resp, body = do(t, ts, "GET", "/api/tests/runs", tokenAlice, "")
	if resp.StatusCode != 200 || !strings.Contains(body, run.ID) {
		t.Errorf("list runs = %d %s", resp.StatusCode, body)
	}

	// Another user's run is not found.
	for _, path := range []string{"/api/tests/runs/" + run.ID, "/api/tests/runs/" + run.ID + "/events", "/api/tests/runs/" + run.ID + "/report"} {
		if resp, _ := do(t, ts, "GET", path, tokenBob, ""); resp.StatusCode != 404 {
			t.Errorf("bob GET %s = %d", path, resp.StatusCode)
		}
	}
	if resp, _ := do(t, ts, "POST", "/api/tests/runs/"+run.ID+"/cancel", tokenBob, "{}"); resp.StatusCode != 404 {
		t.Errorf("bob cancel = %d", resp.StatusCode)
	}
	if resp, body := do(t, ts, "GET", "/api/tests/runs", tokenBob, ""); resp.StatusCode != 200 || strings.Contains(body, run.ID) {
		t.Errorf("bob's runs = %s", body)
	}
	if resp, _ := do(t, ts, "GET", "/api/tests/runs", "", ""); resp.StatusCode != 401 {
		t.Errorf("no token = %d", resp.StatusCode)
	}
}

func TestTestRoutesFailingRun(t *testing.T) {
	ts := testsServer(t)
	resp, body := do(t, ts, "POST", "/api/assistants/flaky/tests/runs", tokenAlice, `{"runs": 2}`)
	var run testrun.RunInfo
	if resp.StatusCode != 202 || json.Unmarshal([]byte(body), &run) != nil {
		t.Fatalf("start = %d %s", resp.StatusCode, body)
	}
	followEvents(t, ts, run.EventsURL, tokenAlice, "")
	_, body = do(t, ts, "GET", "/api/tests/runs/"+run.ID, tokenAlice, "")
	if err := json.Unmarshal([]byte(body), &run); err != nil {
		t.Fatal(err)
	}
	if !run.Failing || run.Summary.Failed != 1 {
		t.Errorf("run = %+v", run)
	}
	// The chat of the run that failed is the user's, to open.
	sr := run.Reports[0].StabilityResults
	var chatID string
	for _, s := range sr {
		for _, rd := range s.RunDetails {
			if rd.Status == testrun.StatusFailed {
				chatID = rd.Result.ChatID
			}
		}
	}
	if chatID == "" || !strings.HasSuffix(chatID, "-r2") {
		t.Errorf("failed run's chat = %q", chatID)
	}
}

func TestTestRoutesWithoutRunner(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), nil)
	if resp, body := do(t, ts, "GET", "/api/assistants/qa/tests", tokenAlice, ""); resp.StatusCode != 404 || !strings.Contains(body, "runs no tests") {
		t.Errorf("= %d %s", resp.StatusCode, body)
	}
}
