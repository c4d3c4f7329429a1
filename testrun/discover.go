package testrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/assistant"
)

// Selection is what a run tests: Yao's -i, -n and --scripts.
type Selection struct {
	// Input is -i: a JSONL file, a message, a script test
	// ("agents.<assistant>.<file>", Yao's "scripts.<assistant>.<file>", or
	// "scripts.<path>" for the app's scripts/), or "" for every test
	// found.
	Input string
	// Assistant is -n: the tested assistant (found from the file's folder
	// when the input is a file).
	Assistant string
	// Scripts is --scripts: a script test file of the assistant
	// ("tools" for src/tools_test.ts).
	Scripts string
	// Dir is where relative paths start (the working directory); the
	// app's folder is tried next.
	Dir string
	// Timeout bounds each test function (compiling test files needs it).
	Timeout time.Duration
}

// scriptName matches a script test reference.
var scriptName = regexp.MustCompile(`^(scripts|agents|assistants)\.[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)+$`)

// Select builds the suites a selection names. Errors say what was wrong
// with the selection (an unknown assistant, a file that does not exist or
// does not load); they mean nothing can run.
func Select(app *assistant.App, sel Selection) ([]*Suite, error) {
	if f := broken(app, sel.Assistant); f != nil {
		return nil, f
	}
	if sel.Assistant != "" && app.Assistants[sel.Assistant] == nil {
		return nil, fmt.Errorf("unknown assistant %q (have: %s)", sel.Assistant, strings.Join(sortedIDs(app), ", "))
	}
	if sel.Scripts != "" {
		if sel.Assistant == "" {
			return nil, errors.New("--scripts needs -n, the assistant whose src/ holds the test file")
		}
		if sel.Input != "" {
			return nil, errors.New("give -i or --scripts, not both")
		}
		sel.Input = "agents." + sel.Assistant + "." + strings.TrimSuffix(strings.TrimSuffix(sel.Scripts, ".ts"), "_test")
	}
	in := strings.TrimSpace(sel.Input)
	switch {
	case in == "":
		return Discover(app, sel.Assistant, sel.Timeout)
	case scriptName.MatchString(in) && !fileExists(resolvePath(app, sel.Dir, in)):
		s, err := scriptSuite(app, in, sel.Timeout)
		if err != nil {
			return nil, err
		}
		return []*Suite{s}, nil
	case isTestFile(in) && fileExists(resolvePath(app, sel.Dir, in)):
		path, err := filepath.Abs(resolvePath(app, sel.Dir, in))
		if err != nil {
			return nil, err
		}
		root, owner := app.Root, ""
		if a := assistantOf(app, path); a != nil {
			root, owner = a.Dir, a.ID
		}
		s, err := ScriptSuite(relOr(app.Root, path), path, root, owner, sel.Timeout)
		if err != nil {
			return nil, err
		}
		return []*Suite{s}, nil
	case looksLikeFile(app, sel.Dir, in):
		path := resolvePath(app, sel.Dir, in)
		id := sel.Assistant
		if id == "" {
			a := assistantOf(app, path)
			if a == nil {
				return nil, fmt.Errorf("%s is not in an assistant's folder: name the assistant with -n", in)
			}
			id = a.ID
		}
		s, err := agentSuite(app, id, path)
		if err != nil {
			return nil, err
		}
		return []*Suite{s}, nil
	}
	id := sel.Assistant
	if id == "" {
		if a := assistantOf(app, sel.Dir); a != nil {
			id = a.ID
		} else {
			return nil, fmt.Errorf("-i %q is a message: name the assistant it is for with -n (have: %s)", preview(in, 40), strings.Join(sortedIDs(app), ", "))
		}
	}
	c := &Case{ID: "T001", Input: in, File: "(message)"}
	if err := c.check(); err != nil {
		return nil, err
	}
	return []*Suite{{Kind: KindAgent, Name: id + ": message", Assistant: id, Cases: []*Case{c}, Root: app.Assistants[id].Dir}}, nil
}

// Discover finds the tests of one assistant (or, with id "", of the whole
// app): each assistant's tests/*.jsonl (not the output-*.jsonl files Yao
// writes there) and src/**/*_test.ts, and the app's scripts/**/*_test.ts.
// A file that does not load is an error.
func Discover(app *assistant.App, id string, timeout time.Duration) ([]*Suite, error) {
	suites, errs := discover(app, id, timeout)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return suites, nil
}

