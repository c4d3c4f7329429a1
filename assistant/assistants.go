package assistant

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/skills"
)

// defaultHookTTL bounds each hook call unless hooks.timeout says otherwise.
// Yao bounds hooks only by the request: a hook that calls models and other
// assistants (ctx.llm, ctx.agent) routinely takes seconds, so the bound is
// the one a stuck hook should not pass, not a typical hook's time.
const defaultHookTTL = 60 * time.Second

// RolePrefix starts a connector that names a role of agent/agent.yml
// ("use::light").
const RolePrefix = "use::"

// loadAssistants loads every assistant folder under assistants/ (any
// folder holding a package file, at any depth), in parallel. It returns
// the assistants that loaded without errors and the number of folders
// found.
func (l *loader) loadAssistants(app *App) (map[string]*Assistant, int) {
	dir := filepath.Join(l.root, AssistantsDir)
	if _, err := os.Stat(dir); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist) && len(l.connIDs) == 0 && len(app.MCPServers) == 0:
			l.fileProblem(dir, "missing: this folder is not an app: it has no assistants (%s/<id>/%s) and no connectors", AssistantsDir, PackageFile)
		case errors.Is(err, fs.ErrNotExist):
			l.warn(dir, "missing: the app has no assistants (%s/<id>/%s)", AssistantsDir, PackageFile)
		default:
			l.fileProblem(dir, "%v", unwrapPath(err))
		}
		return map[string]*Assistant{}, 0
	}
	type job struct{ id, dir, pkg string }
	var jobs []job
	l.asstDirs, l.partial = map[string]string{}, map[string]*Assistant{}
	l.assistantDirs(dir, func(abs, pkg string, parts []string) {
		id := strings.Join(parts, ".")
		l.asstDirs[id] = l.rel(abs)
		if pkg == "" {
			return // not loadable; its problem is recorded
		}
		for _, part := range parts {
			if !idPart.MatchString(part) {
				l.fileProblem(abs, "invalid assistant id %q: use 1-64 letters, digits, '_' or '-', starting with a letter or digit", part)
				return
			}
		}
		jobs = append(jobs, job{id, abs, pkg})
	})
	// Every assistant's own MCP servers first: an assistant may list
	// another's by Yao's id (agents.<id>.<name>).
	own := make([]map[string]*MCPServer, len(jobs))
	agentMCPs := map[string]*MCPServer{}
	for i, j := range jobs {
		if st, err := os.Stat(filepath.Join(j.dir, MCPsDir)); err == nil && st.IsDir() {
			own[i] = l.loadOwnMCPServers(j.id, filepath.Join(j.dir, MCPsDir))
			for k, v := range own[i] {
				agentMCPs[k] = v
			}
		}
	}
	// Assistants are independent: load them on every CPU, each with its
	// own problem list, merged afterwards (Inspect sorts problems).
	type result struct {
		a     *Assistant
		probs []Problem
	}
	results := make([]result, len(jobs))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, j := range jobs {
		g.Go(func() error {
			sub := &loader{root: l.root, connIDs: l.connIDs, brokenConns: l.brokenConns, agentMCPs: agentMCPs}
			a := sub.loadAssistant(j.id, j.dir, j.pkg, app, own[i])
			results[i] = result{a, sub.probs}
			return nil
		})
	}
	_ = g.Wait() // loading records problems; it returns no error
	out := make(map[string]*Assistant, len(jobs))
	for i, r := range results {
		l.probs = append(l.probs, r.probs...)
		switch {
		case r.a == nil:
		case hasErrors(r.probs) || !ownServersLoaded(own[i]):
			// An own server with problems keeps the assistant from
			// loading, as any other file of its folder does.
			l.partial[jobs[i].id] = r.a
		default:
			out[jobs[i].id] = r.a
		}
	}
	return out, len(l.asstDirs)
}

// assistantDirs walks the assistants folder and calls fn for each folder
// holding a package file, with the path parts of its id. Symlinked folders
// are followed (once each); hidden entries and node_modules are skipped.
// A top-level folder with no assistant in it gets a warning, as Yao skips
// it silently.
func (l *loader) assistantDirs(root string, fn func(abs, pkg string, parts []string)) {
	seen := map[string]bool{}
	var visit func(abs string, parts []string) bool
	visit = func(abs string, parts []string) bool {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil || seen[real] {
			return false
		}
		seen[real] = true
		if len(parts) > maxWalkDepth {
			l.fileProblem(abs, "folders nest deeper than %d levels here; the rest is not read", maxWalkDepth)
			return false
		}
		entries, err := os.ReadDir(abs)
		if err != nil {
			l.fileProblem(abs, "%v", unwrapPath(err))
			return false
		}
		found := false
		if len(parts) > 0 {
			var pkgs []string
			for _, e := range entries {
				if slices.Contains(packageFiles, e.Name()) {
					pkgs = append(pkgs, e.Name())
				}
			}
			if len(pkgs) > 1 {
				l.fileProblem(abs, "both %s: keep one package file", strings.Join(pkgs, " and "))
				fn(abs, "", parts)
				return true
			}
			if len(pkgs) == 1 {
				fn(abs, pkgs[0], parts)
				found = true
			}
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") || name == "node_modules" {
				continue
			}
			sub := filepath.Join(abs, name)
			if !e.IsDir() {
				if e.Type()&fs.ModeSymlink == 0 {
					continue
				}
				if st, err := os.Stat(sub); err != nil || !st.IsDir() {
					continue
				}
			}
			if found && slices.Contains([]string{"src", "mcps", "skills", "prompts", "assets", "locales"}, name) {
				continue // an assistant's own folders hold no assistants
			}
			sub2 := append(slices.Clone(parts), name)
			if visit(sub, sub2) {
				found = true
			} else if len(parts) == 0 {
				l.warn(sub, "no %s here or in any folder below: not an assistant (Yao skips it too)", PackageFile)
			}
		}
		return found
	}
	visit(root, nil)
}

