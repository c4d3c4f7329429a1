package jsapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/assistant"
)

// DefaultProcessTimeout bounds a process run for an MCP tool or by Process
// when the caller's deadline is later: the default of Yao's process runner
// (gou process.Execute).
const DefaultProcessTimeout = 30 * time.Second

// maxProcessDepth bounds processes calling processes, so a script that
// calls itself fails clearly instead of exhausting the stack.
const maxProcessDepth = 32

// Limits on finding an app's scripts.
const (
	maxScriptFiles = 5000
	maxScriptDepth = 16
)

// Process families. Yao names a process group.id.Method (gou process.go):
// scripts.<path under scripts/>.<Fn>, services.<path under
// services/>.<Fn>, agents.<assistant>.<path under its src/>.<Fn>; the
// other groups (models, flows, tables, utils, ...) are Yao's own.
const (
	groupScripts  = "scripts"
	groupServices = "services"
	groupAgents   = "agents"
)

// Scripts is the JavaScript of one loaded app: its scripts (scripts/,
// services/ and every assistant's src/ besides the hooks) run as Yao's
// processes, and every assistant's hooks, which call them with
// Process(name, ...args). Each file is bundled and compiled on first use,
// once; a reload of the app makes a new Scripts. Imports resolve as Yao's
// runtime resolves them: relative paths, and the app root's tsconfig.json
// compilerOptions.paths ("@lib/*", "@scripts/*"). A Scripts is safe for
// concurrent use.
type Scripts struct {
	root string
	// paths are the import aliases of the app root's tsconfig.json (nil:
	// none); tsErr says why it could not be read.
	paths *tsPaths
	tsErr error
	// files are the app's script files by process key
	// ("scripts.tests.mcp", "agents.tests.mcpload.tools"), lower-case as
	// Yao looks them up.
	files map[string]scriptFile

	mu       sync.Mutex
	compiled map[string]*scriptEntry
	hooks    map[*assistant.Assistant]*scriptEntry
}

// scriptFile is one script of the app.
type scriptFile struct {
	// abs is the file; rel its path relative to the app root.
	abs, rel string
}

type scriptEntry struct {
	once sync.Once
	h    *Hooks
	err  error
}

// NewScripts finds app's scripts. It reads folders only: nothing is
// compiled until it is used (see Check for compiling everything). A nil
// app has no scripts.
func NewScripts(app *assistant.App) *Scripts {
	s := &Scripts{files: map[string]scriptFile{}, compiled: map[string]*scriptEntry{}, hooks: map[*assistant.Assistant]*scriptEntry{}}
	if app == nil || app.Root == "" {
		return s
	}
	s.root = app.Root
	s.paths, s.tsErr = readTSPaths(app.Root)
	s.addFolder(groupScripts, filepath.Join(app.Root, "scripts"), specID)
	s.addFolder(groupServices, filepath.Join(app.Root, "services"), specID)
	for _, id := range slices.Sorted(maps.Keys(app.Assistants)) {
		a := app.Assistants[id]
		if a == nil || a.Dir == "" {
			continue
		}
		s.addFolder(groupAgents+"."+id, filepath.Join(a.Dir, "src"), srcID)
	}
	return s
}

// addFolder records every .ts and .js file under dir by key prefix.id,
// with id made from the file's path by idOf ("" to skip the file).
func (s *Scripts) addFolder(prefix, dir string, idOf func(rel string) string) {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(name, ".") || name == "node_modules" || strings.Count(rel, "/") >= maxScriptDepth) {
				return filepath.SkipDir
			}
			return nil
		}
		if n++; n > maxScriptFiles {
			return filepath.SkipAll
		}
		ext := filepath.Ext(name)
		if (ext != ".ts" && ext != ".js") || strings.HasPrefix(name, ".") || !d.Type().IsRegular() {
			return nil
		}
		id := idOf(rel)
		if id == "" {
			return nil
		}
		key := strings.ToLower(prefix + "." + id)
		if prev, dup := s.files[key]; dup && strings.HasSuffix(prev.rel, ".ts") {
			return nil // foo.ts wins over foo.js
		}
		relRoot, err := filepath.Rel(s.root, p)
		if err != nil {
			relRoot = p
		}
		s.files[key] = scriptFile{abs: p, rel: filepath.ToSlash(relRoot)}
		return nil
	})
}

