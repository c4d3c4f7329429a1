package testrun

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/pipeline"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a copy of testdata/apps/agenttest with a pipeline for its
// direct assistants (scripted models, in-memory stores).
type fixture struct {
	dir string
	app *assistant.App
	mem *jsapi.MemStore
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testenv.RepoRoot(), "testdata", "apps", "agenttest"))); err != nil {
		t.Fatal(err)
	}
	app, err := assistant.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, app: app, mem: jsapi.NewMemStore()}
}

// run runs the selection through a pipeline of the fixture and returns
// the reports and every event.
func (f *fixture) run(t *testing.T, sel Selection, opts Options) ([]*Report, []*Event) {
	t.Helper()
	sel.Dir = f.dir
	suites, err := Select(f.app, sel)
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	conns, err := Connectors(f.app, suites, opts.Connector)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Config{App: AllowConnectors(pipeline.Static{App: f.app}, conns), Memory: f.mem,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if opts.Memory == nil {
		opts.Memory = f.mem
	}
	var mu sync.Mutex
	var events []*Event
	reports, err := Run(context.Background(), p, suites, opts, func(e *Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	return reports, events
}

func results(reps []*Report) map[string]*Result {
	m := map[string]*Result{}
	for _, r := range reps {
		for _, res := range r.Results {
			m[res.ID] = res
		}
	}
	return m
}

func TestAgentCasesPass(t *testing.T) {
	f := newFixture(t)
	reps, events := f.run(t, Selection{Input: "assistants/greeter/tests/inputs.jsonl"}, Options{Parallel: 3})
	if len(reps) != 1 {
		t.Fatalf("%d reports", len(reps))
	}
	rep := reps[0]
	s := rep.Summary
	if s.Total != 17 || s.Passed != 16 || s.Skipped != 1 || s.Failed+s.Errors+s.Timeouts != 0 || rep.Error != "" {
		for _, r := range rep.Results {
			if r.Status != StatusPassed {
				t.Logf("%s %s: %s", r.ID, r.Status, r.Error)
			}
		}
		t.Fatalf("summary = %+v", s)
	}
	if s.AgentID != "greeter" || s.Connector != "scripted.greeter" || s.Usage.InputTokens == 0 {
		t.Errorf("summary = %+v", s)
	}
	res := results(reps)
	if out, ok := res["structured"].Output.(map[string]any); !ok || out["greeting"] != "Hello, Ada!" {
		t.Errorf("structured output = %#v (the Next hook's data)", res["structured"].Output)
	}
	if r := res["greets"]; r.ChatID != "" || r.Trace == nil || r.Trace.Completion.Content != "Hello! What is your name?" || r.Usage.InputTokens != 120 {
		t.Errorf("greets = %+v (a passed case's chat is removed)", r)
	}
	if r := res["tool-called"]; r.Trace == nil || len(r.Trace.ToolCalls) != 1 || r.Trace.ToolCalls[0].Tool != "lookup_weather" {
		t.Errorf("tool calls = %+v", r.Trace)
	}
	if r := res["judged"]; r.Usage.InputTokens <= res["greets"].Usage.InputTokens {
		t.Errorf("the judge's tokens are not counted: %+v", r.Usage)
	}
	if r := res["hooks"]; strings.Join(r.Logs, "|") != "Before hooks|After hooks: passed (prepared hooks)" {
		t.Errorf("hooks logs = %q", r.Logs)
	}
	if _, ok, _ := f.mem.Get(context.Background(), jsapi.NamespaceUser, DefaultUser, "before:hooks"); ok {
		t.Error("After did not remove what Before stored")
	}
	d := res["dynamic"]
	if d.Metadata["mode"] != "dynamic" || d.Metadata["total_turns"] != 2 || len(d.Turns) != 2 {
		t.Fatalf("dynamic = %+v", d.Metadata)
	}
	if d.Turns[1].Input != "My name is Ada" || d.Checkpoints["greet_by_name"].ReachedAtTurn != 2 || d.Checkpoints["offer_help"].Reached {
		t.Errorf("dynamic turns = %+v, checkpoints = %+v", d.Turns[1], d.Checkpoints)
	}
	if res["later"].Status != StatusSkipped {
		t.Errorf("later = %s", res["later"].Status)
	}
	// Progress: every unit is counted, in order.
	last := events[len(events)-1]
	if last.Type != EventDone || last.Done != 17 || last.Total != 17 || last.Passed != 16 || last.Failed != 0 {
		t.Errorf("last event = %+v", last)
	}
	if events[0].Type != EventStart || events[0].TotalCases != 17 {
		t.Errorf("first event = %+v", events[0])
	}
}

func TestAgentCasesFail(t *testing.T) {
	f := newFixture(t)
	reps, _ := f.run(t, Selection{Input: "assistants/greeter/tests/negative/cases.jsonl"}, Options{Parallel: 4})
	res := results(reps)
	want := map[string]struct {
		status Status
		msg    string
	}{
		"contains":           {StatusFailed, `output does not contain "Goodbye"`},
		"regex":              {StatusFailed, `does not match pattern "^Goodbye"`},
		"not-contains":       {StatusFailed, `should not contain "Hello"`},
		"equals":             {StatusFailed, "expected 5, got 4"},
		"expected":           {StatusFailed, "expected 5, got 4"},
		"type":               {StatusFailed, "expected type object, got string"},
		"json-path":          {StatusFailed, "expected bye, got hello"},
		"json-path-in":       {StatusFailed, "expected [3,4], got 2"},
		"json-path-not-json": {StatusFailed, "output is not JSON"},
		"schema":             {StatusFailed, "farewell"},
		"tool-called":        {StatusFailed, `"send_email" was not called`},
		"tool-called-args":   {StatusFailed, "not called with the expected arguments"},
		"no-tools":           {StatusFailed, "no tools were called"},
		"tool-result":        {StatusFailed, "result does not match"},
		"judged":             {StatusFailed, "The answer quotes no price."},
		"judge-no-verdict":   {StatusFailed, "answered no JSON verdict"},
		"script":             {StatusFailed, "the answer does not greet: 4"},
		"negated":            {StatusFailed, "negated: output contains"},
		"message":            {StatusFailed, "the answer must mention pricing"},
		"timeout":            {StatusTimeout, "timeout after 1s"},
		"before-fails":       {StatusError, "before script failed"},
		"max-turns":          {StatusFailed, "max turns (2) exceeded without reaching all checkpoints: coffee missing"},
		"gives-up":           {StatusFailed, "required checkpoints were not reached: greet_by_name"},
	}
	for id, w := range want {
		r := res[id]
		if r == nil {
			t.Errorf("%s: no result", id)
			continue
		}
		if r.Status != w.status || !strings.Contains(r.Error, w.msg) {
			t.Errorf("%s: %s %q, want %s with %q", id, r.Status, r.Error, w.status, w.msg)
		}
		if r.ChatID == "" {
			t.Errorf("%s: the chat of a case that failed must be kept", id)
		}
	}
	if len(res) != len(want) {
		t.Errorf("%d results, want %d", len(res), len(want))
	}
	if !reps[0].Failed() {
		t.Error("the report does not say it failed")
	}
}

func TestStability(t *testing.T) {
	f := newFixture(t)
	reps, events := f.run(t, Selection{Assistant: "flaky"}, Options{Runs: 4, Parallel: 3})
	rep := reps[0]
	if len(rep.Results) != 0 || len(rep.StabilityResults) != 2 {
		t.Fatalf("results %d, stability %d", len(rep.Results), len(rep.StabilityResults))
	}
	by := map[string]*StabilityResult{}
	for _, sr := range rep.StabilityResults {
		by[sr.ID] = sr
	}
	flaky := by["says-hello"]
	if flaky.Runs != 4 || flaky.Passed != 2 || flaky.PassRate != 50 || flaky.Stable || flaky.StabilityClass != StabilityUnstable {
		t.Errorf("says-hello = %+v", flaky)
	}
	for i, rd := range flaky.RunDetails {
		want := StatusPassed
		if rd.Run%2 == 0 {
			want = StatusFailed
		}
		if rd.Run != i+1 || rd.Status != want || rd.Result == nil {
			t.Errorf("run detail %d = %+v", i, rd)
		}
	}
	if s := by["always"]; !s.Stable || s.StabilityClass != StabilityStable || s.PassRate != 100 {
		t.Errorf("always = %+v", s)
	}
	s := rep.Summary
	if s.RunsPerCase != 4 || s.TotalRuns != 8 || s.StableCases != 1 || s.UnstableCases != 1 || s.OverallPassRate != 75 || s.Passed != 1 || s.Failed != 1 {
		t.Errorf("summary = %+v", s)
	}
	n := 0
	for _, e := range events {
		if e.Type == EventStability {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d stability events", n)
	}
}

func TestConnectorOverride(t *testing.T) {
	f := newFixture(t)
	reps, _ := f.run(t, Selection{Input: "Hi there", Assistant: "greeter"}, Options{Connector: "scripted.alt"})
	r := reps[0].Results[0]
	if r.Status != StatusPassed || r.Output != "Bonjour! Comment vous appelez-vous?" || reps[0].Summary.Connector != "scripted.alt" {
		t.Errorf("result = %+v, connector %s", r, reps[0].Summary.Connector)
	}
	if _, err := Connectors(f.app, nil, "nope.x"); err == nil || !strings.Contains(err.Error(), `connector "nope.x" does not exist`) {
		t.Errorf("unknown connector = %v", err)
	}
}

func TestBeforeAndAfterAll(t *testing.T) {
	f := newFixture(t)
	_, events := f.run(t, Selection{Input: "assistants/greeter/tests/inputs.jsonl"},
		Options{BeforeAll: "env_test.BeforeAll", AfterAll: "env_test.AfterAll", Filter: regexp.MustCompile("^(greets|regex)$")})
	var logs []string
	for _, e := range events {
		if e.Type == EventLog {
			logs = append(logs, e.Message)
		}
	}
	if strings.Join(logs, "|") != "before-all: BeforeAll: 2 cases|after-all: AfterAll: 2/2 passed (greeter)" {
		t.Errorf("logs = %q", logs)
	}
	reps, _ := f.run(t, Selection{Input: "assistants/greeter/tests/inputs.jsonl"}, Options{BeforeAll: "env_test.Nope"})
	if !strings.Contains(reps[0].Error, "before-all env_test.Nope failed") || reps[0].Results != nil {
		t.Errorf("a missing before-all = %q, %d results", reps[0].Error, len(reps[0].Results))
	}
}

func TestScriptTests(t *testing.T) {
	f := newFixture(t)
	reps, _ := f.run(t, Selection{Assistant: "greeter", Input: "agents.greeter.format"}, Options{})
	s := reps[0].Summary
	if reps[0].Kind != KindScript || s.Total != 7 || s.Passed != 6 || s.Skipped != 1 {
		for _, r := range reps[0].Results {
			t.Logf("%s %s %s", r.ID, r.Status, r.Error)
		}
		t.Fatalf("summary = %+v", s)
	}
	res := results(reps)
	if r := res["TestGreeting"]; len(r.Logs) != 1 || r.Logs[0] != "greetings checked" {
		t.Errorf("TestGreeting logs = %q", r.Logs)
	}
	if r := res["TestSkipped"]; r.Status != StatusSkipped || r.Error != "waiting for the new greeting rules" {
		t.Errorf("TestSkipped = %s %q", r.Status, r.Error)
	}
	if r := res["TestJudge"]; r.Usage.InputTokens == 0 {
		t.Error("the judge's tokens are not counted")
	}

	reps, _ = f.run(t, Selection{Input: "assistants/greeter/negative/failing_test.ts"}, Options{Timeout: 2 * time.Second})
	res = results(reps)
	want := map[string]struct {
		status Status
		msg    string
	}{
		"TestAssertFails":   {StatusFailed, "greets by name"},
		"TestFatal":         {StatusFailed, "cannot go on"},
		"TestThrows":        {StatusError, "TypeError: Cannot read property 'boom'"},
		"TestErrorf":        {StatusFailed, "a soft failure"},
		"TestYaoOnly":       {StatusSkipped, `YAO_ONLY: Process("models.user.Get") is Yao-only`},
		"TestYaoOnlyCaught": {StatusSkipped, "YAO_ONLY: http.Get is Yao-only"},
		"TestJudgeFails":    {StatusFailed, "The answer quotes no price."},
		"TestRunsForever":   {StatusTimeout, "timeout after 2s"},
	}
	for id, w := range want {
		r := res[id]
		if r == nil || r.Status != w.status || !strings.Contains(r.Error, w.msg) {
			t.Errorf("%s = %+v, want %s with %q", id, r, w.status, w.msg)
		}
	}
	if r := res["TestAssertFails"]; r.Assertion == nil || r.Assertion.Type != "Equal" || r.Assertion.Expected != "Hi, Ada" {
		t.Errorf("TestAssertFails assertion = %+v", r.Assertion)
	}
	if r := res["TestThrows"]; !strings.Contains(r.StackTrace, "negative/failing_test.ts") || !strings.Contains(r.Error, "failing_test.ts:18:") {
		t.Errorf("TestThrows: error %q, stack %q", r.Error, r.StackTrace)
	}

	reps, _ = f.run(t, Selection{Input: "scripts.lib.model"}, Options{})
	if r := reps[0].Results[0]; r.Status != StatusSkipped || !strings.Contains(r.Error, "YAO_ONLY") || !strings.Contains(r.Error, "scripts/lib/model_test.ts:4:") {
		t.Errorf("an app script using Process = %+v", r)
	}
}

func TestScriptedContext(t *testing.T) {
	f := newFixture(t)
	cfg, err := LoadContext(filepath.Join(f.dir, "assistants/greeter/tests/context.json"))
	if err != nil {
		t.Fatal(err)
	}
	reps, _ := f.run(t, Selection{Input: "assistants/greeter/negative/context_test.ts"}, Options{Context: cfg})
	r := reps[0].Results[0]
	if r.Status != StatusPassed {
		t.Fatalf("%s: %s", r.Status, r.Error)
	}
	if reps[0].Environment.UserID != "ctx-user" || reps[0].Environment.TeamID != "ctx-team" {
		t.Errorf("environment = %+v", reps[0].Environment)
	}
	// The scripted memory is the test's own: the app's is untouched.
	if keys, _ := f.mem.Keys(context.Background(), jsapi.NamespaceUser, "ctx-user"); len(keys) != 0 {
		t.Errorf("the app's memory got %v", keys)
	}
}

func TestDiscover(t *testing.T) {
	f := newFixture(t)
	suites, err := Select(f.app, Selection{Dir: f.dir, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range suites {
		names = append(names, s.Name)
	}
	want := "coder: tests/inputs.jsonl|agents.coder.files|flaky: tests/inputs.jsonl|greeter: tests/inputs.jsonl|agents.greeter.format|scripts.lib.math|scripts.lib.model"
	if got := strings.Join(names, "|"); got != want {
		t.Errorf("suites:\n%s\nwant:\n%s", got, want)
	}
	if s := suites[1]; s.Kind != KindScript || strings.Join(s.Tests, ",") != "TestSandboxFiles" || s.Assistant != "coder" {
		t.Errorf("coder's script suite = %+v", s)
	}
	if s := suites[4]; strings.Join(s.Tests, ",") != "TestGreeting,TestSlug,TestValues,TestMemory,TestJudge,TestModelCalls,TestSkipped" {
		t.Errorf("tests in source order = %v", s.Tests)
	}
}

func TestSelectErrors(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		sel  Selection
		want string
	}{
		{Selection{Assistant: "nobody"}, `unknown assistant "nobody" (have: coder, flaky, greeter, tests.judge, tests.simulator)`},
		{Selection{Input: "Hello"}, `-i "Hello" is a message: name the assistant it is for with -n`},
		{Selection{Input: "missing.jsonl", Assistant: "greeter"}, "missing.jsonl does not exist"},
		{Selection{Input: "agents.greeter.nothing"}, `script test "agents.greeter.nothing": no test file (tried assistants/greeter/src/nothing_test.ts)`},
		{Selection{Input: "agents.nobody.x"}, "no assistant's id starts it"},
		{Selection{Input: "scripts.lib.none"}, "tried scripts/lib/none_test.ts"},
		{Selection{Scripts: "format"}, "--scripts needs -n"},
		{Selection{Scripts: "format", Assistant: "greeter", Input: "x"}, "not both"},
		{Selection{Input: "./app.jsonc"}, "./app.jsonc is not in an assistant's folder"},
	}
	for _, tt := range tests {
		tt.sel.Dir = f.dir
		_, err := Select(f.app, tt.sel)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.sel, err, tt.want)
		}
	}
	// A file that does not load names its line.
	bad := filepath.Join(f.dir, "assistants", "greeter", "tests", "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"id\": \"x\", \"input\": \"y\", \"assert\": {\"type\": \"contians\", \"value\": 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Select(f.app, Selection{Assistant: "greeter", Dir: f.dir}); err == nil || !strings.Contains(err.Error(), "bad.jsonl:1") || !strings.Contains(err.Error(), `did you mean "contains"`) {
		t.Errorf("bad file = %v", err)
	}
	// --scripts and Yao's scripts.<assistant>.<file> name the same file.
	for _, sel := range []Selection{{Assistant: "greeter", Scripts: "format"}, {Input: "scripts.greeter.format"}, {Input: "agents.greeter.format_test"}} {
		sel.Dir = f.dir
		suites, err := Select(f.app, sel)
		if err != nil || len(suites) != 1 || suites[0].Name != "agents.greeter.format" {
			t.Errorf("%+v: %v %v", sel, suites, err)
		}
	}
}

func TestLimits(t *testing.T) {
	f := newFixture(t)
	if n, why := Limits(f.app, "greeter", 2); n != 2 || why != "" {
		t.Errorf("within limits: %d %q", n, why)
	}
	if n, why := Limits(f.app, "greeter", 50); n != assistant.DefaultTurnsPerUser || !strings.Contains(why, "limits.turns_per_user") {
		t.Errorf("over turns_per_user: %d %q", n, why)
	}
	f.app.Config.Limits.Sandboxes = 2
	if n, why := Limits(f.app, "coder", 50); n != 2 || !strings.Contains(why, "limits.sandboxes") {
		t.Errorf("over sandboxes: %d %q", n, why)
	}
}

func TestEventsEncode(t *testing.T) {
	t.Parallel()
	e := &Event{Type: EventResult, Suite: "s", ID: "a", Result: &Result{ID: "a", Status: StatusFailed, Input: "x", Error: "no"}}
	var m map[string]any
	if err := json.Unmarshal(e.Marshal(), &m); err != nil || m["type"] != "result" {
		t.Fatalf("%v %v", m, err)
	}
	l, err := json.Marshal(e.yaoLine())
	if err != nil || !strings.HasPrefix(string(l), `{"type":"result","id":"a","status":"failed"`) {
		t.Errorf("yao line = %s %v", l, err)
	}
}

// TestBrokenAssistants: an assistant that does not load is left out; it
// is an error when it is selected or has tests.
func TestBrokenAssistants(t *testing.T) {
	f := newFixture(t)
	// greeter has tests, tests.judge has none; both break.
	for _, id := range []string{"greeter", "tests/judge"} {
		if err := os.WriteFile(filepath.Join(f.dir, "assistants", id, "package.yao"), []byte("{\"name\": "), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	app, err := assistant.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Select(app, Selection{Assistant: "tests.judge", Dir: f.dir}); err == nil || !strings.Contains(err.Error(), `assistant "tests.judge" cannot run`) {
		t.Errorf("selecting a broken assistant = %v", err)
	}
	_, err = Select(app, Selection{Dir: f.dir, Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), `its tests cannot run: assistant "greeter" cannot run`) || strings.Contains(err.Error(), "judge") {
		t.Errorf("every test = %v", err)
	}
	if err := os.RemoveAll(filepath.Join(f.dir, "assistants", "greeter")); err != nil {
		t.Fatal(err)
	}
	if app, err = assistant.Open(f.dir); err != nil {
		t.Fatal(err)
	}
	if suites, err := Select(app, Selection{Dir: f.dir, Timeout: time.Minute}); err != nil || len(suites) != 5 {
		t.Errorf("without greeter: %d suites, %v", len(suites), err)
	}
}