// loadAssistant loads one assistant folder: its package file with the
// sandbox, hooks and tools settings, then its MCP servers, prompts and
// presets, locales, skills and hooks entry. It returns what it could read
// (nil when not even the package file could); the caller tells from the
// problems whether the assistant loaded.
func (l *loader) loadAssistant(id, dir, pkg string, app *App, own map[string]*MCPServer) *Assistant {
	entries, err := os.ReadDir(dir)
	if err != nil {
		l.fileProblem(dir, "%v", unwrapPath(err))
		return nil
	}
	has := make(map[string]bool, len(entries))
	for _, e := range entries {
		has[e.Name()] = true
	}
	a := &Assistant{ID: id, Dir: dir, HookTimeout: defaultHookTTL, Meta: Metadata{Type: "assistant"}, OwnMCPServers: own}
	var raw rawPackage
	d := l.decode(filepath.Join(dir, pkg), &raw)
	if d != nil && !d.broken {
		l.applyPackage(d, a, &raw, app, has)
	}
	l.done(d)
	if !has[PromptsFile] && d != nil && raw.Prompts != nil {
		a.Prompts = raw.Prompts.msgs
	}
	switch {
	case has[PromptsFile]:
		if raw.Prompts != nil && d != nil {
			l.probs = append(l.probs, Problem{File: d.file, Line: lineOf(d, "prompts"), Col: colOf(d, "prompts"), Severity: SeverityWarning,
				Msg: "prompts is not used: prompts.yml is there, and it wins (as in Yao)"})
		}
		a.Prompts = l.loadPrompts(filepath.Join(dir, PromptsFile), dir)
	case has["prompts.yaml"]:
		l.warn(filepath.Join(dir, "prompts.yaml"), "not read: prompts are read from %s (as in Yao); rename this file", PromptsFile)
	}
	l.checkPromptVars(l.rel(filepath.Join(dir, PromptsFile)), a.Prompts)
	if st, err := os.Stat(filepath.Join(dir, PromptsDir)); err == nil && st.IsDir() {
		presets := l.loadPresets(filepath.Join(dir, PromptsDir), dir)
		for k, v := range presets {
			if a.PromptPresets == nil {
				a.PromptPresets = map[string][]chat.Message{}
			}
			a.PromptPresets[k] = v // the folder wins over package.yao (as in Yao)
		}
	}
	if has[LocalesDir] {
		a.Locales = l.loadLocales(filepath.Join(dir, LocalesDir))
	}
	if has[SkillsDir] {
		list, probs := skills.Discover(filepath.Join(dir, SkillsDir))
		for _, p := range probs {
			p.File = l.rel(filepath.Join(dir, SkillsDir)) + "/" + p.File
			l.probs = append(l.probs, p)
		}
		a.Skills = list
	}
	if has["src"] {
		a.Hooks = l.findHooks(dir)
	}
	if d != nil && !d.broken {
		l.checkFolder(a, app, entries)
	}
	return a
}

// ownServersLoaded reports whether every MCP server of an assistant's own
// mcps/ loaded.
func ownServersLoaded(own map[string]*MCPServer) bool {
	for _, srv := range own {
		if srv == nil {
			return false
		}
	}
	return true
}

// findHooks returns the absolute hook entry file, "" when there is none.
func (l *loader) findHooks(dir string) string {
	ts, js := filepath.Join(dir, filepath.FromSlash(HooksTS)), filepath.Join(dir, filepath.FromSlash(HooksJS))
	_, tsErr := os.Stat(ts)
	_, jsErr := os.Stat(js)
	switch {
	case tsErr == nil && jsErr == nil:
		l.probs = append(l.probs, Problem{File: l.rel(js), Line: 1, Col: 1,
			Msg: "both src/index.ts and src/index.js exist: keep one hooks entry file"})
		return ""
	case tsErr == nil:
		return ts
	case jsErr == nil:
		return js
	}
	return ""
}

// lineOf and colOf position a field's key in d, for problems raised
// outside the decoder.
func lineOf(d *doc, path string) int {
	line, _ := lineCol(d.src, d.keyOffset(path))
	return line
}

func colOf(d *doc, path string) int {
	_, col := lineCol(d.src, d.keyOffset(path))
	return col
}
