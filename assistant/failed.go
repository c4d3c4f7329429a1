package assistant

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
)

// Failed is an assistant folder that did not load, and why. An app serves
// its other assistants: a request to this one gets its error (Error).
type Failed struct {
	// ID is the assistant's id, as a loaded one would have.
	ID string
	// Dir is its folder relative to the app root, with forward slashes
	// ("assistants/team/writer").
	Dir string
	// Name and Description are package.yao's, when it could be read
	// (Name is the id otherwise), translated as a loaded assistant's are.
	Name, Description string
	// Problems are its errors, sorted, with their positions; the first is
	// the one Error names. Its warnings are in App.Warnings.
	Problems []Problem
	// LastGood, after a reload, is the version that loaded before these
	// errors and still serves (App.Assistants holds it); nil when the
	// assistant does not serve at all.
	LastGood *Assistant
	// partial is what could be read of it, for translations.
	partial *Assistant
}

// Localized returns the name and description for locale, translated
// from the assistant's locales/ when they could be read.
func (f *Failed) Localized(locale string) (name, description string) {
	if f.partial == nil {
		return f.Name, f.Description
	}
	name, description, _ = f.partial.Localized(locale)
	return cmpOr(name, f.ID), description
}

// Error says that the assistant cannot run and why: its first error with
// its position, and how many more there are.
func (f *Failed) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "assistant %q cannot run: its definition has errors", f.ID)
	if len(f.Problems) > 0 {
		b.WriteString(": ")
		b.WriteString(f.Problems[0].String())
	}
	if n := len(f.Problems) - 1; n > 0 {
		fmt.Fprintf(&b, " (and %d more: agentbox check lists them)", n)
	}
	return b.String()
}

// Serving reports whether the assistant still answers (with its last good
// version).
func (f *Failed) Serving() bool { return f.LastGood != nil }

// appLevel reports whether a problem of file concerns the app as a whole
// (app.jsonc, agent/): such an error keeps the app from loading, where an
// error of an assistant's folder, a connector or an MCP server keeps only
// the assistants that use it from running.
func appLevel(file string) bool {
	top, _, _ := strings.Cut(file, "/")
	return top != AssistantsDir && top != ConnectorsDir && top != MCPsDir
}

// failures records, for every assistant folder that did not load, its
// errors: those of its own files (not of an assistant folder nested in
// it). loaded are the assistants that did; dirs every assistant folder
// found (relative to the app root) by id; partial what could be read of
// the ones that failed.
func failures(probs []Problem, dirs map[string]string, loaded map[string]*Assistant, partial map[string]*Assistant) map[string]*Failed {
	out := map[string]*Failed{}
	for id, dir := range dirs {
		if _, ok := loaded[id]; ok {
			continue
		}
		f := &Failed{ID: id, Dir: dir, Name: id}
		if a := partial[id]; a != nil {
			f.Name, f.Description, f.partial = cmpOr(a.Name, id), a.Description, a
		}
		out[id] = f
	}
	if len(out) == 0 {
		return nil
	}
	for _, p := range probs {
		if p.Warning() {
			continue
		}
		if id := ownerOf(p.File, dirs); id != "" && out[id] != nil {
			out[id].Problems = append(out[id].Problems, p)
		}
	}
	for _, f := range out {
		if len(f.Problems) == 0 {
			// Kept out by something that is not its own file (an MCP
			// server of another folder it lists, say): its reference
			// names it, but say so in any case.
			f.Problems = []Problem{{File: f.Dir, Msg: "did not load; agentbox check says why"}}
		}
		f.Problems = SortProblems(f.Problems)
	}
	return out
}

// ownerOf returns the id of the assistant whose folder holds file (the
// innermost one), "" when none does.
func ownerOf(file string, dirs map[string]string) string {
	best, bestLen := "", -1
	for id, dir := range dirs {
		if (file == dir || strings.HasPrefix(file, dir+"/")) && len(dir) > bestLen {
			best, bestLen = id, len(dir)
		}
	}
	return best
}

// Vet runs check on every assistant of the app (in parallel) and takes
// what it finds into the app: warnings join Warnings, and an assistant
// with errors leaves Assistants for Failed, so that the app serves the
// others. It is for checks the assistant package cannot make itself, such
// as compiling the hooks; problems name files relative to the app root.
// Call it before the app is served: the app is immutable afterwards. check
// is given the app too (the app's scripts, for instance, are shared by its
// assistants' hooks).
func (app *App) Vet(check func(*App, *Assistant) []Problem) {
	ids := slices.Sorted(maps.Keys(app.Assistants))
	found := make([][]Problem, len(ids))
	var g errgroup.Group
	g.SetLimit(4)
	for i, id := range ids {
		g.Go(func() error {
			found[i] = check(app, app.Assistants[id])
			return nil
		})
	}
	_ = g.Wait()
	for i, id := range ids {
		errs, warns := splitProblems(found[i])
		app.Warnings = append(app.Warnings, warns...)
		if len(errs) > 0 {
			a := app.Assistants[id]
			delete(app.Assistants, id)
			if app.Failed == nil {
				app.Failed = map[string]*Failed{}
			}
			rel := a.Dir
			if r, err := filepath.Rel(app.Root, a.Dir); err == nil {
				rel = filepath.ToSlash(r)
			}
			app.Failed[id] = &Failed{ID: id, Dir: rel, Name: a.Name, Description: a.Description, Problems: SortProblems(errs), partial: a}
			app.Errors = append(app.Errors, errs...)
		}
	}
	app.Warnings = SortProblems(app.Warnings)
	app.Errors = SortProblems(app.Errors)
}

// KeepLastGood serves, for every assistant of app that failed but loaded
// in prev, prev's version (Failed.LastGood says so), so that a broken edit
// of one assistant keeps its last good version answering, as a broken edit
// of the whole app keeps the whole last good app. An assistant whose
// folder is gone is not kept.
func (app *App) KeepLastGood(prev *App) {
	if prev == nil {
		return
	}
	for id, f := range app.Failed {
		old := prev.Assistants[id]
		if old == nil {
			if pf := prev.Failed[id]; pf != nil {
				old = pf.LastGood
			}
		}
		if old == nil {
			continue
		}
		f.LastGood = old
		app.Assistants[id] = old
	}
}

// FailedAssistant returns the failure of assistant id, nil when it loaded
// (or does not exist).
func (app *App) FailedAssistant(id string) *Failed {
	if app == nil {
		return nil
	}
	return app.Failed[id]
}
