package jsapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
	"github.com/go-sourcemap/sourcemap"

	"github.com/agentbox/agentbox/assistant"
)

// DefaultTimeout bounds a hook call when the assistant sets no hook timeout.
// It is assistant's default (hooks.timeout in package.yao).
const DefaultTimeout = 60 * time.Second

// maxCallStack bounds JS recursion, so runaway recursion is a RangeError
// rather than unbounded memory.
const maxCallStack = 4096

// Names inside the bundle.
const (
	// bundleName is the compiled program's name; the source map points its
	// frames back to the files under src/.
	bundleName = "__agentbox_hooks.js"
	// nsGlobal holds the entry module's exports.
	nsGlobal = "__agentbox_exports__"
	// topGlobal holds the entry module's top-level functions.
	topGlobal = "__agentbox_toplevel__"
)

// Hooks is an assistant's compiled hook code. It is immutable and safe for
// concurrent use by any number of requests; each call runs in a runtime of
// its own (see the package doc).
type Hooks struct {
	// file is the entry file relative to the assistant folder.
	file    string
	prog    *goja.Program
	timeout time.Duration
	// funcs are the callable hook names, sorted.
	funcs []string
	// yao are the Yao globals the code uses, sorted; warnings say where
	// it uses the Yao-only ones.
	yao      []string
	warnings []assistant.Problem
	// calls are the Process calls with a literal name, checked against
	// the app's scripts for Warnings.
	calls []processCall
	// scripts are the app's processes its Process calls reach (nil: the
	// hooks were loaded without an app, and every process is not found).
	scripts *Scripts
}

// Load compiles a's hooks. It returns nil Hooks and a nil error when the
// assistant has no hook source. Errors name file:line:col relative to the
// assistant folder; a module whose top-level code throws or never finishes
// is an error too.
//
// Hooks loaded this way reach no app scripts: Process finds none. A
// server loads them with Scripts.Hooks.
func Load(a *assistant.Assistant) (*Hooks, error) {
	if a == nil || a.Hooks == "" {
		return nil, nil
	}
	h, err := compile(a, nil)
	if err != nil {
		return nil, err
	}
	if err := h.discover(); err != nil {
		return nil, err
	}
	return h, nil
}

// Compile checks that a's hooks compile and load, for `agentbox check`. It
// returns the error Load would return (nil when there are no hooks).
func Compile(a *assistant.Assistant) error {
	_, err := Load(a)
	return err
}

// File is the hook entry file, relative to the assistant folder.
func (h *Hooks) File() string { return h.file }

// Timeout is the bound on each hook call.
func (h *Hooks) Timeout() time.Duration { return h.timeout }

// Has reports whether the hooks define fn (exported or top-level).
func (h *Hooks) Has(fn string) bool {
	if h == nil {
		return false
	}
	_, ok := slices.BinarySearch(h.funcs, fn)
	return ok
}

// Exports lists the functions the hooks define, sorted: Create, Next and
// any other exported or top-level function (host tools).
func (h *Hooks) Exports() []string {
	if h == nil {
		return nil
	}
	return slices.Clone(h.funcs)
}

// compile bundles and compiles a's hook entry file; positions are
// relative to the assistant folder.
func compile(a *assistant.Assistant, s *Scripts) (*Hooks, error) {
	entry := a.Hooks
	if !filepath.IsAbs(entry) {
		entry = filepath.Join(a.Dir, entry)
	}
	entry = filepath.Clean(entry)
	dir := a.Dir
	if dir == "" {
		dir = filepath.Dir(entry)
	}
	timeout := a.HookTimeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return compileFile(dir, entry, timeout, s)
}

// compileFile bundles and compiles the entry file with everything it
// imports, naming files relative to dir. The result's calls are bounded by
// timeout; its Process calls reach s (nil: none).
func compileFile(dir, entry string, timeout time.Duration, s *Scripts) (*Hooks, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	if entry, err = filepath.Abs(entry); err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	// The bundler resolves symlinks: name files relative to the real
	// folder so that positions read relative to the assistant folder.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		if re, err := filepath.EvalSymlinks(entry); err == nil {
			dir, entry = real, re
		}
	}
	rel := relTo(dir, entry)
	src, err := os.ReadFile(entry)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("hooks: %s does not exist", rel)
		}
		return nil, fmt.Errorf("hooks: read %s: %w", rel, err)
	}
	loader, ok := loaderFor(entry)
	if !ok {
		return nil, fmt.Errorf("hooks: %s: want a .ts or .js file", rel)
	}
	var paths *tsPaths
	if s != nil {
		paths = s.paths
	}
	code, err := bundle(dir, entry, string(src), loader, paths)
	if err != nil {
		return nil, err
	}
	prog, err := goja.Compile(bundleName, code, false)
	if err != nil {
		return nil, compileError(rel, code, err)
	}
	h := &Hooks{file: rel, prog: prog, timeout: timeout, scripts: s}
	if strings.Contains(code, yaoGlobal) {
		h.yao, h.warnings, h.calls = yaoUses(code)
	}
	h.warnings = assistant.SortProblems(append(h.warnings, ctxMemberWarnings(code)...))
	return h, nil
}