// specID is Yao's id of a file under scripts/ or services/ (share.SpecName):
// the path without the extension, a dot in a folder or file name an
// underscore, '/' a dot ("lib/utils.ts" is lib.utils).
func specID(rel string) string {
	rel = strings.TrimSuffix(rel, filepath.Ext(rel))
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, ".", "_")
	}
	return strings.Join(parts, ".")
}

// srcID is Yao's id of a script under an assistant's src/ (agent/assistant
// scripts.go): the path without the extension, '/' a dot. The hook file
// (src/index.ts or index.js) and tests (*_test.ts) are not scripts.
func srcID(rel string) string {
	base := strings.TrimSuffix(rel, filepath.Ext(rel))
	if base == "index" || strings.HasSuffix(base, "_test") {
		return ""
	}
	return strings.ReplaceAll(base, "/", ".")
}

// Hooks compiles a's hooks (once; later calls return the same), their
// Process calls reaching this app's scripts. It returns nil Hooks and a nil
// error when a has no hook source.
func (s *Scripts) Hooks(a *assistant.Assistant) (*Hooks, error) {
	if a == nil || a.Hooks == "" {
		return nil, nil
	}
	s.mu.Lock()
	e, ok := s.hooks[a]
	if !ok {
		e = &scriptEntry{}
		s.hooks[a] = e
	}
	s.mu.Unlock()
	e.once.Do(func() {
		e.h, e.err = compile(a, s)
		if e.err == nil {
			e.err = e.h.discover()
		}
	})
	return e.h, e.err
}

// Forget drops the compiled hooks of the assistants keep does not hold, so a
// long-lived Scripts does not keep what a reload replaced.
func (s *Scripts) Forget(keep func(*assistant.Assistant) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a := range s.hooks {
		if !keep(a) {
			delete(s.hooks, a)
		}
	}
}

// script returns the compiled script of key (a file of files).
func (s *Scripts) script(key string) (*Hooks, error) {
	f, ok := s.files[key]
	if !ok {
		return nil, nil
	}
	s.mu.Lock()
	e, ok := s.compiled[key]
	if !ok {
		e = &scriptEntry{}
		s.compiled[key] = e
	}
	s.mu.Unlock()
	e.once.Do(func() {
		h, err := compileFile(s.root, f.abs, DefaultProcessTimeout, s)
		if err == nil {
			err = h.discover()
		}
		e.h, e.err = h, err
	})
	return e.h, e.err
}

// ProcessError is a process that cannot run: a name that is not a process
// of the app's scripts (Code NOT_FOUND), one of Yao's own process families
// (Code YAO_ONLY), or a script that does not compile (Code HOOK_ERROR).
type ProcessError struct {
	Name, Code, Message string
}

func (e *ProcessError) Error() string { return e.Message }

// target is a resolved process: its script and function.
type target struct {
	name   string
	key    string
	method string
}

