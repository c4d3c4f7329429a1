package assistant

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// File and folder names of an app.
const (
	AppFile       = "app.jsonc"
	ConnectorsDir = "connectors"
	AssistantsDir = "assistants"
	MCPsDir       = "mcps"
	// AgentDir holds agent/agent.yml (connector roles) and
	// agent/prompts.yml (global prompts).
	AgentDir    = "agent"
	PackageFile = "package.yao"
	PromptsFile = "prompts.yml"
	// PromptsDir holds an assistant's prompt presets.
	PromptsDir = "prompts"
	// AssetsDir holds the files prompts include with @assets/.
	AssetsDir  = "assets"
	LocalesDir = "locales"
	// SandboxFile is Yao's sandbox v2 definition beside package.yao
	// (sandbox.jsonc and sandbox.json are read too).
	SandboxFile = "sandbox.yao"
	SkillsDir   = "skills"
	HooksTS     = "src/index.ts"
	HooksJS     = "src/index.js"
	mcpSuffix   = ".mcp"
)

// configExts are the extensions of JSONC definition files
// (x.conn.yao, x.mcp.json, package.jsonc, ...): .yao and .jsonc are JSON
// with comments and trailing commas; .json is strict in Yao.
var configExts = []string{".yao", ".jsonc", ".json"}

// packageFiles are the names an assistant's package file may have, the
// first preferred.
var packageFiles = []string{"package.yao", "package.jsonc", "package.json"}

// idPart is one component of an assistant id (a folder name).
var idPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// specPart is one component of a connector or MCP server id once Yao has
// derived it from a path: no dots (Yao turns them into '_') and no
// control characters.
var specPart = regexp.MustCompile(`^[^\x00-\x1f\x7f.]{1,128}$`)

// Limits on walking an app folder, so a stray huge tree is a clear problem.
const (
	maxWalkDepth = 16
	maxWalkFiles = 20000
)

// Report is what Inspect found in an app folder.
type Report struct {
	// App holds what loaded without errors: the settings, the connectors
	// and the assistants that had none (nil only when the folder could not
	// be read at all).
	App *App
	// Problems are every error and warning, sorted by file and position.
	Problems []Problem
	// Assistants is the number of assistant folders found; Connectors the
	// number of connector files.
	Assistants, Connectors int
}

// Errors returns the number of errors among the problems.
func (r *Report) Errors() int {
	n := 0
	for _, p := range r.Problems {
		if !p.Warning() {
			n++
		}
	}
	return n
}

// Load reads the app folder dir: app.jsonc, agent/agent.yml, connectors,
// app-level MCP servers, and every assistant with its prompts, MCP
// definitions, sandbox, skills and hooks source. Everything is validated
// and every default applied. When anything is wrong the error is a
// *LoadError listing every problem with its file and position; an
// unreadable dir is a plain error. Warnings (what loads but is not
// honoured as written, such as Yao-only features) are in App.Warnings.
// Open is the lenient form a server uses: it serves the assistants that
// load.
func Load(dir string) (*App, error) {
	r, err := Inspect(dir)
	if err != nil {
		return nil, err
	}
	errs, warns := splitProblems(r.Problems)
	if len(errs) > 0 {
		return nil, &LoadError{Root: r.App.Root, Problems: errs, Warnings: warns}
	}
	r.App.Warnings = warns
	return r.App, nil
}

// Open reads the app folder dir as Load does, but an error that concerns
// only some assistants keeps only those from running: an assistant folder
// with errors is in App.Failed with them, and so is an assistant whose
// connector or MCP server file has errors, while every other assistant
// loads (as Yao serves an app whose assistants partly fail). Only errors
// of the app's own settings (app.jsonc, agent/) make it fail, with a
// *LoadError; App.Errors lists the others, App.Warnings the warnings.
func Open(dir string) (*App, error) {
	r, err := Inspect(dir)
	if err != nil {
		return nil, err
	}
	errs, warns := splitProblems(r.Problems)
	var fatal []Problem
	for _, p := range errs {
		if appLevel(p.File) {
			fatal = append(fatal, p)
		}
	}
	if len(fatal) > 0 {
		return nil, &LoadError{Root: r.App.Root, Problems: fatal, Warnings: warns}
	}
	r.App.Warnings, r.App.Errors = warns, errs
	return r.App, nil
}