// Warnings are what the hook source does that agentbox cannot honour,
// found when it was compiled: each use of a Yao-only global, and Yao's old
// Done, Fail and Retry hooks, which are never called. Files are relative
// to the assistant folder.
func (h *Hooks) Warnings() []assistant.Problem {
	if h == nil {
		return nil
	}
	out := append(slices.Clone(h.warnings), h.processWarnings()...)
	for _, fn := range []string{"Done", "Fail", "Retry"} {
		if h.Has(fn) {
			out = append(out, assistant.Problem{File: h.file, Severity: assistant.SeverityWarning,
				Msg: fmt.Sprintf("%s is never called: it is a hook of Yao's older versions; Yao and agentbox call Create and Next", fn)})
		}
	}
	return assistant.SortProblems(out)
}

func loaderFor(path string) (api.Loader, bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".ts", ".mts", ".cts":
		return api.LoaderTS, true
	case ".js", ".mjs", ".cjs":
		return api.LoaderJS, true
	}
	return api.LoaderNone, false
}

// bundle turns the entry file and everything it imports into one ES2017
// script that leaves the entry's exports in nsGlobal and its top-level
// functions in topGlobal.
//
// The bundle is an ES module whose closing export statement is rewritten
// into a plain assignment. An IIFE bundle would do without the rewrite, but
// its CommonJS interop helpers (for-in over the exports, getters) run on
// every call and double a call's cost, since each call starts a runtime.
//
// Imports resolve as in Yao's runtime: relative paths, npm packages, and
// the aliases of the app root's tsconfig.json (paths; nil for none). No
// tsconfig.json of the tree applies otherwise, as none does in Yao.
func bundle(dir, entry, src string, loader api.Loader, paths *tsPaths) (string, error) {
	// Plain top-level functions (the seed's style) are not exports, and
	// bundling may rename them (scope hoisting gives a name two modules
	// declare a suffix). The entry gets a trailing statement that
	// collects every top-level name it might declare; typeof keeps a name
	// that is not a function (or not declared at all) out, so a name found
	// in a comment or string does no harm. It goes after the user's code,
	// so positions in messages are unchanged.
	tail := topLevelCollector(src)
	entryFilter := "^" + regexp.QuoteMeta(entry) + "$"
	plugin := api.Plugin{
		Name: "agentbox-hooks",
		Setup: func(b api.PluginBuild) {
			b.OnLoad(api.OnLoadOptions{Filter: entryFilter, Namespace: "file"},
				func(api.OnLoadArgs) (api.OnLoadResult, error) {
					contents := stripYaoImports(src) + tail
					return api.OnLoadResult{Contents: &contents, Loader: loader, ResolveDir: filepath.Dir(entry)}, nil
				})
			// Every other module loses the imports Yao strips too.
			b.OnLoad(api.OnLoadOptions{Filter: `\.[cm]?[jt]s$`, Namespace: "file"},
				func(args api.OnLoadArgs) (api.OnLoadResult, error) {
					b, err := os.ReadFile(args.Path)
					if err != nil {
						return api.OnLoadResult{}, err
					}
					l, _ := loaderFor(args.Path)
					contents := stripYaoImports(string(b))
					return api.OnLoadResult{Contents: &contents, Loader: l, ResolveDir: filepath.Dir(args.Path)}, nil
				})
		},
	}
	opts := api.BuildOptions{
		EntryPoints:    []string{entry},
		AbsWorkingDir:  dir,
		Outfile:        filepath.Join(dir, bundleName),
		Bundle:         true,
		Write:          false,
		Format:         api.FormatESModule,
		Target:         api.ES2017,
		Platform:       api.PlatformNeutral,
		MainFields:     []string{"module", "main"},
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
		TreeShaking:    api.TreeShakingFalse,
		Charset:        api.CharsetUTF8,
		// Licence comments of bundled npm packages stay where they are:
		// at the end of the file they would follow the exports.
		LegalComments: api.LegalCommentsInline,
		LogLevel:      api.LogLevelSilent,
		Plugins:       []api.Plugin{plugin},
		// Free uses of Yao's globals point into one object (see yao.go).
		Define: yaoDefines(),
	}
	opts.TsconfigRaw = "{}"
	if paths != nil {
		opts.Plugins = append([]api.Plugin{paths.plugin()}, opts.Plugins...)
	}
	res := api.Build(opts)
	if len(res.Errors) > 0 {
		return "", buildError(dir, res.Errors)
	}
	for _, f := range res.OutputFiles {
		if strings.HasSuffix(f.Path, ".js") {
			return rewriteExports(string(f.Contents))
		}
	}
	return "", errors.New("hooks: bundle produced no output")
}