// resolve maps a process name to a script and function the way Yao's
// process runner does (gou process.go make()): the function is the last
// segment, as written; the script is the rest, looked up lower-cased.
func (s *Scripts) resolve(name string) (target, *ProcessError) {
	fields := strings.Split(name, ".")
	t := target{name: name, method: fields[len(fields)-1]}
	notFound := func(format string, args ...any) *ProcessError {
		return &ProcessError{Name: name, Code: CodeNotFound, Message: fmt.Sprintf("process %s not found: ", name) + fmt.Sprintf(format, args...)}
	}
	if name == "" {
		return t, &ProcessError{Name: name, Code: CodeInvalidArgument, Message: "Process: the process name is empty"}
	}
	switch group := fields[0]; group {
	case groupScripts, groupServices, groupAgents:
		if len(fields) < 3 || t.method == "" {
			return t, notFound("want %s.<name>.<Function>", group)
		}
		t.key = strings.ToLower(strings.Join(fields[:len(fields)-1], "."))
		if _, ok := s.files[t.key]; !ok {
			switch group {
			case groupScripts, groupServices:
				return t, notFound("no file %s/%s.ts (or .js) in the app", group, strings.Join(fields[1:len(fields)-1], "/"))
			default:
				return t, notFound("no assistant's src/ has that script (agents.<assistant id>.<path under src/>.<Function>)")
			}
		}
		return t, nil
	case "assistants", "ai":
		return t, notFound("Yao runs an assistant's scripts as agents.<assistant id>.<path under src/>.<Function>")
	}
	return t, &ProcessError{Name: name, Code: CodeYaoOnly,
		Message: fmt.Sprintf("%s is a Yao process (%s.*): agentbox runs the app's own scripts only (scripts.*, services.*, agents.*)", name, fields[0])}
}

// Check compiles the script of the process name and checks that it defines
// the function, for `agentbox check` and an MCP server's tools. The error
// is a *ProcessError, or the *SourceError of a script that does not
// compile.
func (s *Scripts) Check(name string) error {
	t, perr := s.resolve(name)
	if perr != nil {
		return perr
	}
	h, err := s.script(t.key)
	if err != nil {
		return err
	}
	if !h.Has(t.method) {
		return &ProcessError{Name: name, Code: CodeNotFound,
			Message: fmt.Sprintf("process %s not found: %s defines no function %s (have: %s)", name, h.File(), t.method, strings.Join(h.Exports(), ", "))}
	}
	return nil
}

// Files lists the app's script files (relative to the app root), sorted.
func (s *Scripts) Files() []string {
	out := make([]string, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, f.rel)
	}
	slices.Sort(out)
	return out
}

// Reachable compiles the scripts of the processes names (and, through
// their literal Process calls, of every process they call in turn), for
// `agentbox check`: the errors of those that do not compile, and the
// warnings of those that do (Yao-only globals, processes that cannot
// run), files relative to the app root. Scripts nothing reaches are not
// looked at: an app's scripts/ serves Yao's other features too.
func (s *Scripts) Reachable(names []string) []assistant.Problem {
	var out []assistant.Problem
	if s.tsErr != nil {
		out = append(out, assistant.Problem{File: "tsconfig.json", Msg: s.tsErr.Error() + ": its import aliases (compilerOptions.paths) do not apply"})
	}
	seen := map[string]bool{}
	queue := slices.Clone(names)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		t, perr := s.resolve(name)
		if perr != nil || seen[t.key] {
			continue
		}
		seen[t.key] = true
		h, err := s.script(t.key)
		if err != nil {
			var se *SourceError
			if errors.As(err, &se) {
				out = append(out, se.Problems...)
			} else {
				out = append(out, assistant.Problem{File: s.files[t.key].rel, Msg: err.Error()})
			}
			continue
		}
		out = append(out, h.Warnings()...)
		queue = append(queue, h.Processes()...)
	}
	return assistant.SortProblems(out)
}

// Run runs the process name with args as Yao runs an MCP tool's process:
// each argument as it is, and, when hc is not nil, the request's ctx
// object as one more argument (Yao passes the agent's context). Its result
// is JSON-decoded (nil for null or undefined). A process that cannot run
// is a *ProcessError; one that throws, times out or is cancelled an
// *Error, as a hook's.
func (s *Scripts) Run(ctx context.Context, hc *Context, name string, args []any) (any, error) {
	return s.run(ctx, hc, name, args, hc != nil)
}

type depthKey struct{}

