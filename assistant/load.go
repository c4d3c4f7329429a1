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
	PackageFile   = "package.yao"
	PromptsFile   = "prompts.yml"
	MCPsDir       = "mcps"
	SkillsDir     = "skills"
	HooksTS       = "src/index.ts"
	HooksJS       = "src/index.js"
	connSuffix    = ".conn"
	mcpSuffix     = ".mcp"
)

// configExts are the extensions of JSONC definition files
// (x.conn.yao, x.mcp.json, ...).
var configExts = []string{".yao", ".jsonc", ".json"}

// idPart is one component of an assistant, connector or MCP server id.
var idPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// Load reads the app folder dir: app.jsonc, connectors, and every assistant
// with its prompts, MCP definitions, skills and hooks source. Everything is
// validated and every default applied. When anything is wrong the error is
// a *LoadError listing every problem with its file and position; an
// unreadable dir is a plain error.
func Load(dir string) (*App, error) {
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
	app.Connectors = l.loadConnectors()
	app.Assistants = l.loadAssistants(app.Config, app.Connectors)
	if len(l.probs) > 0 {
		return nil, &LoadError{Root: root, Problems: SortProblems(l.probs)}
	}
	return app, nil
}

// loader collects problems while loading one app.
type loader struct {
	root  string
	probs []Problem
	// connIDs and their files, including connectors whose files had
	// problems, so a reference to a broken connector does not also
	// report it as undefined.
	connIDs map[string]bool
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
// none.
func (l *loader) done(d *doc) bool {
	if d == nil {
		return false
	}
	l.probs = append(l.probs, d.probs...)
	return len(d.probs) == 0
}

// defFiles walks dir for definition files named NAME<suffix><ext> and
// returns them by id ("deepseek/v3.conn.yao" -> "deepseek.v3"), recording
// problems for bad names and duplicate ids. Hidden entries are skipped.
func (l *loader) defFiles(dir, suffix string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return filepath.SkipDir
			}
			l.fileProblem(p, "%v", unwrapPath(err))
			return nil
		}
		name := d.Name()
		if p != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		base, ok := defBase(name, suffix)
		if !ok {
			return nil
		}
		relDir, _ := filepath.Rel(dir, filepath.Dir(p))
		parts := []string{}
		if relDir != "." {
			parts = strings.Split(filepath.ToSlash(relDir), "/")
		}
		parts = append(parts, base)
		for _, part := range parts {
			if !idPart.MatchString(part) {
				l.fileProblem(p, "cannot derive an id from this path: %q must be 1-64 letters, digits, '_' or '-', starting with a letter or digit", part)
				return nil
			}
		}
		id := strings.Join(parts, ".")
		if prev, dup := out[id]; dup {
			l.fileProblem(p, "id %q is also defined by %s", id, l.rel(prev))
			return nil
		}
		out[id] = p
		return nil
	})
	if err != nil {
		l.fileProblem(dir, "%v", unwrapPath(err))
	}
	return out
}

// defBase strips suffix+ext from a definition file name ("v3.conn.yao" ->
// "v3").
func defBase(name, suffix string) (string, bool) {
	for _, ext := range configExts {
		if strings.HasSuffix(name, suffix+ext) {
			return strings.TrimSuffix(name, suffix+ext), true
		}
	}
	return "", false
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