// exportItem is one "local as exported" of esbuild's closing export.
var exportItem = regexp.MustCompile(`^([A-Za-z_$][\w$]*)(?:\s+as\s+([A-Za-z_$][\w$]*|"(?:[^"\\]|\\.)*"))?$`)

// rewriteExports turns the export statement esbuild closes an ES module
// bundle with ("export {\n  a,\n  b as c\n};" or, for a CommonJS entry,
// "export default require_x();") into an assignment to nsGlobal. Only the
// end of the bundle changes, so the source map stays valid.
func rewriteExports(code string) (string, error) {
	body, tail := code, ""
	if i := strings.LastIndex(code, "\n//# sourceMappingURL="); i >= 0 {
		body, tail = code[:i+1], code[i+1:]
	}
	trimmed := strings.TrimRight(body, "\n")
	start := strings.LastIndex(trimmed, "\nexport ") + 1
	if start == 0 && !strings.HasPrefix(trimmed, "export ") {
		return code, nil // no exports
	}
	stmt := trimmed[start:]
	var assign string
	switch {
	case strings.HasPrefix(stmt, "export default ") && strings.HasSuffix(stmt, ";"):
		assign = strings.TrimPrefix(stmt, "export default ")
	case strings.HasPrefix(stmt, "export {") && strings.HasSuffix(stmt, "};"):
		inner := strings.TrimSuffix(strings.TrimPrefix(stmt, "export {"), "};")
		var b strings.Builder
		b.WriteString("{")
		for _, item := range strings.Split(inner, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			m := exportItem.FindStringSubmatch(item)
			if m == nil {
				return "", fmt.Errorf("hooks: unsupported export %q", item)
			}
			name := m[2]
			if name == "" {
				name = m[1]
			}
			if !strings.HasPrefix(name, `"`) {
				name = strconv.Quote(name)
			}
			fmt.Fprintf(&b, "%s: %s, ", name, m[1])
		}
		b.WriteString("};")
		assign = b.String()
	default:
		return "", fmt.Errorf("hooks: unsupported export statement %q", stmt)
	}
	return trimmed[:start] + "globalThis[" + strconv.Quote(nsGlobal) + "] = " + assign + "\n" + tail, nil
}

// topDecl finds names that may be top-level functions.
var topDecl = regexp.MustCompile(`\b(?:function\s*\*?\s*|(?:const|let|var)\s+)([A-Za-z_$][\w$]*)`)

// reserved words cannot follow typeof in strict code.
var reserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`break case catch class const continue debugger default delete do else
		enum export extends false finally for function if import in instanceof new null return super
		switch this throw true try typeof var void while with yield let static implements interface
		package private protected public await arguments eval undefined NaN Infinity`) {
		reserved[w] = true
	}
}

func topLevelCollector(src string) string {
	seen := map[string]bool{}
	var b strings.Builder
	b.WriteString("\n;globalThis[")
	b.WriteString(strconv.Quote(topGlobal))
	b.WriteString("] = {")
	for _, m := range topDecl.FindAllStringSubmatch(src, 10000) {
		name := m[1]
		// A Yao global's name in the collector would be a free use of it
		// (and reported as one) wherever the hook only declares it locally.
		if seen[name] || reserved[name] || slices.Contains(yaoGlobals, name) {
			continue
		}
		seen[name] = true
		fmt.Fprintf(&b, "%q: typeof %s === \"function\" ? %s : void 0, ", name, name, name)
	}
	b.WriteString("};\n")
	return b.String()
}

