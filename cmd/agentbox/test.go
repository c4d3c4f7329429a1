package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/testrun"
)

const testUsage = `usage: agentbox test [--app DIR] [-i INPUT] [-n ASSISTANT] [-o REPORT]... [flags]

Runs an app's assistant tests in Yao's format (yao agent test):

  agent tests    JSONL cases next to an assistant (tests/*.jsonl): an input,
                 assertions (contains, regex, json_path, equals, type, schema,
                 tool_called, tool_result, script, an agent as judge), before
                 and after functions, multi-turn cases and simulated users
                 with checkpoints. Each case runs through the pipeline as a
                 user's turn does: a sandboxed assistant in its real sandbox.
  script tests   Test...(t, ctx) functions of *_test.ts files next to hooks
                 and tools (an assistant's src/, the app's scripts/), run in
                 the hook engine with Yao's t.assert.

-i is a JSONL file, a message (for -n), a script test (agents.ASSISTANT.FILE
for src/FILE_test.ts, Yao's scripts.ASSISTANT.FILE, scripts.PATH for the
app's scripts/PATH_test.ts); without -i every test of -n (or of the app) runs.
-o writes a report; its extension picks the format: .jsonl (Yao's events),
.json (Yao's report), .html, .md, .xml (JUnit). -o may be given several times.

Exit status: 0 every test passed, 1 a test failed (or errored, or timed out),
2 the tests could not run (bad flags, a file that does not load, an unknown
assistant or connector, a before-all function that failed).

flags:
`

func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("test", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var (
		appDir, input, name, connector, user, team, ctxFile  string
		filter, timeout, before, after, simulator, scriptsIn string
		runtimeName, kubeconfig                              string
		runs, parallel                                       int
		verbose, failFast, asJSON, dryRun                    bool
		outputs                                              listFlag
	)
	str := func(p *string, def, usage string, names ...string) {
		for _, n := range names {
			fl.StringVar(p, n, def, usage)
		}
	}
	boolean := func(p *bool, usage string, names ...string) {
		for _, n := range names {
			fl.BoolVar(p, n, false, usage)
		}
	}
	str(&appDir, ".", "the app folder", "app", "a")
	str(&input, "", "a JSONL file, a message, or a script test (agents.ASSISTANT.FILE); default: every test", "input", "i")
	fl.Var(&outputs, "o", "write a report; the extension picks the format: .jsonl .json .html .md .xml (may repeat)")
	fl.Var(&outputs, "output", "same as -o")
	str(&name, "", "the assistant to test (found from the file's folder when -i is a file)", "name", "n")
	str(&connector, "", "run the tested assistant with this connector (a scripted one in CI, a real one by hand)", "connector", "c")
	str(&user, "", "the user the cases run as (default "+testrun.DefaultUser+")", "user", "u")
	str(&team, "", "the team id the cases see (default "+testrun.DefaultTeam+")", "team", "t")
	str(&ctxFile, "", "a context file: Yao's authorized, metadata and locale, and script tests' scripted memory and sandbox", "ctx")
	fl.IntVar(&runs, "runs", 1, "run each case this many times and report its pass rate")
	str(&filter, "", "run only the cases (test functions) whose id matches this regular expression", "run")
	str(&timeout, "5m", "timeout of each case that sets none", "timeout")
	fl.IntVar(&parallel, "parallel", 1, "cases run at once (at most what app.jsonc limits allow one user)")
	boolean(&verbose, "print each answer, turn and log line", "verbose", "v")
	boolean(&failFast, "stop starting cases after the first that fails", "fail-fast")
	str(&before, "", "a function run before each suite's cases (env_test.BeforeAll)", "before")
	str(&after, "", "a function run after each suite's cases (env_test.AfterAll)", "after")
	str(&simulator, "", "the simulator assistant of dynamic cases that name none", "simulator")
	str(&scriptsIn, "", "a script test file of -n: tools for src/tools_test.ts", "scripts")
	boolean(&asJSON, "print the run's events as JSON lines instead of progress", "json")
	boolean(&dryRun, "list the cases and tests that would run, and run none", "dry-run")
	str(&runtimeName, "", "sandbox runtime when the app names none: docker, kubernetes or local", "runtime")
	str(&kubeconfig, "", "kubeconfig of the kubernetes runtime", "kubeconfig")
	fl.Usage = func() {
		fmt.Fprint(stderr, testUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "agentbox test: unexpected argument %q (the input is -i)\n", fl.Arg(0))
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agentbox test: "+format+"\n", a...)
		return 2
	}
	d, err := units.ParseDuration(timeout)
	if err != nil || d <= 0 {
		return bad("--timeout %q: want a duration such as 30s or 5m", timeout)
	}
	if runs < 1 {
		return bad("--runs %d: want 1 or more", runs)
	}
	if parallel < 1 {
		return bad("--parallel %d: want 1 or more", parallel)
	}
	var re *regexp.Regexp
	if filter != "" {
		if re, err = regexp.Compile(filter); err != nil {
			return bad("--run %q: %v", filter, err)
		}
	}
	formats := make([]testrun.Format, len(outputs))
	for i, o := range outputs {
		if formats[i], err = testrun.FormatOf(o); err != nil {
			return bad("-o: %v", err)
		}
	}
	var cfg *testrun.ContextConfig
	if ctxFile != "" {
		if cfg, err = testrun.LoadContext(ctxFile); err != nil {
			return bad("--ctx: %v", err)
		}
	}
	cwd, _ := os.Getwd()

	// The app is loaded once to find the tests (and say what is wrong with
	// them) before anything starts.
	dir, err := filepath.Abs(appDir)
	if err != nil {
		return bad("--app: %v", err)
	}
	// An assistant that does not load is left out (as serve leaves it
	// out); selecting it, or its having tests, is an error Select names.
	app, err := assistant.Open(dir)
	if err != nil {
		return bad("load app (run `agentbox check --app %s` for every problem): %v", appDir, err)
	}
	suites, err := testrun.Select(app, testrun.Selection{Input: input, Assistant: name, Scripts: scriptsIn, Dir: cwd, Timeout: d})
	if err != nil {
		return bad("%v", err)
	}
	if len(suites) == 0 {
		return bad("no tests found: put JSONL cases in assistants/NAME/tests/*.jsonl or Test functions in *_test.ts files (or give -i)")
	}
	conns, err := testrun.Connectors(app, suites, connector)
	if err != nil {
		return bad("%v", err)
	}
	if dryRun {
		printDryRun(stdout, suites, re)
		return 0
	}

	logger := cliLogger(stderr, asJSON || !verbose)
	env, err := openEnv(ctx, envOptions{AppDir: dir, Logger: logger, Runtime: runtimeName, Kubeconfig: kubeconfig,
		Only: testedAssistants(suites, simulator),
		WrapApp: func(src pipeline.AppSource) pipeline.AppSource {
			return testrun.AllowConnectors(src, conns)
		}})
	if err != nil {
		return bad("%v", err)
	}
	defer env.Close(context.WithoutCancel(ctx))

	var sinks []func(*testrun.Event)
	var closers []func() error
	var jsonls []*testrun.JSONLWriter
	for i, o := range outputs {
		if formats[i] != testrun.FormatJSONL {
			continue
		}
		f, err := os.Create(o)
		if err != nil {
			return bad("-o: %v", err)
		}
		closers = append(closers, f.Close)
		j := testrun.NewJSONLWriter(f)
		jsonls = append(jsonls, j)
		sinks = append(sinks, j.Event)
	}
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	var prog *progress
	if asJSON {
		enc := json.NewEncoder(stdout)
		sinks = append(sinks, func(e *testrun.Event) { _ = enc.Encode(e) })
	} else {
		answers := len(suites) == 1 && suites[0].File == "" && suites[0].Kind == testrun.KindAgent
		prog = newProgress(stdout, progressOptions{Verbose: verbose, Live: isTerminal(stdout), Color: colorOK(stdout), Answers: answers})
		prog.Header(dir, connector, suites, re)
		sinks = append(sinks, prog.Event)
	}
	opts := testrun.Options{
		User: user, Team: team, Connector: connector, Timeout: d, Runs: runs, Parallel: parallel, Filter: re,
		FailFast: failFast, BeforeAll: before, AfterAll: after, Simulator: simulator, Context: cfg,
		Memory: pipeline.StoreMemory(env.Store), Version: version, Logger: logger,
	}
	reports, err := testrun.Run(ctx, env.Pipeline, suites, opts, func(e *testrun.Event) {
		for _, s := range sinks {
			s(e)
		}
	})
	if prog != nil {
		prog.Stop()
	}
	if err != nil {
		return bad("%v", err)
	}
	for _, j := range jsonls {
		if err := j.Err(); err != nil {
			fmt.Fprintf(stderr, "agentbox test: JSONL report: %v\n", err)
		}
	}
	var written []string
	for i, o := range outputs {
		if formats[i] == testrun.FormatJSONL {
			written = append(written, o)
			continue
		}
		if err := writeReport(o, formats[i], reports); err != nil {
			fmt.Fprintf(stderr, "agentbox test: %v\n", err)
			continue
		}
		written = append(written, o)
	}
	code := exitCode(reports)
	if prog != nil {
		prog.Summary(reports, written, code)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "agentbox test: interrupted")
		return 2
	}
	return code
}