func (s *Scripts) run(ctx context.Context, hc *Context, name string, args []any, withCtx bool) (any, error) {
	depth, _ := ctx.Value(depthKey{}).(int)
	if depth >= maxProcessDepth {
		return nil, &ProcessError{Name: name, Code: CodeHookError, Message: fmt.Sprintf("%s: processes call each other %d deep: is a script calling itself?", name, maxProcessDepth)}
	}
	t, perr := s.resolve(name)
	if perr != nil {
		return nil, perr
	}
	h, err := s.script(t.key)
	if err != nil {
		return nil, &ProcessError{Name: name, Code: CodeHookError, Message: fmt.Sprintf("%s: %s does not compile: %v", name, s.files[t.key].rel, err)}
	}
	if !h.Has(t.method) {
		return nil, &ProcessError{Name: name, Code: CodeNotFound,
			Message: fmt.Sprintf("process %s not found: %s defines no function %s (have: %s)", name, h.File(), t.method, strings.Join(h.Exports(), ", "))}
	}
	c, err := h.start(context.WithValue(ctx, depthKey{}, depth+1), hc, name)
	defer c.finish()
	if err != nil {
		return nil, err
	}
	jsArgs := make([]goja.Value, 0, len(args)+1)
	for _, a := range args {
		jsArgs = append(jsArgs, c.toJS(a))
	}
	if withCtx {
		jsArgs = append(jsArgs, c.ctxObject())
	}
	v, _, err := c.invoke(t.method, jsArgs...)
	if err != nil {
		return nil, err
	}
	out, err := c.exportJSON(v)
	if err != nil {
		return nil, c.resultErr("%s returned a value that is not JSON: %v", name, err)
	}
	return out, nil
}

// process is the Process global: Process(name, ...args) runs a process of
// the app's scripts in a runtime of its own, within this call's deadline,
// and returns its result; a failure is thrown as an Error with the
// process's name, message and code.
func (c *call) process(fc goja.FunctionCall) goja.Value {
	name, ok := asString(fc.Argument(0))
	if !ok {
		c.throw(argErr("Process: the first argument is the process name (a string), got %s", typeName(fc.Argument(0))), "")
	}
	args := make([]any, 0, len(fc.Arguments))
	for i, a := range fc.Arguments[min(1, len(fc.Arguments)):] {
		v, err := c.exportJSON(a)
		if err != nil {
			c.throw(argErr("Process(%q): argument %d is not JSON: %v", name, i+1, err), "")
		}
		args = append(args, v)
	}
	s := c.h.scripts
	if s == nil {
		s = noScripts
	}
	out, err := s.run(c.ctx, c.hc, name, args, false)
	if err != nil {
		c.throwProcess(name, err)
	}
	return c.toJS(out)
}

// noScripts serves hooks loaded without an app (Load).
var noScripts = &Scripts{files: map[string]scriptFile{}}

// throwProcess rethrows a failed process in the caller: its name, message
// and code, and the hook's own stop when the caller's deadline ended it.
func (c *call) throwProcess(name string, err error) {
	var pe *ProcessError
	if errors.As(err, &pe) {
		if pe.Code == CodeYaoOnly {
			// Recorded even when the script catches it, as the Yao-only
			// globals are: a test that fails after one is Yao-only.
			c.yaoOnly = append(c.yaoOnly, fmt.Sprintf("Process(%q)", name))
		}
		c.throw(&hostError{code: pe.Code, msg: pe.Message}, CodeHookError)
	}
	var je *Error
	if errors.As(err, &je) {
		msg := je.Message
		if je.File != "" {
			msg = fmt.Sprintf("%s (at %s:%d:%d)", msg, je.File, je.Line, je.Column)
		}
		he := &hostError{code: cmp.Or(je.Code, CodeHookError), msg: name + ": " + msg}
		c.throw(he, CodeHookError)
	}
	c.throw(fmt.Errorf("%s: %w", name, err), CodeHookError)
}
