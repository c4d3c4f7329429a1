package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/jsapi"
)

// compileHooks compiles an assistant's hook source (a.Hooks) so that check
// reports hook errors too (a variable so tests can swap it). An error wrapping *assistant.LoadError contributes
// its positioned problems as they are; any other error becomes one problem
// at the hook file.
var compileHooks = func(a *assistant.Assistant) error { return checkHooks(a, jsapi.Load) }

// checkHooks compiles a's hooks with load and checks that every host tool
// implemented by a hook function finds it.
func checkHooks(a *assistant.Assistant, load func(*assistant.Assistant) (*jsapi.Hooks, error)) error {
	h, err := load(a)
	if err != nil {
		return err
	}
	var probs []assistant.Problem
	pkg := filepath.ToSlash(filepath.Join(assistant.AssistantsDir, a.ID, assistant.PackageFile))
	for _, t := range a.Tools {
		switch {
		case t.Function == "":
		case h == nil:
			probs = append(probs, assistant.Problem{File: pkg, Msg: fmt.Sprintf("tool %q calls hook function %q, but the assistant has no src/index.ts or src/index.js", t.Name, t.Function)})
		case !h.Has(t.Function):
			probs = append(probs, assistant.Problem{File: pkg, Msg: fmt.Sprintf("tool %q calls hook function %q, which %s does not define (have: %s)", t.Name, t.Function, h.File(), strings.Join(h.Exports(), ", "))})
		}
	}
	if len(probs) > 0 {
		return &assistant.LoadError{Problems: probs}
	}
	return nil
}

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("check", flag.ContinueOnError)
	fl.SetOutput(stderr)
	appDir := fl.String("app", ".", "the app folder")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentbox check [--app DIR | DIR]\n\nLoads the app folder and prints every problem as file:line:col: message.\nExit status 1 when there is any.\n\nflags:")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dir := *appDir
	switch fl.NArg() {
	case 0:
	case 1:
		appSet := false
		fl.Visit(func(f *flag.Flag) { appSet = appSet || f.Name == "app" })
		if appSet {
			fmt.Fprintln(stderr, "agentbox check: give the app folder either with --app or as an argument, not both")
			return 2
		}
		dir = fl.Arg(0)
	default:
		fl.Usage()
		return 2
	}
	problems, app, err := check(dir)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox check: %v\n", err)
		return 1
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, p.String())
	}
	if len(problems) > 0 {
		files := map[string]bool{}
		for _, p := range problems {
			files[p.File] = true
		}
		fmt.Fprintf(stdout, "%s in %s\n", plural(len(problems), "problem"), plural(len(files), "file"))
		return 1
	}
	fmt.Fprintf(stdout, "ok: %s, %s\n", plural(len(app.Assistants), "assistant"), plural(len(app.Connectors), "connector"))
	return 0
}

// check loads dir and compiles its hooks, returning every problem sorted.
// err is set only when dir cannot be loaded at all (missing, not a folder).
func check(dir string) ([]assistant.Problem, *assistant.App, error) {
	app, err := assistant.Load(dir)
	if err != nil {
		var le *assistant.LoadError
		if errors.As(err, &le) {
			return le.Problems, nil, nil
		}
		return nil, nil, err
	}
	ids := make([]string, 0, len(app.Assistants))
	for id, a := range app.Assistants {
		if a.Hooks != "" || len(a.Tools) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var problems []assistant.Problem
	for _, id := range ids {
		a := app.Assistants[id]
		err := compileHooks(a)
		if err == nil {
			continue
		}
		var le *assistant.LoadError
		if errors.As(err, &le) {
			problems = append(problems, le.Problems...)
			continue
		}
		var se *jsapi.SourceError
		if errors.As(err, &se) {
			dir, rerr := filepath.Rel(app.Root, a.Dir)
			if rerr != nil {
				dir = a.Dir
			}
			for _, p := range se.Problems {
				problems = append(problems, assistant.Problem{File: filepath.ToSlash(filepath.Join(dir, p.File)), Line: p.Line, Col: p.Col, Msg: p.Msg})
			}
			continue
		}
		rel, rerr := filepath.Rel(app.Root, a.Hooks)
		if rerr != nil {
			rel = a.Hooks
		}
		problems = append(problems, assistant.Problem{File: filepath.ToSlash(rel), Msg: err.Error()})
	}
	return assistant.SortProblems(problems), app, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