// SourceError is hook source that does not build, with every problem at
// its position in the source. Each problem's File is relative to the
// assistant folder ("src/index.ts").
type SourceError struct {
	Problems []assistant.Problem
}

// Error lists the problems, one a line, as file:line:col: message.
func (e *SourceError) Error() string {
	lines := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		lines = append(lines, p.String())
	}
	return "hooks: " + strings.Join(lines, "\n")
}

// buildError reports esbuild's messages with their positions.
func buildError(dir string, msgs []api.Message) error {
	e := &SourceError{Problems: make([]assistant.Problem, 0, len(msgs))}
	for _, m := range msgs {
		p := assistant.Problem{Msg: m.Text}
		if m.Location != nil {
			f := m.Location.File
			if filepath.IsAbs(f) {
				f = relTo(dir, f)
			}
			p.File, p.Line, p.Col = filepath.ToSlash(f), m.Location.Line, m.Location.Column+1
			if m.Location.LineText != "" {
				p.Msg += "\n    " + strings.TrimRight(m.Location.LineText, " \t")
			}
		}
		pkg, missing := missingPackage(m.Text)
		for _, n := range m.Notes {
			// esbuild's advice to mark a missing package external would
			// leave an import the hook engine cannot run.
			if n.Text != "" && !(missing && strings.Contains(n.Text, "external")) {
				p.Msg += "\n    note: " + n.Text
			}
		}
		if missing {
			p.Msg += fmt.Sprintf("\n    note: hooks bundle npm packages from a node_modules folder beside or above them: is %q installed (npm install in the app folder)?", pkg)
		}
		e.Problems = append(e.Problems, p)
	}
	return e
}

// missingPackage reports whether an esbuild message says an npm package
// (a bare import path, not a file or an alias of the app) could not be
// found, and its name.
func missingPackage(text string) (string, bool) {
	spec, ok := strings.CutPrefix(text, `Could not resolve "`)
	if !ok {
		return "", false
	}
	spec, _, _ = strings.Cut(spec, `"`)
	if spec == "" || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, "@yao/") {
		return "", false
	}
	return spec, true
}

// compileError maps a goja syntax error in the bundle (syntax esbuild
// accepts but goja does not) back to the hook source.
func compileError(rel, code string, err error) error {
	var se *goja.CompilerSyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("hooks: %s: %w", rel, err)
	}
	pos := se.File.Position(se.Offset)
	if sm := inlineSourceMap(code); sm != nil {
		if file, _, line, col, ok := sm.Source(pos.Line, pos.Column-1); ok {
			return &SourceError{Problems: []assistant.Problem{{File: file, Line: line, Col: col + 1, Msg: se.Message + " (not supported by the hook engine)"}}}
		}
	}
	return &SourceError{Problems: []assistant.Problem{{File: rel, Msg: fmt.Sprintf("%s (in the bundle at line %d col %d; not supported by the hook engine)", se.Message, pos.Line, pos.Column)}}}
}

func inlineSourceMap(code string) *sourcemap.Consumer {
	const prefix = "//# sourceMappingURL=data:application/json;base64,"
	i := strings.LastIndex(code, prefix)
	if i < 0 {
		return nil
	}
	b64 := strings.TrimSpace(code[i+len(prefix):])
	data, err := decodeBase64(b64)
	if err != nil {
		return nil
	}
	sm, err := sourcemap.Parse(bundleName, data)
	if err != nil {
		return nil
	}
	return sm
}

func relTo(dir, p string) string {
	r, err := filepath.Rel(dir, p)
	if err != nil {
		return filepath.ToSlash(p)
	}
	return filepath.ToSlash(r)
}

// discover runs the module once to learn which functions it defines; a
// module that throws or hangs at load is reported now rather than on the
// first request.
func (h *Hooks) discover() error {
	c, err := h.start(context.Background(), nil, "load")
	if c != nil {
		defer c.finish()
	}
	if err != nil {
		// The module's top-level code failed: report where.
		p := assistant.Problem{File: h.file, Msg: "loading the module: " + err.Error()}
		var je *Error
		if errors.As(err, &je) {
			p.Msg = "loading the module: " + je.Name + ": " + je.Message
			if je.File != "" {
				p.File, p.Line, p.Col = je.File, je.Line, je.Column
			}
		}
		return &SourceError{Problems: []assistant.Problem{p}}
	}
	h.funcs = c.funcNames()
	return nil
}