// Inspect loads dir as Load does but returns whatever loaded along with
// every problem, errors and warnings alike, for `agentbox check`. Its
// error is set only when dir cannot be read at all.
func Inspect(dir string) (*Report, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("app folder: %w", err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("app folder: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("app folder %s: not a folder", root)
	}
	l := &loader{root: root}
	app := &App{Root: root}
	app.Config = l.loadConfig()
	app.Agent = l.loadAgent()
	app.Connectors, app.Skipped = l.loadConnectors()
	app.MCPServers = l.loadAppMCPServers()
	var found int
	app.Assistants, found = l.loadAssistants(app)
	app.Failed = failures(l.probs, l.asstDirs, app.Assistants, l.partial)
	return &Report{App: app, Problems: SortProblems(l.probs), Assistants: found, Connectors: l.connFiles}, nil
}

// loader collects problems while loading one app.
type loader struct {
	root  string
	probs []Problem
	// connIDs holds every connector id defined, including connectors
	// whose files had problems or were skipped, so a reference to them
	// does not also report them as undefined.
	connIDs map[string]bool
	// connFiles counts connector files.
	connFiles int
	// agentMCPs are every assistant's own MCP servers, by Yao's id.
	agentMCPs map[string]*MCPServer
	// brokenConns are the connectors whose files have errors: id -> file.
	brokenConns map[string]string
	// asstDirs are the assistant folders found, relative to the root, by
	// id (those whose package file could not be read too); partial holds
	// what could be read of the assistants that have errors.
	asstDirs map[string]string
	partial  map[string]*Assistant
}

// warn records a warning about a whole file or folder (no position).
func (l *loader) warn(abs string, format string, args ...any) {
	l.probs = append(l.probs, Problem{File: l.rel(abs), Msg: fmt.Sprintf(format, args...), Severity: SeverityWarning})
}

func (l *loader) rel(abs string) string {
	r, err := filepath.Rel(l.root, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(r)
}

// fileProblem records a problem about a whole file or folder (no position).
func (l *loader) fileProblem(abs string, format string, args ...any) {
	l.probs = append(l.probs, Problem{File: l.rel(abs), Msg: fmt.Sprintf(format, args...)})
}

// read returns a file's content, recording a problem when it cannot.
func (l *loader) read(abs string) ([]byte, bool) {
	b, err := readConfig(abs)
	if err != nil {
		l.fileProblem(abs, "%v", unwrapPath(err))
		return nil, false
	}
	return b, true
}

// readConfig reads a configuration file with one open: it must be a
// regular file of at most maxConfigFile bytes.
func readConfig(abs string) ([]byte, error) {
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > maxConfigFile {
		return nil, fmt.Errorf("file is %d bytes; the limit for a configuration file is %d", st.Size(), maxConfigFile)
	}
	b := make([]byte, st.Size())
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return b[:n], nil
}

// decode reads and decodes a JSONC file, returning its doc for positioned
// validation (nil when the file could not be read).
func (l *loader) decode(abs string, v any) *doc {
	b, ok := l.read(abs)
	if !ok {
		return nil
	}
	return decodeJSONC(l.rel(abs), b, v)
}

// done moves a doc's problems into the loader and reports whether it had
// no errors (warnings do not count).
func (l *loader) done(d *doc) bool {
	if d == nil {
		return false
	}
	l.probs = append(l.probs, d.probs...)
	return !d.errors()
}

// specFile is a definition file found by specFiles.
type specFile struct {
	id, abs string
}

// specFiles walks dir for definition files (every .yao, .jsonc or .json
// file; only NAME.mcp.EXT when mcp is set) and returns them sorted by id,
// recording problems for unusable names and duplicate ids. Ids are Yao's
// (share.SpecName): the path under dir without the extension and one more
// dot-segment, dots in names turned into '_', joined with '.'
// ("openai/gpt-3.5.conn.yao" -> "openai.gpt-3_5"). Hidden entries are
// skipped.
func (l *loader) specFiles(dir string, mcp bool) []specFile {
	var out []specFile
	byID := map[string]string{}
	l.walk(dir, func(p string) {
		name := filepath.Base(p)
		ext := filepath.Ext(name)
		if !slices.Contains(configExts, ext) || (mcp && !strings.HasSuffix(strings.TrimSuffix(name, ext), mcpSuffix)) {
			return
		}
		rel, _ := filepath.Rel(dir, p)
		id, msg := specName(filepath.ToSlash(rel))
		if msg != "" {
			// Yao loads such a file under an id nothing can name.
			l.warn(p, "%s; skipped", msg)
			return
		}
		if prev, dup := byID[id]; dup {
			l.fileProblem(p, "id %q is also defined by %s", id, l.rel(prev))
			return
		}
		byID[id] = p
		out = append(out, specFile{id, p})
	})
	slices.SortFunc(out, func(a, b specFile) int { return strings.Compare(a.id, b.id) })
	return out
}

// specName derives Yao's id of a definition file from its path under its
// folder (Yao share.SpecName), or says why it cannot.
func specName(rel string) (id, msg string) {
	parts := strings.Split(rel, "/")
	base := parts[len(parts)-1]
	names := strings.Split(base, ".")
	// The extension, and for .yao/.json/.jsonc one more segment (".conn").
	cut := 1
	if ext := names[len(names)-1]; ext == "yao" || ext == "json" || ext == "jsonc" {
		cut = 2
	}
	if len(names) <= cut {
		return "", fmt.Sprintf("no id can be derived from the file name %q: name it NAME.conn%s (Yao drops the extension and the segment before it, leaving an empty name)", base, filepath.Ext(base))
	}
	ids := make([]string, 0, len(parts))
	for _, dir := range parts[:len(parts)-1] {
		ids = append(ids, strings.ReplaceAll(dir, ".", "_"))
	}
	ids = append(ids, strings.Join(names[:len(names)-cut], "_"))
	for _, part := range ids {
		if !specPart.MatchString(part) {
			return "", fmt.Sprintf("cannot derive an id from this path: %q must be 1-128 characters without spaces, '/', '\\' or ':'", part)
		}
	}
	return strings.Join(ids, "."), ""
}

// walk calls fn for every regular file under dir (following no symlinked
// folders), skipping hidden entries and node_modules, within the walk
// limits. A missing dir is no problem.
func (l *loader) walk(dir string, fn func(abs string)) {
	files := 0
	// A symlinked folder is walked where it points, its files named under
	// dir.
	root := dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		root = real
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if rel, rerr := filepath.Rel(root, p); rerr == nil {
			p = filepath.Join(dir, rel)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return filepath.SkipDir
			}
			l.fileProblem(p, "%v", unwrapPath(err))
			return nil
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || name == "node_modules") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if depth(dir, p) > maxWalkDepth {
				l.fileProblem(p, "folders nest deeper than %d levels here; the rest is not read", maxWalkDepth)
				return filepath.SkipDir
			}
			return nil
		}
		if files++; files > maxWalkFiles {
			l.fileProblem(dir, "more than %d files; the rest is not read", maxWalkFiles)
			return filepath.SkipAll
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				return nil
			}
		}
		fn(p)
		return nil
	})
	if err != nil {
		l.fileProblem(dir, "%v", unwrapPath(err))
	}
}

// depth is how many folders p is below dir.
func depth(dir, p string) int {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == "." {
		return 0
	}
	return strings.Count(filepath.ToSlash(rel), "/") + 1
}

// oneOf reports whether s is one of set.
func oneOf(s string, set ...string) bool { return slices.Contains(set, s) }

// goKind names the JSON kind of a decoded value in problems.
func goKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return "null"
}

// unwrapPath drops the host path from an fs.PathError.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
