package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/jsapi"
)

// compileHooks compiles an assistant's hook source (a.Hooks) so that check
// reports hook errors too (a variable so tests can swap it). An error wrapping *assistant.LoadError contributes
// its positioned problems as they are; any other error becomes one problem
// at the hook file.
var compileHooks = func(s *jsapi.Scripts, a *assistant.Assistant) error { return checkHooks(a, s.Hooks) }

// checkHooks compiles a's hooks with load and checks that every host tool
// implemented by a hook function finds it. Its *assistant.LoadError holds
// the errors and the warnings (Yao-only globals, old hook names), files
// relative to the app root.
func checkHooks(a *assistant.Assistant, load func(*assistant.Assistant) (*jsapi.Hooks, error)) error {
	h, err := load(a)
	if err != nil {
		return err
	}
	var probs []assistant.Problem
	pkg := filepath.ToSlash(filepath.Join(assistant.AssistantsDir, filepath.FromSlash(strings.ReplaceAll(a.ID, ".", "/")), assistant.PackageFile))
	for _, t := range a.Tools {
		switch {
		case t.Function == "":
		case h == nil:
			probs = append(probs, assistant.Problem{File: pkg, Msg: fmt.Sprintf("tool %q calls hook function %q, but the assistant has no src/index.ts or src/index.js", t.Name, t.Function)})
		case !h.Has(t.Function):
			probs = append(probs, assistant.Problem{File: pkg, Msg: fmt.Sprintf("tool %q calls hook function %q, which %s does not define (have: %s)", t.Name, t.Function, h.File(), strings.Join(h.Exports(), ", "))})
		}
	}
	warns := h.Warnings()
	if len(probs) > 0 || len(warns) > 0 {
		// Warnings are relative to the assistant folder, like the hook
		// engine's errors.
		dir := filepath.ToSlash(filepath.Join(assistant.AssistantsDir, filepath.FromSlash(strings.ReplaceAll(a.ID, ".", "/"))))
		for i := range warns {
			warns[i].File = path.Join(dir, warns[i].File)
		}
		return &assistant.LoadError{Problems: probs, Warnings: warns}
	}
	return nil
}

// hookProblems turns what compile (checkHooks with a hook loader) says of
// a's hooks into problems positioned relative to the app root at root:
// a *assistant.LoadError's errors and warnings as they are, a
// *jsapi.SourceError's positioned errors, anything else one error at the
// hook file.
func hookProblems(root string, a *assistant.Assistant, compile func(*assistant.Assistant) error) []assistant.Problem {
	err := compile(a)
	if err == nil {
		return nil
	}
	var le *assistant.LoadError
	if errors.As(err, &le) {
		return append(slices.Clone(le.Problems), le.Warnings...)
	}
	var se *jsapi.SourceError
	if errors.As(err, &se) {
		dir, rerr := filepath.Rel(root, a.Dir)
		if rerr != nil {
			dir = a.Dir
		}
		out := make([]assistant.Problem, 0, len(se.Problems))
		for _, p := range se.Problems {
			p.File = path.Join(filepath.ToSlash(dir), p.File)
			out = append(out, p)
		}
		return out
	}
	rel, rerr := filepath.Rel(root, a.Hooks)
	if rerr != nil {
		rel = a.Hooks
	}
	return []assistant.Problem{{File: filepath.ToSlash(rel), Msg: err.Error()}}
}

const checkUsage = `usage: agentbox check [--app DIR | DIR] [--strict]

Loads the app folder and prints every problem as file:line:col: message
(warnings say "warning:"), the URL each model connector calls, and a
summary line. TypeScript hooks are type-checked against agentbox.d.ts when
a TypeScript compiler is found ($AGENTBOX_TSC, tsc on PATH, or the app's
node_modules/.bin/tsc); their type errors are warnings, errors with
--strict. Exit status 1 when there is any error.
`

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("check", checkUsage, stdout, stderr)
	appDir := fl.appFlag()
	strict := fl.Bool("strict", false, "type errors in TypeScript hooks are errors, not warnings")
	args, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	dir := *appDir
	switch len(args) {
	case 0:
	case 1:
		appSet := false
		fl.Visit(func(f *flag.Flag) { appSet = appSet || f.Name == "app" })
		if appSet {
			return fl.usageError("give the app folder either with --app or as an argument, not both")
		}
		dir = args[0]
	default:
		return fl.usageError("want at most one app folder, got %d arguments", len(args))
	}
	r, loaded, err := check(dir)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox check: %v\n", err)
		return 1
	}
	var skipped string
	if hooks := tsHooks(r.App); len(hooks) > 0 {
		if tsc := findTSC(r.App.Root); tsc == "" {
			skipped = fmt.Sprintf("TypeScript hooks not type-checked (%s): no TypeScript compiler found; install one (npm install -g typescript, or npm install -D typescript in the app) or set AGENTBOX_TSC to tsc's path", plural(len(hooks), "hook file"))
		} else {
			sev := assistant.SeverityWarning
			if *strict {
				sev = assistant.SeverityError
			}
			r.Problems = assistant.SortProblems(append(r.Problems, typeCheck(ctx, tsc, r.App, hooks, sev)...))
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintln(stdout, p.String())
	}
	if skipped != "" {
		fmt.Fprintln(stdout, skipped)
	}
	for _, line := range connectorLines(r.App) {
		fmt.Fprintln(stdout, line)
	}
	for _, id := range slices.Sorted(maps.Keys(r.App.Failed)) {
		f := r.App.Failed[id]
		fmt.Fprintf(stdout, "assistant %s (%s) does not run: %s\n", id, f.Dir, plural(len(f.Problems), "error"))
	}
	errs := r.Errors()
	conns := plural(r.Connectors, "connector")
	if n := len(r.App.Skipped); n > 0 {
		conns += fmt.Sprintf(" (%d skipped)", n)
	}
	fmt.Fprintf(stdout, "%d of %s loaded, %s, %s, %s\n", loaded, plural(r.Assistants, "assistant"), conns,
		plural(len(r.Problems)-errs, "warning"), plural(errs, "error"))
	if errs > 0 {
		return 1
	}
	return 0
}