// exitCode is 2 when a suite could not run, 1 when a test did not pass, 0
// otherwise.
func exitCode(reports []*testrun.Report) int {
	for _, r := range reports {
		if r.Error != "" {
			return 2
		}
	}
	if testrun.AnyFailed(reports) {
		return 1
	}
	return 0
}

// writeReport writes a finished report file (atomically: a reader never
// sees half of one).
func writeReport(path string, f testrun.Format, reports []*testrun.Report) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := testrun.Write(tmp, f, reports); err != nil {
		tmp.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	return nil
}

// testedAssistants are the assistants a run uses: the suites', and their
// cases' simulators and judges.
func testedAssistants(suites []*testrun.Suite, simulator string) []string {
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	add(simulator)
	addAsserts := func(as testrun.Assertions) {
		for _, a := range as {
			if id, ok := strings.CutPrefix(a.Use, "agents:"); ok {
				add(id)
			}
		}
	}
	for _, s := range suites {
		add(s.Assistant)
		for _, c := range s.Cases {
			if c.Simulator != nil {
				add(c.Simulator.Use)
			}
			addAsserts(c.Assert)
			for _, cp := range c.Checkpoints {
				addAsserts(cp.Assert)
			}
		}
	}
	if ids == nil {
		ids = []string{}
	}
	return ids
}

// printDryRun lists what a run would run.
func printDryRun(w io.Writer, suites []*testrun.Suite, re *regexp.Regexp) {
	for _, s := range suites {
		fmt.Fprintf(w, "%s (%s)\n", s.Name, s.Kind)
		for _, c := range s.Cases {
			if re != nil && !re.MatchString(c.ID) {
				continue
			}
			b, _ := json.Marshal(c)
			fmt.Fprintf(w, "  %s\n", b)
		}
		for _, t := range s.Tests {
			if re == nil || re.MatchString(t) {
				fmt.Fprintf(w, "  %s\n", t)
			}
		}
	}
}

// listFlag is a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("empty file name")
	}
	*l = append(*l, v)
	return nil
}