// discover finds the tests, and what is wrong with each file that does
// not load.
func discover(app *assistant.App, id string, timeout time.Duration) ([]*Suite, []error) {
	ids := []string{id}
	if id == "" {
		ids = sortedIDs(app)
	}
	var suites []*Suite
	var errs []error
	if id == "" {
		// An assistant that does not load is not tested; when it has
		// tests, they could not run.
		for _, fid := range sortedFailed(app) {
			if hasTests(filepath.Join(app.Root, filepath.FromSlash(app.Failed[fid].Dir))) {
				errs = append(errs, fmt.Errorf("its tests cannot run: %w", app.Failed[fid]))
			}
		}
	}
	for _, aid := range ids {
		a := app.Assistants[aid]
		files, err := filepath.Glob(filepath.Join(a.Dir, "tests", "*.jsonl"))
		if err != nil {
			return nil, []error{err}
		}
		sort.Strings(files)
		for _, f := range files {
			if strings.HasPrefix(filepath.Base(f), "output-") {
				continue
			}
			s, err := agentSuite(app, aid, f)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			suites = append(suites, s)
		}
		tests, err := testFiles(filepath.Join(a.Dir, "src"))
		if err != nil {
			errs = append(errs, err)
		}
		for _, f := range tests {
			rel := strings.TrimSuffix(strings.TrimSuffix(relOr(filepath.Join(a.Dir, "src"), f), ".ts"), ".js")
			name := "agents." + aid + "." + strings.TrimSuffix(strings.ReplaceAll(rel, "/", "."), "_test")
			s, err := ScriptSuite(name, f, a.Dir, aid, timeout)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(s.Tests) > 0 { // env_test.ts and the like hold before/after functions only
				suites = append(suites, s)
			}
		}
	}
	if id == "" {
		dir := filepath.Join(app.Root, "scripts")
		tests, err := testFiles(dir)
		if err != nil {
			errs = append(errs, err)
		}
		for _, f := range tests {
			rel := strings.TrimSuffix(strings.TrimSuffix(relOr(dir, f), ".ts"), ".js")
			s, err := ScriptSuite("scripts."+strings.TrimSuffix(strings.ReplaceAll(rel, "/", "."), "_test"), f, app.Root, "", timeout)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(s.Tests) > 0 {
				suites = append(suites, s)
			}
		}
	}
	return suites, errs
}

// broken returns the failure of assistant id when it did not load and
// serves no last good version, else nil.
func broken(app *assistant.App, id string) *assistant.Failed {
	if f := app.Failed[id]; id != "" && f != nil && app.Assistants[id] == nil {
		return f
	}
	return nil
}

// sortedFailed lists the ids of the assistants that did not load and do
// not serve.
func sortedFailed(app *assistant.App) []string {
	var ids []string
	for id := range app.Failed {
		if broken(app, id) != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// hasTests reports whether an assistant folder has test cases or script
// tests.
func hasTests(dir string) bool {
	if files, _ := filepath.Glob(filepath.Join(dir, "tests", "*.jsonl")); slices.ContainsFunc(files, func(f string) bool {
		return !strings.HasPrefix(filepath.Base(f), "output-")
	}) {
		return true
	}
	tests, _ := testFiles(filepath.Join(dir, "src"))
	return len(tests) > 0
}

// agentSuite loads a JSONL file of an assistant's cases.
func agentSuite(app *assistant.App, id, path string) (*Suite, error) {
	a := app.Assistants[id]
	cases, err := LoadCases(path)
	if err != nil {
		return nil, err
	}
	for _, c := range cases {
		c.File = path
	}
	return &Suite{Kind: KindAgent, Name: id + ": " + relOr(a.Dir, path), Assistant: id, File: path, Cases: cases, Root: a.Dir}, nil
}

// scriptSuite resolves a script test reference the way Yao's runner does:
// the longest assistant id after the prefix, then src/<rest>_test.ts; for
// "scripts." also the app's scripts/<path>_test.ts.
func scriptSuite(app *assistant.App, ref string, timeout time.Duration) (*Suite, error) {
	parts := strings.Split(ref, ".")
	prefix, rest := parts[0], parts[1:]
	tried := []string{}
	if a, mod := longestAssistant(app, rest); a != nil && len(mod) > 0 {
		name := strings.TrimSuffix(strings.Join(mod, "."), "_test")
		base := filepath.Join(append([]string{a.Dir, "src"}, strings.Split(name, ".")...)...) + "_test"
		if f, err := scriptFile(base); err == nil {
			return ScriptSuite("agents."+a.ID+"."+name, f, a.Dir, a.ID, timeout)
		}
		tried = append(tried, relOr(app.Root, base)+".ts")
	}
	if prefix == "scripts" {
		base := filepath.Join(append([]string{app.Root, "scripts"}, rest...)...)
		if !strings.HasSuffix(base, "_test") {
			base += "_test"
		}
		if f, err := scriptFile(base); err == nil {
			return ScriptSuite("scripts."+strings.TrimSuffix(strings.Join(rest, "."), "_test"), f, app.Root, "", timeout)
		}
		tried = append(tried, relOr(app.Root, base)+".ts")
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("script test %q: no assistant's id starts it (have: %s)", ref, strings.Join(sortedIDs(app), ", "))
	}
	return nil, fmt.Errorf("script test %q: no test file (tried %s)", ref, strings.Join(tried, ", "))
}

// assistantOf is the assistant whose folder holds path (the deepest one).
func assistantOf(app *assistant.App, path string) *assistant.Assistant {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	var best *assistant.Assistant
	for _, a := range app.Assistants {
		if abs == a.Dir || strings.HasPrefix(abs, a.Dir+string(filepath.Separator)) {
			if best == nil || len(a.Dir) > len(best.Dir) {
				best = a
			}
		}
	}
	return best
}

// resolvePath resolves a relative path against dir, else the app's
// folder, where it exists.
func resolvePath(app *assistant.App, dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	for _, base := range []string{dir, app.Root} {
		if base == "" {
			continue
		}
		if c := filepath.Join(base, p); fileExists(c) {
			return c
		}
	}
	if dir != "" {
		return filepath.Join(dir, p)
	}
	return filepath.Join(app.Root, p)
}

// looksLikeFile reports whether -i names a file: it ends in .jsonl or
// .json, or a file of that name exists.
func looksLikeFile(app *assistant.App, dir, in string) bool {
	if strings.ContainsAny(in, "\n") {
		return false
	}
	if strings.HasSuffix(in, ".jsonl") || strings.HasSuffix(in, ".json") {
		return true
	}
	return (strings.Contains(in, "/") || strings.Contains(in, string(filepath.Separator))) && fileExists(resolvePath(app, dir, in))
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