// connectorLines says, for every model connector that loaded, which URL
// its requests go to and where that came from, so no request goes to a
// host nobody named without it showing here.
func connectorLines(app *assistant.App) []string {
	ids := make([]string, 0, len(app.Connectors))
	for id := range app.Connectors {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []string
	for _, id := range ids {
		c := app.Connectors[id]
		head := fmt.Sprintf("connector %s (%s): %s", id, c.File, c.Type)
		if c.Type == assistant.TypeScripted {
			out = append(out, head+" plays "+filepath.ToSlash(relTo(app.Root, c.Options.Script))+" (offline, no host)")
			continue
		}
		host, from := c.Options.Host, c.Options.HostFrom
		note := ""
		if name, isEnv := strings.CutPrefix(host, assistant.EnvPrefix); isEnv {
			v := os.Getenv(name)
			if v == "" {
				out = append(out, fmt.Sprintf("%s calls the URL in %s (options.%s), which is not set: its requests fail until it is", head, host, from))
				continue
			}
			note = fmt.Sprintf(" (options.%s: %s)", from, host)
			host = v
		} else if from != "" {
			note = fmt.Sprintf(" (options.%s)", from)
		} else {
			note = " (no host named: " + c.Type + "'s public API)"
		}
		u, err := connector.Endpoint(c.Type, host)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", head, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s calls %s%s", head, u, note))
	}
	return out
}

func relTo(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// check loads dir and compiles its hooks, returning every problem sorted
// and the number of assistants that loaded without errors, hooks
// included (r.App.Failed lists the others). err is set only when dir
// cannot be loaded at all (missing, not a folder).
func check(dir string) (*assistant.Report, int, error) {
	r, err := assistant.Inspect(dir)
	if err != nil {
		return nil, 0, err
	}
	app := r.App
	var mu sync.Mutex
	problems := r.Problems
	scripts := jsapi.NewScripts(app)
	app.Vet(func(_ *assistant.App, a *assistant.Assistant) []assistant.Problem {
		if a.Hooks == "" && len(a.Tools) == 0 {
			return nil
		}
		ps := hookProblems(app.Root, a, func(a *assistant.Assistant) error { return compileHooks(scripts, a) })
		mu.Lock()
		problems = append(problems, ps...)
		mu.Unlock()
		return ps
	})
	problems = append(problems, checkProcesses(app, scripts)...)
	r.Problems = assistant.SortProblems(problems)
	return r, len(app.Assistants), nil
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// checkProcesses reports the problems of the app's scripts that
// assistants reach (by their hooks' Process calls and their process MCP
// servers): scripts that do not compile, and each process server's tool
// or resource whose process cannot run, which would answer the model with
// an error.
func checkProcesses(app *assistant.App, scripts *jsapi.Scripts) []assistant.Problem {
	var roots []string
	for _, id := range slices.Sorted(maps.Keys(app.Assistants)) {
		if h, err := scripts.Hooks(app.Assistants[id]); err == nil {
			roots = append(roots, h.Processes()...)
		}
	}
	servers := map[string]*assistant.MCPServer{}
	for id, def := range app.MCPServers {
		servers[id] = def
	}
	for _, a := range app.Assistants {
		for id, def := range a.OwnMCPServers {
			servers[id] = def
		}
	}
	ids := make([]string, 0, len(servers))
	for id, def := range servers {
		if def != nil && def.Process != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var problems []assistant.Problem
	for _, id := range ids {
		def := servers[id]
		for _, t := range def.Process.Tools {
			roots = append(roots, t.Process)
		}
		for _, r := range def.Process.Resources {
			roots = append(roots, r.Process)
		}
		report := func(what, name, proc string) {
			err := scripts.Check(proc)
			if err == nil {
				return
			}
			msg := err.Error()
			var se *jsapi.SourceError
			if errors.As(err, &se) {
				msg = fmt.Sprintf("%s: its script does not compile", proc)
			}
			problems = append(problems, assistant.Problem{File: def.File, Severity: assistant.SeverityWarning,
				Msg: fmt.Sprintf("%s %s: %s; a call returns this error", what, name, msg)})
		}
		for _, t := range def.Process.Tools {
			report("tool", t.Name, t.Process)
		}
		for _, r := range def.Process.Resources {
			report("resource", r.Name, r.Process)
		}
	}
	return append(problems, scripts.Reachable(roots)...)
}
